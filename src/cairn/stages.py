"""The one allowlist of progress stages and job statuses, shared by the engine, CLI and API."""

from __future__ import annotations

from enum import StrEnum


class Stage(StrEnum):
    """A progress stage: the only stage names a user ever sees."""

    queued = "queued"
    """Submitted before the run gate was decided at submit (rows of an older cairn)."""
    awaiting_run_approval = "awaiting_run_approval"
    """The run gate: nothing runs until someone (or the group policy) approves."""
    preparing_baseline = "preparing_baseline"
    """Fetching the authoritative base branch and checking the baseline checkout."""
    preparing_workspace = "preparing_workspace"
    """Creating the job's own worktree from the recorded baseline revision."""
    preparing_dependencies = "preparing_dependencies"
    """Materializing verified dependencies into the workspace."""
    running_agent = "running_agent"
    """The agent works in the workspace, in the job's own context."""
    awaiting_dependency_approval = "awaiting_dependency_approval"
    """The agent asked for a package; a person must approve the exact name and version."""
    installing_dependency = "installing_dependency"
    """The constrained installer prepares an approved package."""
    verifying = "verifying"
    """The room's verify command runs against the result."""
    summarizing = "summarizing"
    """The result is committed to the job branch and summarized for review."""
    awaiting_review = "awaiting_review"
    """The integration gate: an admin approves or rejects the final change."""
    delivering = "delivering"
    """Pushing the job branch and merging it, each an effect recorded before and after.

    A merge left to a person keeps the job here, blocked, until `cairn resume` merges it.
    """
    completed = "completed"
    """Delivered: pushed and merged."""
    rejected = "rejected"
    """Refused at the integration gate; never rewritten as a success."""
    failed = "failed"
    """Ended on a failure; its diagnosis says why."""
    cancelled = "cancelled"
    """Stopped by a person."""

    @property
    def is_terminal(self) -> bool:
        """Whether the job has ended here."""
        return self in TERMINAL_STAGES


TERMINAL_STAGES = frozenset({Stage.completed, Stage.rejected, Stage.failed, Stage.cancelled})


class Status(StrEnum):
    """Where a job stands with respect to who must act next."""

    queued = "queued"
    """Runnable: any runner may claim it."""
    running = "running"
    """A runner holds its lease; claimable by another once the lease expires."""
    waiting = "waiting"
    """At a gate, waiting for a person's decision."""
    blocked = "blocked"
    """Needs someone outside cairn (a dirty checkout, lost access, a merge left to a person).

    `cairn resume` continues it.
    """
    completed = "completed"
    """Delivered."""
    rejected = "rejected"
    """Refused at the integration gate."""
    failed = "failed"
    """Ended on a failure."""
    cancelled = "cancelled"
    """Stopped by a person."""

    @property
    def is_terminal(self) -> bool:
        """Whether the job has ended."""
        return self in TERMINAL_STATUSES


TERMINAL_STATUSES = frozenset({Status.completed, Status.rejected, Status.failed, Status.cancelled})


class Gate(StrEnum):
    """A point where a decision is recorded."""

    run = "run"
    """Run approval: nothing of the job runs before it passes."""
    dependency = "dependency"
    """A dependency request: the exact package and version the agent asked for."""
    integration = "integration"
    """The final change, before it is delivered."""
    cancel = "cancel"
    """Someone stopped the job."""
    resume = "resume"
    """Someone continued a blocked job."""
    policy = "policy"
    """A group's policy changed (a decision with no job)."""


class Verdict(StrEnum):
    """What a decision decided."""

    approved = "approved"
    """A person let it pass."""
    rejected = "rejected"
    """A person refused it (with a reason, at the integration gate)."""
    auto = "auto"
    """Approved by group policy rather than a person; the decision names the policy."""
    cancelled = "cancelled"
    """The job was stopped."""
    resumed = "resumed"
    """The blocked job was continued."""
    changed = "changed"
    """A group's policy was changed (at the policy gate)."""
    changes_requested = "changes_requested"
    """A reviewer asked for changes at the integration gate (`cairn reply`), with a message."""
