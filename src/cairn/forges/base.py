"""What a forge is to cairn: five calls, and the records they answer with."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol


class PullState(StrEnum):
    """Where a pull (merge) request stands on its forge."""

    open = "open"
    closed = "closed"
    """Closed without merging: by cairn on a rejection, or by a person by hand."""
    merged = "merged"


class PullAction(StrEnum):
    """What `Forge.update` does to a pull request."""

    comment = "comment"
    close = "close"
    ready = "ready"
    """Mark a draft ready for review."""
    merge = "merge"


@dataclass(frozen=True)
class Access:
    """What the credential may do on the repository; `missing` names what it may not."""

    read: bool
    push: bool
    default_branch: str | None
    missing: tuple[str, ...] = ()


@dataclass(frozen=True)
class Check:
    """One check run (GitHub) or commit status / pipeline job (GitLab)."""

    name: str
    state: str  # success | failure | pending


@dataclass(frozen=True)
class Review:
    """One review: who, and whether they approved."""

    user: str
    state: str  # approved | changes_requested | commented


@dataclass(frozen=True)
class PullRequest:
    """A pull (merge) request as cairn shows it (`cairn show --json`'s `pull_request`)."""

    number: int
    url: str
    state: PullState
    head: str
    base: str
    body: str
    draft: bool
    author: str | None = None
    head_sha: str | None = None
    checks: tuple[Check, ...] = ()
    reviews: tuple[Review, ...] = ()

    def to_dict(self) -> dict[str, object]:
        """The JSON shape: number, url, state, checks, reviews, approvals (and the branches)."""
        return {
            "number": self.number,
            "url": self.url,
            "state": self.state.value,
            "draft": self.draft,
            "head": self.head,
            "base": self.base,
            "checks": [{"name": c.name, "state": c.state} for c in self.checks],
            "reviews": [{"user": r.user, "state": r.state} for r in self.reviews],
            "approvals": self.approvals(),
        }

    def approvals(self) -> int:
        """Approving reviewers other than the author: as on GitHub, the one who asked for the
        change (cairn's token opened it) does not count as a second pair of eyes."""
        latest: dict[str, str] = {}
        for review in self.reviews:  # oldest first: a later decision replaces an earlier one
            if review.state != "commented":  # a comment neither gives nor withdraws approval
                latest[review.user] = review.state
        latest.pop(self.author or "", None)
        return sum(1 for state in latest.values() if state == "approved")


def carries_line(body: str, line: str) -> bool:
    """Whether `body` has `line` as one of its lines (surrounding blanks aside): a key is
    matched whole, never as a part of a longer key or of someone's prose."""
    return any(own.strip() == line for own in body.splitlines())


class Forge(Protocol):
    """A repository on a forge, reached with one credential."""

    def check_access(self) -> Access:
        """What the credential can do on the repository (read, push)."""
        ...

    def find_pull_requests(self, head: str, key: str | None = None) -> list[PullRequest]:
        """Pull requests from branch `head` in any state; with `key`, also those whose body
        has `key` as a whole line (a job's idempotency key line), from any branch."""
        ...

    def open_pull_request(
        self, head: str, base: str, title: str, body: str, *, draft: bool
    ) -> PullRequest:
        """Open a pull request from `head` into `base`."""
        ...

    def get_pull_request(self, number: int) -> PullRequest:
        """The pull request with its checks (on its head commit) and reviews."""
        ...

    def update(
        self, number: int, action: PullAction, text: str | None = None, *, sha: str | None = None
    ) -> PullRequest:
        """Comment on, close, mark ready or merge the pull request; merging respects branch
        protection (a refusal is a ForgeError saying why) and, with `sha`, happens only while
        the head is still that commit: what was approved, not what was pushed on top since."""
        ...
