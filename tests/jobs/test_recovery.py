"""Crashes at the awkward moments, jobs that go wrong, and what a command may see."""

from __future__ import annotations

import pytest

from cairn.agents import ScriptAgent
from cairn.agents.base import Outcome, Turn
from cairn.errors import InvalidState
from cairn.jobs import gates
from cairn.stages import Stage, Status
from cairn.testing.harness import Cairn

from .test_delivery import Killed

WRITE_B = 'steps:\n  - write: {path: b.txt, content: "b\\n"}\n  - finish: {summary: added b}\n'


def _kill_once_after_the_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kill the runner as the agent's turn returns: its last save is made, the outcome not kept."""
    real = ScriptAgent.run_turn
    calls = []

    def run_turn(self: ScriptAgent, turn: Turn) -> Outcome:
        outcome = real(self, turn)
        calls.append(1)
        if len(calls) == 1:
            raise Killed("runner killed between the agent's last save and the outcome")
        return outcome

    monkeypatch.setattr(ScriptAgent, "run_turn", run_turn)


@pytest.mark.parametrize(
    ("ending", "stage", "status"),
    [
        ('fail: "could not find the entry point"', Stage.failed, Status.failed),
        (
            'request_dependency: {ecosystem: pypi, name: termcolor, version: "2.4.0", reason: r}',
            Stage.awaiting_dependency_approval,
            Status.waiting,
        ),
    ],
)
def test_an_outcome_saved_before_a_crash_is_not_lost(
    cairn: Cairn, monkeypatch: pytest.MonkeyPatch, ending: str, stage: Stage, status: Status
) -> None:
    job = cairn.submit(f"steps:\n  - write: {{path: a.txt, content: a}}\n  - {ending}\n")
    _kill_once_after_the_turn(monkeypatch)
    with pytest.raises(Killed):
        cairn.work()
    cairn.work()
    settled = cairn.job(job.id)
    assert (settled.stage, settled.status) == (stage, status)
    if status is Status.failed:
        assert settled.diagnosis == "could not find the entry point"


def test_a_job_that_errors_is_blocked_and_the_queue_goes_on(cairn: Cairn) -> None:
    poisoned = cairn.submit(WRITE_B)
    path = cairn.workspace(poisoned.id)
    path.mkdir(parents=True)
    (path / "someone-elses-file").write_text("not cairn's\n")
    healthy = cairn.submit(WRITE_B)
    cairn.work()
    blocked = cairn.detail(poisoned.id)
    assert blocked["status"] == "blocked" and blocked["next"] == [
        {"action": "resume", "job": poisoned.id}
    ]
    assert str(cairn.config.home) not in blocked["diagnosis"]
    assert (path / "someone-elses-file").read_text() == "not cairn's\n"
    assert cairn.job(healthy.id).stage is Stage.awaiting_review


def test_cancel_is_refused_once_delivery_started(cairn: Cairn) -> None:
    job = cairn.submit(WRITE_B)
    cairn.work()
    cairn.approve(job.id)
    with cairn.store.begin() as conn:
        from cairn.store import jobs as job_ledger

        current = job_ledger.get_job(conn, job.id)
        job_ledger.transition(conn, current, Stage.delivering, Status.queued)
    with cairn.store.begin() as conn, pytest.raises(InvalidState, match="delivering"):
        gates.cancel(conn, job.id, "admin")
    cairn.work()
    assert cairn.job(job.id).status is Status.completed


def test_a_verify_command_that_edits_the_result_fails_the_job(cairn: Cairn) -> None:
    with cairn.store.begin() as conn:
        import sqlalchemy as sa

        from cairn.store.schema import rooms

        conn.execute(sa.update(rooms).values(verify_command="echo sneaked >> b.txt"))
    job = cairn.submit(WRITE_B)
    cairn.work()
    failed = cairn.detail(job.id)
    assert failed["status"] == "failed" and "changed files" in failed["diagnosis"]
    assert failed["result_fingerprint"] is None


def test_commands_see_no_cairn_settings_and_no_secrets(
    cairn: Cairn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-never-visible")
    monkeypatch.setenv("CAIRN_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1/secret")
    job = cairn.submit("steps:\n  - run: env > seen-env.txt\n  - finish: {summary: env}\n")
    cairn.work()
    workspace = cairn.workspace(job.id)
    seen = (workspace / "seen-env.txt").read_text()
    assert "sk-test-never-visible" not in seen and "CAIRN_" not in seen
    assert "PATH=" in seen and f"HOME={workspace}" not in seen
