"""Schedules fire scheduled jobs: one per schedule and fire time, and each from a fresh context.

On both backends (the `cairn` fixture). Runs are approved by policy in the harness unless a
test changes the group's policy; the requester is member `alice`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from cairn.agents.registry import load_agent_spec
from cairn.errors import CairnError, NotAllowed, NotFound, UsageError
from cairn.jobs import context
from cairn.jobs.drive import Drive
from cairn.jobs.references import DOCUMENT_LIMIT, previous_scheduled_job, scheduled_references
from cairn.jobs.schedules import (
    add_schedule,
    check_cron,
    due_fire_time,
    fire_due,
    fire_now,
    latest_fire_time,
    next_fire_time,
    remove_schedule,
    schedule_views,
)
from cairn.sanitize import MASK, user_sanitizer
from cairn.stages import Gate, Stage, Status, Verdict
from cairn.store import decisions, identity
from cairn.store import jobs as job_ledger
from cairn.store import schedules as schedule_ledger
from cairn.store.records import FiringOutcome, FiringTrigger, Job, Schedule
from cairn.store.schema import context_steps, requests, schedule_firings, schedules, utcnow
from cairn.testing.harness import Cairn, Turns

WRITE_ONE = """
steps:
  - write: {path: notes/one.txt, content: "BODY-OF-RUN-ONE\\n"}
  - finish: {summary: "Wrote the first notes"}
"""
WRITE_TWO = """
steps:
  - write: {path: notes/two.txt, content: "second\\n"}
  - finish: {summary: "Wrote the second notes"}
