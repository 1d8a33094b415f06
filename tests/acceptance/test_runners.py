"""Several runner processes on one SQLite store, and a cancel that lands while a runner works."""

from __future__ import annotations

from collections.abc import Callable
from subprocess import Popen

import pytest

from .conftest import CALL_TIMEOUT, Cli, wait_for

pytestmark = pytest.mark.acceptance

JOBS = 3


def _writes(n: int) -> str:
    return (
        f'steps:\n  - write: {{path: "f{n}.txt", content: "job {n}\\n"}}\n'
        '  - run: "sleep 0.3"\n'
        f'  - finish: {{summary: "Added f{n}.txt"}}\n'
    )


def test_two_runners_share_the_queue_and_drive_each_job_once(
    cli: Cli, background: Callable[..., Popen[bytes]]
) -> None:
    cli.room()
    ids = [cli.submit(_writes(n), f"job {n}") for n in range(1, JOBS + 1)]

    for phase in ("review", "delivery"):
        runners = [background("work", "--until-idle") for _ in range(2)]
        assert [r.wait(timeout=CALL_TIMEOUT) for r in runners] == [0, 0], phase
        if phase == "review":
            for job in ids:
                cli("approve", str(job))  # exits 1 unless the job waits at the review gate

    for n, job in enumerate(ids, start=1):
        done = cli.show(job)
        assert done["status"] == "completed" and done["diagnosis"] is None, done["diagnosis"]
        # A gate stage records its pause, then its acceptance; every other stage ran once.
        runs = [s for s in done["stages"] if s["status"] != "paused"]
        assert all(s["status"] == "accepted" for s in runs), done["stages"]
        names = [s["name"] for s in runs]
        assert len(names) == len(set(names)), f"job {job}: a stage ran twice: {names}"
        assert [(e["kind"], e["status"]) for e in done["effects"]] == [
            ("push", "done"),
            ("merge", "done"),
        ]
        assert cli.git("show", f"main:f{n}.txt") == f"job {n}"
    merges = cli.git("rev-list", "--merges", "--count", "main")
    assert cli.git("rev-list", "--count", "main") == str(1 + JOBS + int(merges))
    assert cli.git("status", "--porcelain") == ""


def test_a_cancel_stops_the_runner_that_holds_the_job(
    cli: Cli, background: Callable[..., Popen[bytes]]
) -> None:
    cli.room()
    started = ".pytest_cache/started.log"  # inside the workspace, where commands may write
    job = cli.submit(
        "steps:\n"
        '  - write: {path: first.txt, content: "1\\n"}\n'
        f'  - run: "mkdir -p .pytest_cache && echo started >> {started} && sleep 3"\n'
        '  - write: {path: second.txt, content: "2\\n"}\n'
        '  - finish: {summary: "two files"}\n'
    )
    runner = background("work", "--until-idle")
    wait_for(
        lambda: (cli.workspace(job) / started).exists(),
        timeout=20,
        what="the agent to be inside its `run` step",
    )
    cli("cancel", str(job), "--as", "alice")
    assert runner.wait(timeout=CALL_TIMEOUT) == 0

    cancelled = cli.show(job)
    assert (cancelled["status"], cancelled["stage"]) == ("cancelled", "cancelled")
    assert cancelled["decisions"][-1]["gate"] == "cancel"
    assert cancelled["decisions"][-1]["actor"] == "alice"
    workspace = cli.workspace(job)
    assert (workspace / "first.txt").exists(), "the workspace is kept, as it was"
    assert not (workspace / "second.txt").exists(), "the agent stopped at its next step"
    assert [s["status"] for s in cancelled["stages"] if s["name"] == "running_agent"] != [
        "accepted"
    ]
    assert cancelled["effects"] == [] and cancelled["review"] is None
    cli("approve", str(job), expect=1)
    cli("resume", str(job), expect=1)
    cli.work()
    assert cli.show(job)["status"] == "cancelled"
    assert cli.git("for-each-ref", "refs/heads/cairn") == ""
