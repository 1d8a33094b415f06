"""The boundary through whole jobs: agent and verify commands, with and without a sandbox."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from cairn.store import schema
from cairn.testing.harness import Cairn
from cairn.workspace import commands

WRITE_A = "steps:\n  - write: {path: a.txt, content: a}\n  - finish: {summary: wrote a}\n"


def _verify_with(cairn: Cairn, command: str) -> None:
    with cairn.store.begin() as conn:
        conn.execute(sa.update(schema.rooms).values(verify_command=command))


def test_without_a_sandbox_a_job_with_commands_is_blocked_with_what_to_do(
    cairn: Cairn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(commands, "_bwrap_path", lambda: None)
    job = cairn.submit("steps:\n  - run: 'echo hi > ran.txt'\n  - finish: {}\n")
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["status"] == "blocked", detail
    assert "apt-get install bubblewrap" in detail["diagnosis"]
    workspace = cairn.workspace(job.id)
    assert not (workspace / "ran.txt").exists()


def test_an_agent_command_cannot_write_outside_or_reach_the_network(cairn: Cairn) -> None:
    outside = cairn.tmp / "outside.txt"
    outside.write_text("keep me\n")
    script = (
        "steps:\n"
        f"  - run: \"echo pwned > '{outside}' || echo refused > refused.txt\"\n"
        '  - run: "git push -q origin HEAD:refs/heads/sneaky || echo no-push > push.txt"\n'
        "  - finish: {summary: tried}\n"
    )
    job = cairn.submit(script)
    cairn.work()
    workspace = cairn.workspace(job.id)
    assert outside.read_text() == "keep me\n"
    assert (workspace / "refused.txt").exists() and (workspace / "push.txt").exists()
    assert cairn.git("for-each-ref", "refs/heads/sneaky") == ""


def test_a_verify_command_that_leaves_a_link_out_fails_the_job(cairn: Cairn) -> None:
    _verify_with(cairn, "ln -s /etc/passwd leak")
    job = cairn.submit(WRITE_A)
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["status"] == "failed", detail
    assert "leads outside the workspace through a symlink" in detail["diagnosis"]


def test_commands_cannot_read_cairns_home(cairn: Cairn) -> None:
    secret = cairn.config.home / "private-note.txt"
    cairn.config.home.mkdir(parents=True, exist_ok=True)
    secret.write_text("other rooms' business\n")
    _verify_with(cairn, f"! cat '{secret}'")
    steps = WRITE_A.removeprefix("steps:\n")
    job = cairn.submit(f"steps:\n  - run: \"! cat '{secret}'\"\n{steps}")
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["stage"] == "awaiting_review", detail