"""
YEARLY = "0 0 1 1 *"
LONG_AGO = timedelta(days=3 * 366)
DAY = datetime(2026, 3, 2, 3, 0, tzinfo=UTC)
CAIRN_BIN = Path(sys.executable).parent / "cairn"


def add(
    cairn: Cairn,
    name: str = "nightly",
    *,
    cron: str = "0 3 * * *",
    steps: str = WRITE_ONE,
    request: str = "Tidy the notes",
    actor: str = "alice",
    created: datetime | None = None,
) -> Schedule:
    script = cairn.tmp / f"schedule-{name}.yaml"
    script.write_text(steps)
    with cairn.store.begin() as conn:
        return add_schedule(
            conn,
            name=name,
            room="sample",
            cron=cron,
            request=request,
            agent=load_agent_spec(f"script:{script}"),
            actor=actor,
            sanitizer=user_sanitizer(cairn.config),
            now=created,
        )


def every_job(cairn: Cairn) -> list[Job]:
    with cairn.store.begin() as conn:
        return job_ledger.list_jobs(conn)


def request_of(cairn: Cairn, job: Job) -> Any:
    with cairn.store.begin() as conn:
        return job_ledger.get_request(conn, job.request_id)


def fire(cairn: Cairn, name: str = "nightly") -> int:
    with cairn.store.begin() as conn:
        firing = fire_now(conn, name, user_sanitizer(cairn.config), actor="admin")
    assert firing.job_id is not None, firing.note
    return firing.job_id


def test_add_list_fire_and_remove(cairn: Cairn) -> None:
    added = add(cairn, created=DAY)
    with cairn.store.begin() as conn:
        [before] = schedule_views(conn, now=DAY + timedelta(hours=1))
    assert before.to_data() == {
        "name": "nightly",
        "room": "sample",
        "cron": "0 3 * * *",
        "request": "Tidy the notes",
        "agent": "script",
        "requester": "alice",
        "next_fire_at": "2026-03-03T03:00:00+00:00",
        "last_fire_at": None,
        "last_job": None,
        "last_outcome": None,
        "last_note": None,
        "problem": None,
    }
    job_id = fire(cairn)
    job = cairn.job(job_id)
    request = request_of(cairn, job)
    assert (request.kind, request.text, request.agent) == ("scheduled", added.request, added.agent)
    with cairn.store.begin() as conn:
        [after] = schedule_views(conn)
        requester = identity.get_user(conn, request.requester_id).name
    assert requester == "alice"
    assert after.last_job == job_id and after.last_outcome == "created"
    assert after.last_fire_at is not None and after.last_fire_at > DAY

    with cairn.store.begin() as conn:
        remove_schedule(conn, "nightly", actor="alice")
    with cairn.store.begin() as conn:
        assert schedule_views(conn) == []
        with pytest.raises(NotFound, match="no schedule 'nightly'"):
            fire_now(conn, "nightly", user_sanitizer(cairn.config), actor="admin")
    assert cairn.job(job_id).id == job_id, "the jobs a removed schedule made stay"


def test_work_fires_a_due_schedule_once_and_not_again_for_that_time(cairn: Cairn) -> None:
    added = add(cairn, cron=YEARLY, created=utcnow() - LONG_AGO)
    cairn.work()
    [job] = every_job(cairn)
    assert request_of(cairn, job).kind == "scheduled"
    assert cairn.job(job.id).stage is Stage.awaiting_review, "the runner drove it on"
    cairn.work()
    assert [j.id for j in every_job(cairn)] == [job.id], "the same fire time fired once"
    with cairn.store.begin() as conn:
        firing = schedule_ledger.firing_of_job(conn, job.id)
    assert firing is not None and firing.schedule_id == added.id
    assert firing.trigger is FiringTrigger.cron


def test_missed_fire_times_fire_once_for_the_latest(cairn: Cairn) -> None:
    """Three years without a runner: one firing, recorded at the latest missed time."""
    add(cairn, cron=YEARLY, created=utcnow() - LONG_AGO)
    now = utcnow()
    sanitizer = user_sanitizer(cairn.config)
    [firing] = fire_due(cairn.store, sanitizer, now=now)
    assert firing.fire_at == datetime(now.year, 1, 1, tzinfo=UTC) == latest_fire_time(YEARLY, now)
    assert fire_due(cairn.store, sanitizer, now=now) == []
    assert len(every_job(cairn)) == 1


def test_a_daily_schedule_fires_once_a_day_whenever_the_runner_looks(cairn: Cairn) -> None:
    add(cairn, created=DAY - timedelta(minutes=30))  # added at 02:30, due at 03:00 each day
    sanitizer = user_sanitizer(cairn.config)
    assert fire_due(cairn.store, sanitizer, now=DAY - timedelta(minutes=1)) == []
    fired = [fire_due(cairn.store, sanitizer, now=DAY + timedelta(seconds=s)) for s in (0, 5, 60)]
    assert [len(f) for f in fired] == [1, 0, 0]
    assert fired[0][0].fire_at == DAY
    # The runner was down for five days: the next look fires once, for the last 03:00.
    [late] = fire_due(cairn.store, sanitizer, now=DAY + timedelta(days=5, hours=7))
    assert late.fire_at == DAY + timedelta(days=5)
    assert len(every_job(cairn)) == 2


def test_a_schedule_added_after_its_time_waits_for_the_next_one(cairn: Cairn) -> None:
    add(cairn, created=DAY + timedelta(minutes=1))
    sanitizer = user_sanitizer(cairn.config)
    assert fire_due(cairn.store, sanitizer, now=DAY + timedelta(hours=2)) == []
    [firing] = fire_due(cairn.store, sanitizer, now=DAY + timedelta(days=1))
    assert firing.fire_at == DAY + timedelta(days=1)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"cron": "0 3 * *"}, "five fields"),
        ({"cron": "0 25 * * *"}, "out of range"),
        ({"cron": "every day"}, "for example"),
        ({"cron": "0 0 30 2 *"}, "names no date that exists"),
        ({"request": "  \x1b[2m "}, "the request is empty"),
        ({"request": "use ghp_" + "a1" * 18 + " to push"}, "looks like a credential"),
        ({"actor": "nobody"}, "no user 'nobody'"),
    ],
)
def test_invalid_schedules_are_refused_saying_what_to_do(
    cairn: Cairn, change: dict[str, str], message: str
) -> None:
    with pytest.raises(UsageError if "cron" in change or "request" in change else CairnError) as e:
        add(cairn, **change)  # type: ignore[arg-type]
    assert message in str(e.value)
    with cairn.store.begin() as conn:
        assert schedule_views(conn) == [], "nothing was stored"


def test_an_unknown_room_a_duplicate_name_and_a_bad_agent_are_refused(cairn: Cairn) -> None:
    add(cairn)
    with pytest.raises(UsageError, match="already exists"):
        add(cairn, request="Another request")
    script = cairn.tmp / "agent.yaml"
    script.write_text(WRITE_ONE)
    with cairn.store.begin() as conn, pytest.raises(NotFound, match="no room 'elsewhere'"):
        add_schedule(
            conn,
            name="other",
            room="elsewhere",
            cron="0 3 * * *",
            request="x",
            agent=load_agent_spec(f"script:{script}"),
            actor="alice",
            sanitizer=user_sanitizer(cairn.config),
        )
    with pytest.raises(UsageError, match="unknown agent adapter 'nope'"):
        load_agent_spec("nope:model")


def test_a_requester_outside_the_group_cannot_add_a_schedule(cairn: Cairn) -> None:
    with cairn.store.begin() as conn:
        identity.add_user(conn, "mallory")
    with pytest.raises(NotAllowed, match="mallory is not a member of group default"):
        add(cairn, actor="mallory")


def test_a_requester_who_lost_access_gets_no_job_and_the_firing_says_why(cairn: Cairn) -> None:
    added = add(cairn, cron=YEARLY, created=utcnow() - LONG_AGO)
    with cairn.store.begin() as conn:
        group = identity.get_group(conn, "default")
        identity.remove_membership(conn, group.id, added.requester_id)
    cairn.work()
    assert every_job(cairn) == []
    with cairn.store.begin() as conn:
        [view] = schedule_views(conn)
    assert view.last_outcome == FiringOutcome.skipped and view.last_job is None
    assert view.last_note is not None and "alice is not a member of group default" in view.last_note
    cairn.work()
    assert every_job(cairn) == [], "the skipped fire time is not fired again"
    # Fired by hand, it is refused outright, and the refusal records nothing.
    with pytest.raises(NotAllowed, match="alice is not a member"), cairn.store.begin() as conn:
        fire_now(conn, "nightly", user_sanitizer(cairn.config), actor="admin")
    with cairn.store.begin() as conn:
        assert schedule_views(conn) == [view]
    assert every_job(cairn) == []


def test_a_firing_whose_submit_is_refused_records_why_and_makes_nothing(cairn: Cairn) -> None:
    added = add(cairn, cron=YEARLY, created=utcnow() - LONG_AGO)
    with cairn.store.begin() as conn:
        # A row no cairn wrote (cairn refuses an empty request when the schedule is added).
        conn.execute(sa.update(schedules).where(schedules.c.id == added.id).values(request=" "))
    [firing] = fire_due(cairn.store, user_sanitizer(cairn.config))
    assert firing.outcome is FiringOutcome.skipped and firing.job_id is None
    assert firing.note == "no job was submitted: the request is empty; say what the agent should do"
    assert every_job(cairn) == []
    with cairn.store.begin() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(requests)).scalar() == 0
    assert fire_due(cairn.store, user_sanitizer(cairn.config)) == [], "not retried every poll"


@pytest.mark.parametrize(
    ("cron", "why"),
    [("0 0 30 2 *", "names no date that exists"), ("every night", "has five fields")],
)
def test_a_schedule_whose_stored_cron_does_not_read_is_logged_and_holds_up_no_other(
    cairn: Cairn, caplog: pytest.LogCaptureFixture, cron: str, why: str
) -> None:
    broken = add(cairn, "broken", cron=YEARLY, created=utcnow() - LONG_AGO)
    add(cairn, "yearly", cron=YEARLY, created=utcnow() - LONG_AGO)
    with cairn.store.begin() as conn:
        # A row no cairn wrote: February 30 never comes, so no fire time can be found.
        conn.execute(sa.update(schedules).where(schedules.c.id == broken.id).values(cron=cron))
    with caplog.at_level("INFO", logger="cairn.runner"):
        [firing] = fire_due(cairn.store, user_sanitizer(cairn.config))
    assert firing.schedule_id != broken.id and firing.job_id is not None
    [said] = [r for r in caplog.records if "broken" in r.getMessage()]
    assert said.levelname == "WARNING" and said.exc_info is None, "a reason, not a traceback"
    assert why in said.getMessage() and "removed and added again" in said.getMessage()
    with cairn.store.begin() as conn:
        shown = {view.name: view for view in schedule_views(conn)}
        assert schedule_ledger.last_firing(conn, broken.id) is None
    assert shown["broken"].next_fire_at is None and shown["broken"].problem is not None
    assert why in shown["broken"].problem
    assert shown["yearly"].problem is None and shown["yearly"].next_fire_at is not None


def test_a_schedule_removed_while_a_runner_fires_it_is_passed_over(
    cairn: Cairn, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    add(cairn, cron=YEARLY, created=utcnow() - LONG_AGO)
    with cairn.store.begin() as conn:
        listed = schedule_ledger.list_schedules(conn)
    # Another process removes it between the runner's list and its firing.
    with cairn.store.begin() as conn:
        remove_schedule(conn, "nightly", actor="alice")
    monkeypatch.setattr(schedule_ledger, "list_schedules", lambda conn: listed)
    with caplog.at_level("INFO", logger="cairn.runner"):
        assert fire_due(cairn.store, user_sanitizer(cairn.config)) == []
    assert every_job(cairn) == []
    assert all(r.exc_info is None for r in caplog.records)
    assert any("nightly was removed before it fired" in r.getMessage() for r in caplog.records)
    with cairn.store.begin() as conn:
        firings = conn.execute(sa.select(sa.func.count()).select_from(schedule_firings))
        assert firings.scalar() == 0


def test_the_group_policy_decides_a_scheduled_jobs_run_gate(cairn: Cairn) -> None:
    add(cairn)
    cairn.set_policy(run_approval="admin")
    waiting = cairn.job(fire(cairn))
    assert (waiting.stage, waiting.status) == (Stage.awaiting_run_approval, Status.waiting)

    # run_approval=auto approves scheduled jobs by default (no --auto-kinds given).
    cairn.set_policy(run_approval="auto")
    approved = cairn.job(fire(cairn))
    with cairn.store.begin() as conn:
        made = decisions.for_job(conn, approved.id)
    assert [(d.gate, d.verdict, d.actor) for d in made] == [(Gate.run, Verdict.auto, "policy")]
    assert approved.status is Status.queued
    cairn.work(approved.id)
    assert cairn.job(approved.id).stage is Stage.awaiting_review
    assert cairn.job(waiting.id).stage is Stage.awaiting_run_approval


def test_two_runner_processes_firing_one_schedule_make_one_job(
    cairn: Cairn, store_url: str
) -> None:
    """Real `cairn work` processes find the same schedule due at the same moment."""
    add(cairn, cron=YEARLY, created=utcnow() - LONG_AGO)
    # The job then waits at the run gate, so each runner goes idle right after firing.
    cairn.set_policy(run_approval="admin")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CAIRN_", "PYTEST_"))}
    env |= {"CAIRN_HOME": str(cairn.config.home), "CAIRN_DATABASE_URL": store_url}
    runners = [
        subprocess.Popen(
            [str(CAIRN_BIN), "work", "--until-idle"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [runner.communicate(timeout=60) for runner in runners]
    assert [runner.returncode for runner in runners] == [0, 0], outputs
    assert all("Traceback" not in err for _, err in outputs), outputs
    [job] = every_job(cairn)
    assert job.stage is Stage.awaiting_run_approval
    with cairn.store.begin() as conn:
        firing = schedule_ledger.last_firing(conn, schedule_ledger.get(conn, "nightly").id)
    assert firing is not None and firing.job_id == job.id


DOCS = {
    "README.md": "# Sample\n\nRun the tests with pytest.\n" + "x" * (2 * DOCUMENT_LIMIT),
    "AGENTS.md": "Agents: keep notes under notes/. Deploy key ghp_" + "b2" * 18 + "\n",
    "CONTRIBUTING.md": "Contributions need a changelog line.\n",
}


def add_documents(cairn: Cairn) -> None:
    for name, text in DOCS.items():
        (cairn.repo / name).write_text(text)
    cairn.git("add", *DOCS)
    cairn.git("-c", "user.name=Owner", "-c", "user.email=o@example.com", "commit", "-qm", "docs")


def test_scheduled_references_hold_the_documents_and_the_previous_result(
    cairn: Cairn,
) -> None:
    add_documents(cairn)
    add(cairn, steps=WRITE_ONE)
    first = fire(cairn)
    interactive = cairn.submit(WRITE_TWO, "Not scheduled")
    cairn.work()
    assert scheduled_references(Drive(cairn.store, cairn.config, cairn.job(interactive.id))) is None

    first_refs = scheduled_references(Drive(cairn.store, cairn.config, cairn.job(first)))
    assert first_refs is not None
    assert "Run the tests with pytest." in first_refs
    assert "Contributions need a changelog line." in first_refs
    assert "keep notes under notes/" in first_refs and "b2b2b2" not in first_refs
    assert MASK in first_refs, "the AGENTS.md key is masked"
    assert "x" * (DOCUMENT_LIMIT + 10) not in first_refs, "each document is bounded"
    assert "first run" in first_refs

    cairn.approve(first)
    cairn.work()
    second = fire(cairn)
    refs = scheduled_references(Drive(cairn.store, cairn.config, cairn.job(second)))
    assert refs is not None
    assert f"previous run (job {first}, completed)" in refs
    assert "Wrote the first notes" in refs and "notes/one.txt" in refs, "summary and diffstat"
    assert "BODY-OF-RUN-ONE" not in refs, "what the earlier run wrote is not in its summary"


def test_rule_8_a_scheduled_turn_gets_references_and_nothing_of_the_previous_context(
    cairn: Cairn, turns: Turns
) -> None:
    add_documents(cairn)
    added = add(cairn, steps=WRITE_ONE)
    first = fire(cairn)
    cairn.work()
    cairn.approve(first)
    cairn.work()
    # Whatever the earlier run's context holds (its agent state, cairn's notes to it).
    marker = "CONTEXT-OF-THE-EARLIER-RUN"
    said = "CONVERSATION-OF-THE-EARLIER-RUN"
    with cairn.store.begin() as conn:
        context.post_note(conn, first, "script", marker)
        earlier_context = str(context.load(conn, first))
        # As a model adapter's conversation would be: one saved step of the earlier job.
        step = {"job_id": first, "seq": 1, "kind": "assistant", "fencing_token": 1, "at": utcnow()}
        conn.execute(sa.insert(context_steps).values(**step, payload={"text": said}))
    second = fire(cairn)
    cairn.work()

    [turn] = turns.of(second)
    refs = turn.facts.references
    assert turn.facts.kind == "scheduled" and refs is not None
    assert "Wrote the first notes" in refs and "Run the tests with pytest." in refs
    assert marker in earlier_context and marker not in refs and said not in refs
    assert "BODY-OF-RUN-ONE" not in refs
    assert turn.state is None and turn.notes == (), "a fresh context of its own"
    assert turn.request == added.request
    [first_turn] = turns.of(first)
    assert first_turn.facts.references is not None
    assert "first run" in first_turn.facts.references


def test_a_schedule_added_again_finds_its_previous_run_by_room_and_request(cairn: Cairn) -> None:
    add(cairn)
    first = fire(cairn)
    cairn.work()
    with cairn.store.begin() as conn:
        remove_schedule(conn, "nightly", actor="alice")
    add(cairn, name="nightly-again", steps=WRITE_TWO)
    other = add(cairn, name="other", request="Something else", steps=WRITE_TWO)
    second = fire(cairn, "nightly-again")
    third = fire(cairn, other.name)
    cairn.work()
    refs = scheduled_references(Drive(cairn.store, cairn.config, cairn.job(second)))
    assert refs is not None and f"previous run (job {first}," in refs
    other_refs = scheduled_references(Drive(cairn.store, cairn.config, cairn.job(third)))
    assert other_refs is not None and "first run" in other_refs


def test_a_first_scheduled_run_does_not_take_another_schedules_run_as_its_previous(
    cairn: Cairn,
) -> None:
    add(cairn, "alices")
    first = fire(cairn, "alices")
    add(cairn, "admins", actor="admin")
    add(cairn, "alices-too")
    admins = fire(cairn, "admins")
    alices_too = fire(cairn, "alices-too")

    def previous(job_id: int) -> int | None:
        job = cairn.job(job_id)
        with cairn.store.begin() as conn:
            found = previous_scheduled_job(conn, job, "Tidy the notes")
        return found.id if found is not None else None

    assert previous(admins) is None, "another requester's schedule is not this one's past"
    assert previous(alices_too) is None, "nor is a live schedule of the same requester"
    with cairn.store.begin() as conn:
        remove_schedule(conn, "alices", actor="alice")
        remove_schedule(conn, "admins", actor="admin")
    add(cairn, "alices-again")
    again = fire(cairn, "alices-again")
    assert previous(again) == first, "a schedule added again continues from its removed self"
    assert previous(admins) is None


def test_a_manual_fire_just_after_a_cron_time_does_not_swallow_that_cron_run(
    cairn: Cairn,
) -> None:
    added = add(cairn, created=DAY - timedelta(days=2))
    sanitizer = user_sanitizer(cairn.config)
    with cairn.store.begin() as conn:
        manual = fire_now(
            conn, "nightly", sanitizer, now=DAY + timedelta(seconds=10), actor="alice"
        )
    with cairn.store.begin() as conn:
        assert due_fire_time(conn, added, DAY + timedelta(seconds=20)) == DAY
    [cron] = fire_due(cairn.store, sanitizer, now=DAY + timedelta(seconds=20))
    assert (cron.fire_at, cron.trigger) == (DAY, FiringTrigger.cron)
    assert cron.job_id is not None and cron.job_id != manual.job_id
    assert fire_due(cairn.store, sanitizer, now=DAY + timedelta(hours=1)) == [], "fired once"
    with cairn.store.begin() as conn:
        [view] = schedule_views(conn, now=DAY + timedelta(hours=1))
    assert view.last_job == manual.job_id, "the list shows the latest firing, manual or not"


def test_cron_aliases_and_spacing_are_stored_in_one_form() -> None:
    assert check_cron("  @DAILY ") == "@daily"
    assert check_cron("0  3 *\t* 1") == "0 3 * * 1"
    assert latest_fire_time("@daily", DAY + timedelta(hours=2)) == DAY - timedelta(hours=3)
    assert next_fire_time("0 3 * * *", DAY) == DAY + timedelta(days=1)
    assert latest_fire_time("0 3 * * *", DAY) == DAY, "a time that is exactly now is due now"
