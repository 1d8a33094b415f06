"""What a forge credential can do over git itself: read the branches, and push one.

The push is a dry run of a cairn-owned branch name built from an empty commit in a private
scratch repository: git asks the forge for permission to receive (which a read-only
credential is refused), and sends nothing. The base branch is never a target.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass

from cairn.forges.registry import ForgeSettings
from cairn.workspace.askpass import NO_CREDENTIAL_HELPERS, askpass_environment
from cairn.workspace.git import IDENTITY, GitTimeout, run_git, try_git

PROBE_BRANCH = "cairn/access-check"
_HTTP_ONLY = (
    "-c", "protocol.allow=never",
    "-c", "protocol.https.allow=always",
    "-c", "protocol.http.allow=always",  # a forge on a private network (and FakeForge)
)  # fmt: skip


@dataclass(frozen=True)
class GitAccess:
    """What git over HTTPS answered: the base branch's tip, and what it refused.

    `push_checked` is False when the push was not tried (not asked for, or the read failed
    first): then nothing is known about pushing, and nothing may be said to be fine.
    """

    base_tip: str | None
    problems: tuple[str, ...]
    push_checked: bool = False


def probe_git(
    settings: ForgeSettings, token: str, base: str, *, timeout: float, push: bool = True
) -> GitAccess:
    """Read the base branch and (with `push`) dry-run a push of PROBE_BRANCH with `token`."""
    with askpass_environment(settings.git_username, token) as env:
        settings_args = (*NO_CREDENTIAL_HELPERS, *_HTTP_ONLY)
        try:
            read = try_git(
                *settings_args, "ls-remote", "--", settings.git_url, f"refs/heads/{base}",
                env=env, timeout=timeout,
            )  # fmt: skip
        except GitTimeout as exc:
            return GitAccess(None, (str(exc),))
        if read.returncode != 0:
            return GitAccess(None, (_refusal(settings, read.stderr, pushing=False),))
        tip = read.stdout.split("\t", 1)[0] or None
        problems: tuple[str, ...] = (
            () if tip else (f"the repository has no branch {base!r}; pass --base",)
        )
        if not push:
            return GitAccess(tip, problems)
        with tempfile.TemporaryDirectory(prefix="cairn-check-") as scratch:
            run_git("init", "-q", "--bare", scratch)
            tree = run_git("mktree", cwd=scratch, input="")
            commit = run_git(*IDENTITY, "commit-tree", tree, "-m", "access check", cwd=scratch)
            pushed = try_git(
                *settings_args, "push", "--dry-run", "--", settings.git_url,
                f"{commit}:refs/heads/{PROBE_BRANCH}", cwd=scratch, env=env, timeout=timeout,
            )  # fmt: skip
        if pushed.returncode != 0:
            problems += (_refusal(settings, pushed.stderr, pushing=True),)
        return GitAccess(tip, problems, push_checked=True)


_HTTP_STATUS = re.compile(r"returned error: (\d{3})")


def _refusal(settings: ForgeSettings, stderr: str, *, pushing: bool) -> str:
    """What a refused git call means, in the forge's permission names; never git's text."""
    from cairn.forges import github, gitlab

    names = github if settings.kind == "github" else gitlab
    write = names.PUSH if settings.kind == "github" else gitlab.WRITE
    # git names the HTTP status as "The requested URL returned error: 403"; a bare "401"
    # could be part of the forge's port or a commit id in the same text.
    status = _HTTP_STATUS.search(stderr)
    code = status.group(1) if status else None
    if "Authentication failed" in stderr or code == "401":
        return "git over HTTPS refused the credential (401): it is wrong, expired or revoked"
    if code == "403" and pushing:
        return f"git over HTTPS may not push a branch: the credential lacks {write}"
    if code in {"403", "404"} or "not found" in stderr.lower():
        return f"git over HTTPS cannot read {settings.repo}: the credential lacks {names.READ}"
    what = "push a branch to" if pushing else "read"
    return f"git could not {what} {settings.git_url}; check --forge-url and the network"
