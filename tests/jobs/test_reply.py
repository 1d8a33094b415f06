"""`cairn reply`: at review, a reviewer asks for changes and the same job works on them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cairn.errors import InvalidState, NotAllowed, UsageError
from cairn.jobs import context
from cairn.stages import Stage, Status
from cairn.store import decisions, identity
from cairn.testing.harness import Cairn, Turns

CAIRN = Path(sys.executable).parent / "cairn"
TWO_ROUNDS = """
steps:
  - write: {path: first.txt, content: "from the first turn\\n"}
  - finish: {summary: "wrote first.txt"}
  - write: {path: second.txt, content: "asked for at review\\n"}
  - finish: {summary: "wrote second.txt as the reviewer asked"}
"""
APPENDS = """
steps:
  - write: {path: out.txt, content: "one\\n"}
  - finish: {summary: "wrote one"}
  - append: {path: out.txt, content: "two\\n"}
  - finish: {summary: "appended two"}
"""
ASKS_FIRST = """
steps:
  - request_dependency: {ecosystem: pypi, name: termcolor, version: "2.4.0", reason: "colour"}
  - write: {path: a.txt, content: "a\\n"}
  - finish: {summary: "added a"}
"""
NOTHING_MORE = """
steps:
  - write: {path: first.txt, content: "from the first turn\n"}
  - finish: {summary: "wrote first.txt"}
  - finish: {summary: "first.txt already says it all; nothing to change"}
