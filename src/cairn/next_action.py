"""What a person can do next about a blocked or waiting job, or an error: structured.

Below the CLI nothing names a command: a diagnosis says what happened and what to fix, and
carries `NextAction`s beside it. Each front end (the CLI today, the API and web later)
renders them in its own words (the CLI's are in `cairn.cli.next_steps`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Action(StrEnum):
    """What a person (or a front end on their behalf) can do next."""

    resume = "resume"
    """Continue the job from where it stopped, once its diagnosis is dealt with."""
    cancel = "cancel"
    """Stop the job for good; what it delivered stays, nothing more happens."""
    retry = "retry"
    """Start an ended job anew as a new job, from the same request."""
    show = "show"
    """Look at the job again as it is now."""
    review = "review"
    """Look at the result a job waits with at review, before approving or rejecting it."""
    approve = "approve"
    """Approve the gate the job waits at (at review: deliver its result)."""
    approve_run = "approve_run"
    """Approve the job's run: an admin of its group other than the requester does it."""
    approve_dependency = "approve_dependency"
    """Approve the dependency the job's agent asked for."""
    reply = "reply"
    """Ask for changes to the result a job waits with at review; the same job works on it."""
    reject = "reject"
    """Reject at the gate the job waits at, with a reason."""
    add_admin = "add_admin"
    """Create a user who is an admin (a lone admin cannot approve their own runs)."""
    auto_approve_runs = "auto_approve_runs"
    """Let `group`'s policy approve interactive runs, so they need no person."""
    list_jobs = "list_jobs"
    """See which jobs there are."""
    init = "init"
    """Create the store (nothing works before there is one)."""
    create_room = "create_room"
    """Create a room for a repository."""
    add_user = "add_user"
    """Create a user."""
    add_group = "add_group"
    """Create a group."""
    add_group_member = "add_group_member"
    """Add a user to `group` (an admin of the group does it)."""
    add_group_admin = "add_group_admin"
    """Make a user an admin of `group`."""
    prune_cache = "prune_cache"
    """Remove dependency cache entries that can never be used again."""
    demo = "demo"
    """Run the demo again, from scratch (its home is thrown away, so nothing resumes)."""


@dataclass(frozen=True)
class NextAction:
    """One thing to do next: an action and what it applies to (a job, a group)."""

    action: Action
    job: int | None = None
    group: str | None = None

    def to_data(self) -> dict[str, Any]:
        """The JSON form: the action and only the fields that are set."""
        data: dict[str, Any] = {"action": self.action.value}
        if self.job is not None:
            data["job"] = self.job
        if self.group is not None:
            data["group"] = self.group
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> NextAction:
        """The action its JSON form describes; an unknown action is a ValueError."""
        job = data.get("job")
        group = data.get("group")
        return cls(
            Action(data["action"]),
            job=None if job is None else int(job),
            group=None if group is None else str(group),
        )


def to_data(actions: Iterable[NextAction]) -> list[dict[str, Any]]:
    """The JSON form of several next actions, in order."""
    return [a.to_data() for a in actions]


def from_data(data: Iterable[Mapping[str, Any]] | None) -> tuple[NextAction, ...]:
    """Next actions from their JSON form (None, as in a row from before they existed: none)."""
    return tuple(NextAction.from_data(d) for d in data or ())
