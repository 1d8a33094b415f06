"""The fake forge's world: repositories, tokens, pull requests, checks and reviews.

Kept apart from the HTTP layer (`fake_forge`) and from each API's wire format
(`fake_forge_api`): both GitHub and GitLab modes read and change the same records.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

READ = "read"
WRITE = "write"
"""Token scopes: `read` sees the repository and its pull requests; `write` also pushes
branches and opens, comments on, closes and merges pull requests."""

_GIT = ("git", "-c", "core.hooksPath=/dev/null", "-c", "user.name=forge", "-c", "user.email=f@x")


@dataclass
class Protection:
    """Branch protection on a base branch: what a merge through the API needs first."""

    required_approvals: int = 0
    required_checks: tuple[str, ...] = ()


@dataclass
class Pull:
    """One pull (merge) request, in the forge's own terms."""

    number: int
    repo: str
    head: str
    base: str
    title: str
    body: str
    draft: bool
    author: str
    state: str = "open"  # open | closed | merged
    merge_sha: str | None = None
    closed_by_hand: bool = False
    comments: list[str] = field(default_factory=list)
    reviews: list[tuple[str, str]] = field(default_factory=list)  # (user, approved|...)


@dataclass
class Token:
    """A credential the forge accepts: who it belongs to and what it may do."""

    user: str
    scopes: frozenset[str]


class ForgeWorld:
    """Repositories (bare, on disk), tokens, pull requests; not thread-safe on its own."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.tokens: dict[str, Token] = {}
        self.repos: dict[str, str] = {}  # owner/name -> default branch
        self.protection: dict[tuple[str, str], Protection] = {}
        self.pulls: dict[str, list[Pull]] = {}
        self.checks: dict[tuple[str, str], dict[str, str]] = {}  # (repo, sha) -> name: state
        self.statuses: dict[tuple[str, str], dict[str, str]] = {}  # GitHub's commit statuses

    def repo_path(self, repo: str) -> Path:
        return self.root / f"{repo}.git"

    def create_repo(self, repo: str, *, source: Path | None, default_branch: str) -> Path:
        if not re.fullmatch(r"[\w.-]+/[\w.-]+", repo):
            raise ValueError(f"{repo!r} is not owner/name")
        path = self.repo_path(repo)
        path.parent.mkdir(parents=True, exist_ok=True)
        _git("init", "--bare", "-q", f"--initial-branch={default_branch}", str(path))
        _git("config", "http.receivepack", "true", cwd=path)
        if source is not None:
            _git("push", "-q", str(path), f"HEAD:refs/heads/{default_branch}", cwd=source)
        else:
            tree = _git("mktree", cwd=path, input="")
            commit = _git("commit-tree", tree, "-m", "initial", cwd=path)
            _git("update-ref", f"refs/heads/{default_branch}", commit, cwd=path)
        self.repos[repo] = default_branch
        self.pulls[repo] = []
        return path

    def branch_sha(self, repo: str, branch: str) -> str | None:
        result = subprocess.run(
            [*_GIT, "rev-parse", "--verify", "-q", f"refs/heads/{branch}"],
            cwd=self.repo_path(repo),
            capture_output=True,
            text=True,
            check=False,
        )
        return result.stdout.strip() or None

    def open_pull(self, repo: str, head: str, base: str, title: str, body: str, *, draft: bool,
                  author: str) -> Pull:  # fmt: skip
        number = sum(len(p) for p in self.pulls.values()) + 1
        pull = Pull(number, repo, head, base, title, body, draft, author)
        self.pulls[repo].append(pull)
        return pull

    def find_pull(self, repo: str, number: int) -> Pull | None:
        return next((p for p in self.pulls.get(repo, []) if p.number == number), None)

    def checks_of(self, repo: str, sha: str | None) -> dict[str, str]:
        return dict(self.checks.get((repo, sha or ""), {}))

    def merge_refusal(self, pull: Pull) -> str | None:
        """Why branch protection refuses to merge `pull` now, or None."""
        if pull.state != "open":
            return "the pull request is not open"
        if pull.draft:
            return "the pull request is still a draft"
        rule = self.protection.get((pull.repo, pull.base), Protection())
        latest = dict(pull.reviews)  # as on GitHub: each reviewer's latest review counts
        latest.pop(pull.author, None)
        approvals = [user for user, state in latest.items() if state == "approved"]
        if len(approvals) < rule.required_approvals:
            return f"at least {rule.required_approvals} approving review is required"
        sha = self.branch_sha(pull.repo, pull.head) or ""
        # GitHub's required checks are check runs and commit statuses alike.
        checks = self.checks_of(pull.repo, sha) | self.statuses.get((pull.repo, sha), {})
        for name in rule.required_checks:
            if checks.get(name) != "success":
                return f"required status check {name!r} is expected"
        return None

    def merge(self, pull: Pull) -> str | None:
        """Merge `pull`'s head into its base with a merge commit; None on a conflict."""
        path = self.repo_path(pull.repo)
        base = self.branch_sha(pull.repo, pull.base)
        head = self.branch_sha(pull.repo, pull.head)
        assert base is not None and head is not None
        tree = subprocess.run(
            [*_GIT, "merge-tree", "--write-tree", base, head],
            cwd=path,
            capture_output=True,
            text=True,
            check=False,
        )
        if tree.returncode != 0:
            return None
        message = f"Merge pull request #{pull.number} from {pull.head}"
        commit = _git(
            "commit-tree", tree.stdout.split()[0], "-p", base, "-p", head, "-m", message, cwd=path
        )
        _git("update-ref", f"refs/heads/{pull.base}", commit, base, cwd=path)
        pull.state, pull.merge_sha = "merged", commit
        return commit


def _git(*args: str, cwd: Path | None = None, input: str | None = None) -> str:
    return subprocess.run(
        [*_GIT, *args], cwd=cwd, input=input, capture_output=True, text=True, check=True
    ).stdout.strip()
