"""The one door to the git CLI: every call hardened, every failure a plain-words WorkspaceError.

Hardening: repositories cairn touches may belong to someone else, and a repository's own
hooks and config can name programs to run. Command-line `-c` settings outrank every config
file, so each call switches off the settings that would run such programs during cairn's
own operations (hooks, fsmonitor, signing, auto-gc, submodule recursion, `ext::` URLs).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from cairn.errors import WorkspaceError

HARDENING: tuple[str, ...] = (
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.fsmonitor=false",
    "-c", "protocol.ext.allow=never",
    "-c", "commit.gpgSign=false",
    "-c", "submodule.recurse=false",
    # Auto-gc forks a background process in whichever repository it runs in; a person's
    # repository is not cairn's to repack, and a detached gc outlives cairn's lock.
    "-c", "gc.auto=0",
    "-c", "maintenance.auto=false",
)  # fmt: skip

IDENTITY: tuple[str, ...] = ("-c", "user.name=cairn", "-c", "user.email=cairn@localhost")
"""Pass to any call that creates a commit, so every cairn commit has one author."""

_FIXED_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}

# Inherited variables that would point git at another repository, index or config than the
# one cairn names (cairn may itself run inside a git hook), or override cairn's identity.
_DROPPED_ENV = re.compile(
    r"GIT_(DIR|WORK_TREE|INDEX_FILE|OBJECT_DIRECTORY|ALTERNATE_OBJECT_DIRECTORIES|COMMON_DIR"
    r"|NAMESPACE|PREFIX|CONFIG|CONFIG_PARAMETERS|CONFIG_COUNT|CONFIG_KEY_\d+|CONFIG_VALUE_\d+"
    r"|AUTHOR_NAME|AUTHOR_EMAIL|COMMITTER_NAME|COMMITTER_EMAIL|EXTERNAL_DIFF)"
)

# scp-like addresses (`host:path`, `user@host:path`) have a colon before any slash.
_SCP_LIKE = re.compile(r"^[^/]*:")


class GitResult(NamedTuple):
    """What a git command answered: its exit code, stdout (without trailing newline), stderr."""

    returncode: int
    stdout: str
    stderr: str


class GitError(WorkspaceError):
    """A git command failed; `detail` keeps git's raw stderr for a caller to sanitize."""

    def __init__(self, message: str, *, detail: str = "", returncode: int | None = None) -> None:
        super().__init__(message)
        self.detail = detail
        self.returncode = returncode


def run_git(
    *args: str,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    check: bool = True,
    failure: str | None = None,
    timeout: float | None = None,
) -> str:
    """Run one hardened git command and return its stdout without the trailing newline."""
    result = _run(args, cwd=cwd, env=env, input=input, failure=failure, timeout=timeout)
    if check and result.returncode != 0:
        raise GitError(
            failure or _default_failure(args),
            detail=result.stderr.strip(),
            returncode=result.returncode,
        )
    return result.stdout.removesuffix("\n")


def try_git(
    *args: str,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
) -> GitResult:
    """Run one hardened git command whose exit code is an answer, not a failure."""
    result = _run(args, cwd=cwd, env=env, input=input, failure=None, timeout=None)
    return GitResult(result.returncode, result.stdout.removesuffix("\n"), result.stderr.strip())


def git_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment every cairn git call runs with."""
    environ = {k: v for k, v in os.environ.items() if not _DROPPED_ENV.fullmatch(k)}
    environ.update(_FIXED_ENV)
    environ.update(extra or {})
    return environ


def local_path(repo: str) -> Path | None:
    """The filesystem path a repository address names, or None when it is a remote URL."""
    if repo.startswith("file://"):
        return Path(repo.removeprefix("file://")).expanduser().absolute()
    if "://" in repo or _SCP_LIKE.match(repo):
        return None
    return Path(repo).expanduser().absolute()


def transport_address(repo: str) -> str:
    """The address to hand to fetch, push or ls-remote, independent of the caller's cwd."""
    path = local_path(repo)
    return repo if path is None else str(path)


def check_branch_name(branch: str) -> None:
    """Refuse a branch name git would not accept, before it reaches any refspec."""
    result = try_git("check-ref-format", f"refs/heads/{branch}", cwd="/")
    if result.returncode != 0 or branch.startswith("-"):
        raise WorkspaceError(f"{branch[:80]!r} is not a valid git branch name")


def _run(
    args: tuple[str, ...],
    *,
    cwd: Path | str | None,
    env: Mapping[str, str] | None,
    input: str | None,
    failure: str | None,
    timeout: float | None,
) -> subprocess.CompletedProcess[str]:
    command = ["git", *HARDENING, *args]
    try:
        return subprocess.run(
            command,
            cwd=cwd,
            env=git_environment(env),
            input=input,
            capture_output=True,
            text=True,
            # Paths git prints may not be UTF-8; keep their bytes round-trippable.
            errors="surrogateescape",
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError as exc:
        missing = "git is not installed" if exc.filename == "git" else "a folder is missing"
        raise GitError(f"{failure or _default_failure(args)}: {missing}") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"{failure or _default_failure(args)}: git did not finish in time") from None


def _default_failure(args: tuple[str, ...]) -> str:
    words = [a for a in args if not a.startswith("-") and "=" not in a]
    return f"a git {words[0]!r} step failed" if words else "a git step failed"
