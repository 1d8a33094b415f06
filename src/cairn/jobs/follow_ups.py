"""A reviewer's follow-ups (`cairn reply`) as the agent stage hands them to the job's next turn.

The messages wait in the job's own context until a turn is handed them; the agent's first save
of that turn clears them (`context.save_agent_state`), so each is delivered exactly once, also
across a crash. `--fresh` hands the turn a new opening instead: the request, the messages and
the workspace's current diff against the job's baseline, masked and bounded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cairn.jobs.reply import requested_changes
from cairn.sanitize import bound

if TYPE_CHECKING:
    from cairn.jobs.context import JobContext
    from cairn.jobs.drive import Drive

DIFF_LIMIT = 12_000
"""How much of the current diff a fresh opening carries (its cut is marked)."""


@dataclass(frozen=True)
class FollowUps:
    """What a turn is handed: the messages to add to its conversation, or a fresh opening."""

    messages: tuple[str, ...] = ()
    fresh_opening: str | None = None


def for_turn(drive: Drive, saved: JobContext) -> FollowUps:
    """The pending follow-ups of the job's context, in the form its next turn takes them."""
    if not saved.follow_ups:
        return FollowUps()
    if not saved.fresh:
        return FollowUps(messages=tuple(saved.follow_ups))
    return FollowUps(fresh_opening=fresh_opening(drive, saved.follow_ups))


def fresh_opening(drive: Drive, messages: list[str]) -> str:
    """A new conversation's opening: the request, the reviewer's messages, the current diff."""
    asked = "\n\n".join(messages)
    return (
        "The job's request:\n"
        f"{drive.sanitizer.mask(drive.request.text)}\n\n"
        "The reviewer looked at the change below and asked for changes:\n"
        f"{asked}\n\n"
        "The change so far (a diff against the job's baseline; the workspace holds it):\n"
        f"{_current_diff(drive)}"
    )


def _current_diff(drive: Drive) -> str:
    baseline = drive.job.baseline or ""
    diff = drive.worktree.git(
        "diff", "--no-color", "--no-renames", "--no-ext-diff", "--no-textconv",
        f"{baseline}^{{tree}}", drive.worktree.content_id(),
    )  # fmt: skip
    # Masked before it is cut, so no secret survives as an unrecognizable half.
    return bound(drive.sanitizer.mask(diff), DIFF_LIMIT) or "(no change yet)"


def agent_inputs(drive: Drive) -> dict[str, Any]:
    """What the agent stage's recipe adds for follow-ups: the ids of the changes asked for.

    Nothing for a job that was never replied to, so its recipe stays what it always was.
    """
    with drive.store.read() as conn:
        asked = requested_changes(conn, drive.job.id)
    return {"changes_requested": asked} if asked else {}
