"""The CLI's words for next actions: the one place below which no `cairn ...` command is named.

Each action renders as a clause that follows the text it belongs to (a diagnosis, an error
message), with its own joint: "…, then run `cairn resume 3`", "…; `cairn jobs` lists the jobs
there are". `job_line` is the one line a job that stopped driving leaves. `--json` gets the
structured form instead (`cairn.next_action.to_data`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from cairn.next_action import Action, NextAction
from cairn.stages import Stage, Status

if TYPE_CHECKING:
    from cairn.store.records import Job

_COMMAND = {
    Action.resume: "cairn resume {job}",
    Action.cancel: "cairn cancel {job}",
    Action.retry: "cairn retry {job}",
    Action.show: "cairn show {job}",
    Action.review: "cairn show {job}",
    Action.approve: "cairn approve {job}",
    Action.approve_run: "cairn approve {job} --as NAME",
    Action.approve_dependency: "cairn approve {job}",
    Action.reply: 'cairn reply {job} "MESSAGE"',
    Action.reject: "cairn reject {job} --reason ...",
    Action.add_admin: "cairn user add NAME --admin",
    Action.auto_approve_runs: (
        "cairn group policy {group} --run-approval auto --auto-kinds interactive"
    ),
    Action.list_jobs: "cairn jobs",
    Action.init: "cairn init",
    Action.create_room: "cairn room create",
    Action.add_user: "cairn user add NAME",
    Action.add_group: "cairn group add NAME",
    Action.add_group_member: "cairn group member add {group} NAME",
    Action.add_group_admin: "cairn group member add {group} NAME --admin",
    Action.prune_cache: "cairn cache prune",
    Action.demo: "cairn demo",
}

# The clause after the text, joint included; `{run}` is the command in backticks.
_CLAUSE = {
    Action.resume: ", then run {run}",
    Action.cancel: "; {run} stops it instead",
    Action.retry: "; {run} starts it anew",
    Action.show: "; look at it again with {run}",
    Action.review: "; review it with {run}",
    Action.approve: "; {run} approves it",
    Action.approve_run: (
        "; an admin other than the requester approves it with {run} "
        "(a requester never approves their own run, even as an admin)"
    ),
    Action.approve_dependency: "; {run} approves the package it asks for",
    Action.reply: "; {run} asks for changes instead",
    Action.reject: "; {run} rejects it",
    Action.add_admin: "; alone? add a second admin with {run}",
    Action.auto_approve_runs: "; or let the policy approve interactive runs with {run}",
    Action.list_jobs: "; {run} lists the jobs there are",
    Action.init: "; run {run} first",
    Action.create_room: "; {run} makes one",
    Action.add_user: "; {run} creates one",
    Action.add_group: "; {run} creates one",
    Action.add_group_member: "; an admin of the group can add them with {run}",
    Action.add_group_admin: "; make someone else an admin first ({run})",
    Action.prune_cache: (
        "; run {run} to remove it and the next job prepares the dependencies afresh"
    ),
    Action.demo: ", then run {run} again (its home is thrown away, so there is no job to resume)",
}


def command(step: NextAction) -> str:
    """The command line that takes this step, in backticks."""
    template = _COMMAND[step.action]
    return "`" + template.format(job=step.job, group=step.group or "GROUP") + "`"


def with_next(text: str, steps: Iterable[NextAction]) -> str:
    """`text` followed by the CLI's words for each step, as one sentence."""
    return text + "".join(_CLAUSE[s.action].format(run=command(s)) for s in steps)


def diagnosis(text: str | None, steps: Iterable[NextAction]) -> str | None:
    """A stored diagnosis as the CLI shows it, its next actions in words; None stays None."""
    return None if text is None else with_next(text, steps)


# What a waiting job waits for, before the next actions that decide it.
_WAITING = {
    Stage.awaiting_run_approval: "waits at the run gate",
    Stage.awaiting_dependency_approval: "waits for its dependency request to be decided",
    Stage.awaiting_review: "waits for review",
}


def job_line(job: Job) -> str | None:
    """What a job that stopped driving says: its diagnosis or what it waits for, then its steps."""
    if job.diagnosis:
        return with_next(job.diagnosis, job.next_actions)
    if job.status is Status.waiting:
        return with_next(_WAITING.get(job.stage, f"waits at {job.stage}"), job.next_actions)
    return None