"""
MESSAGE = "Please also add second.txt"


def _at_review(cairn: Cairn, steps: str = TWO_ROUNDS, **options: str) -> int:
    job = cairn.submit(steps, "Add first.txt", **options)
    cairn.work()
    assert (cairn.job(job.id).stage, cairn.job(job.id).status) == (
        Stage.awaiting_review,
        Status.waiting,
    )
    return job.id


def _branch_file(cairn: Cairn, job_id: int, path: str) -> str:
    """The file as the job's branch holds it (the summary committed it there)."""
    done = subprocess.run(
        ["git", "show", f"HEAD:{path}"],
        cwd=cairn.workspace(job_id),
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def test_a_reply_reaches_the_same_context_and_the_job_returns_to_review_with_the_new_change(
    cairn: Cairn, turns: Turns
) -> None:
    job = _at_review(cairn)
    assert "wrote first.txt" in cairn.detail(job)["review"]["summary"]
    base = cairn.git("rev-parse", "main")

    replied = cairn.reply(job, MESSAGE)
    assert (replied.stage, replied.status) == (Stage.running_agent, Status.queued)
    assert replied.baseline == base, "same baseline"
    assert cairn.detail(job)["review"] is None, "nothing to review while the agent works"
    cairn.work()

    back = cairn.detail(job)
    assert (back["stage"], back["status"]) == ("awaiting_review", "waiting")
    assert back["baseline"] == base
    summary = back["review"]["summary"]
    assert "wrote second.txt as the reviewer asked" in summary, "the new turn's summary"
    assert "first.txt" in summary and "second.txt" in summary, "the diffstat holds both"
    first, second = turns.of(job)
    assert second.follow_ups == (MESSAGE,) and second.fresh_opening is None
    assert first.follow_ups == ()
    # The same context: the script goes on after the finish that ended its first turn.
    assert second.state is not None and second.state["position"] == 2
    assert turns.notes(job) == [MESSAGE], "delivered once, to this job only"
    agent_runs = [s for s in back["stages"] if s["name"] == "running_agent"]
    assert [s["status"] for s in agent_runs] == ["accepted", "accepted"]
    assert agent_runs[0]["recipe_id"] != agent_runs[1]["recipe_id"], "the reply is in its recipe"
    verdicts = [(d["gate"], d["verdict"], d["actor"], d["reason"]) for d in back["decisions"]]
    assert verdicts[1:] == [("integration", "changes_requested", "admin", MESSAGE)]
    assert back["next"] == [
        {"action": "review", "job": job},
        {"action": "approve", "job": job},
        {"action": "reply", "job": job},
        {"action": "reject", "job": job},
    ]

    cairn.approve(job)
    cairn.work()
    assert cairn.job(job).status is Status.completed
    assert cairn.git("show", "main:first.txt") == "from the first turn"
    assert cairn.git("show", "main:second.txt") == "asked for at review"


def test_reply_fresh_hands_a_fresh_opening_with_the_request_the_message_and_the_diff(
    cairn: Cairn, turns: Turns
) -> None:
    job = _at_review(cairn)
    cairn.reply(job, MESSAGE, fresh=True)
    cairn.work()

    assert cairn.job(job).stage is Stage.awaiting_review
    [opening] = turns.fresh_openings(job)
    assert "Add first.txt" in opening, "the request"
    assert MESSAGE in opening, "the reviewer's message"
    assert "+from the first turn" in opening and "first.txt" in opening, "the current diff"
    second = turns.of(job)[1]
    assert second.follow_ups == (), "the message is in the opening, not added a second time"
    # A script has no conversation to start anew: it keeps its position (documented).
    assert second.state is not None and second.state["position"] == 2
    assert _branch_file(cairn, job, "second.txt") == "asked for at review"
    with cairn.store.begin() as conn:
        saved = context.load(conn, job)
    assert (saved.follow_ups, saved.fresh) == ([], False), "cleared once delivered"
    assert saved.agent_state is not None and opening in saved.agent_state["notes_seen"]


def test_a_follow_up_that_changes_no_file_returns_to_review_with_its_own_summary(
    cairn: Cairn,
) -> None:
    job = _at_review(cairn, NOTHING_MORE)
    cairn.reply(job, "Is first.txt complete?")
    cairn.work()
    back = cairn.detail(job)
    assert (back["stage"], back["status"]) == ("awaiting_review", "waiting")
    assert "nothing to change" in back["review"]["summary"], "the new turn's words"
    assert "first.txt" in back["review"]["summary"], "cairn's diffstat, as before"
    cairn.approve(job)
    cairn.work()
    assert cairn.job(job).status is Status.completed


def test_an_approval_given_before_a_reply_does_not_deliver_the_new_work(
    cairn: Cairn, turns: Turns
) -> None:
    job = _at_review(cairn)
    base = cairn.git("rev-parse", "main")
    approved = cairn.approve(job)
    assert (approved.stage, approved.status) == (Stage.awaiting_review, Status.queued)

    cairn.reply(job, MESSAGE)  # before any runner delivered the approved result
    cairn.work()

    waiting = cairn.detail(job)
    assert (waiting["stage"], waiting["status"]) == ("awaiting_review", "waiting")
    assert waiting["effects"] == [], "the earlier approval delivered nothing"
    assert cairn.git("rev-parse", "main") == base
    assert _branch_file(cairn, job, "second.txt") == "asked for at review"

    cairn.approve(job)
    cairn.work()
    assert cairn.job(job).status is Status.completed
    assert cairn.git("show", "main:second.txt") == "asked for at review"


def test_a_reply_is_refused_outside_review_saying_where_the_job_is(cairn: Cairn) -> None:
    asks = cairn.submit(ASKS_FIRST, "Add a.txt")
    cairn.work()
    assert cairn.job(asks.id).stage is Stage.awaiting_dependency_approval
    with pytest.raises(InvalidState, match="awaiting_dependency_approval") as refused:
        cairn.reply(asks.id, MESSAGE)
    assert "waits for review" in str(refused.value)

    job = _at_review(cairn)
    for blank in ("", "   ", "\x1b[0m\n\t"):
        with pytest.raises(UsageError, match="message"):
            cairn.reply(job, blank)
    cairn.approve(job)
    cairn.work()
    with pytest.raises(InvalidState, match="has ended") as ended:
        cairn.reply(job, MESSAGE)
    assert [step.action.value for step in ended.value.next_actions] == ["retry"]
    with cairn.store.begin() as conn:
        verdicts = [d.verdict.value for d in decisions.for_job(conn, job)]
    assert "changes_requested" not in verdicts, "a refused reply records nothing"


def test_only_who_decides_the_integration_gate_may_reply(cairn: Cairn) -> None:
    job = _at_review(cairn)
    with pytest.raises(NotAllowed, match="only an admin"):
        cairn.reply(job, MESSAGE, actor="alice")  # a member, and the requester
    with cairn.store.begin() as conn:
        identity.add_user(conn, "eve")
    with pytest.raises(NotAllowed, match="not a member"):
        cairn.reply(job, MESSAGE, actor="eve")
    assert cairn.job(job).stage is Stage.awaiting_review

    with cairn.store.begin() as conn:
        group = identity.get_group(conn, "default")
        identity.remove_membership(conn, group.id, identity.get_user(conn, "alice").id)
    with pytest.raises(NotAllowed, match="no longer a member") as lost:
        cairn.reply(job, MESSAGE)  # the job would run again for a requester who left
    assert [step.action.value for step in lost.value.next_actions] == ["cancel"]
    assert cairn.job(job).stage is Stage.awaiting_review

    own = _at_review(cairn, actor="bob")  # an admin may ask for changes to their own job
    assert cairn.reply(own, MESSAGE, actor="bob").stage is Stage.running_agent


def test_the_message_is_stored_masked_and_bounded(cairn: Cairn, turns: Turns) -> None:
    job = _at_review(cairn)
    token = "ghp_" + "a1B2" * 9
    cairn.reply(job, f"use the key {token} \x1b[31mnow\x1b[0m " + "x" * 5000)
    with cairn.store.begin() as conn:
        reason = decisions.for_job(conn, job)[-1].reason
        pending = context.load(conn, job).follow_ups
    assert reason is not None and token not in reason and "[secret]" in reason
    assert "\x1b" not in reason and len(reason) <= 1000
    assert pending == [reason], "the agent is handed what the ledger holds"
    cairn.work()
    assert turns.of(job)[1].follow_ups == (reason,)


def _work(cairn: Cairn, faults: str = "") -> int:
    env = os.environ | {
        "CAIRN_HOME": str(cairn.config.home),
        "CAIRN_LEASE_SECONDS": "0.5",
        "CAIRN_FAULTS": faults,
    }
    env["CAIRN_DATABASE_URL"] = cairn.store.engine.url.render_as_string(hide_password=False)
    done = subprocess.run(
        [str(CAIRN), "work", "--until-idle"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode in (0, 137), done.stderr
    return done.returncode


@pytest.mark.parametrize(
    "point", ["crash:after_start:running_agent", "crash:before_accept:running_agent"]
)
def test_a_crash_between_the_reply_and_its_turn_delivers_the_message_exactly_once(
    cairn: Cairn, point: str
) -> None:
    job = _at_review(cairn, APPENDS)
    cairn.reply(job, MESSAGE)
    assert _work(cairn, point) == 137, f"{point} never fired"
    assert _work(cairn) == 0

    assert cairn.job(job).stage is Stage.awaiting_review
    with cairn.store.begin() as conn:
        saved = context.load(conn, job)
    assert saved.agent_state is not None
    assert saved.agent_state["notes_seen"].count(MESSAGE) == 1
    assert saved.follow_ups == []
    assert _branch_file(cairn, job, "out.txt") == "one\ntwo", "the follow-up's edit made once"
    assert "appended two" in cairn.detail(job)["review"]["summary"]
