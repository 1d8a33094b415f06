"""`cairn runners` and `cairn work --concurrency N`, through the real CLI.

A runner is a `cairn work` process in the runners ledger. One that stops cleanly leaves it
and hands its jobs back; one that is killed stays listed, is shown `lost` once a whole lease
passed without a heartbeat, and another runner claims its jobs.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from subprocess import Popen
from typing import Any

import pytest

from .conftest import CALL_TIMEOUT, Cli

pytestmark = pytest.mark.acceptance

SLOW_JOB = (
    "steps:\n"
    '  - write: {{path: "slow-{n}.txt", content: "{n}\\n"}}\n'
    '  - run: "sleep {seconds}"\n'
    '  - finish: {{summary: "slow {n}"}}\n'
)


def _slow(n: int, seconds: float = 3) -> str:
    return SLOW_JOB.format(n=n, seconds=seconds)


def _runners(cli: Cli) -> list[dict[str, Any]]:
    shown = cli.json("runners")
    assert isinstance(shown, list)
    return shown


def _until(condition: Callable[[], Any], what: str, timeout: float = CALL_TIMEOUT) -> Any:
    """Poll `condition` until it returns something truthy, and return that."""
    deadline = time.monotonic() + timeout
    while True:
        found = condition()
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.1)


def test_no_runners_says_how_to_start_one(cli: Cli) -> None:
    assert _runners(cli) == []
    assert "`cairn work` starts one" in cli("runners").stdout


def test_concurrency_out_of_range_is_refused_with_the_range(cli: Cli) -> None:
    for bad in ("0", "65"):
        refused = cli("work", "--concurrency", bad, expect=2)
        assert "--concurrency takes a number of jobs from 1 to 64" in refused.stderr
    assert "Traceback" not in cli("work", "--concurrency", "many", expect=2).stderr


def test_one_process_drives_several_jobs_at_once(
    cli: Cli, background: Callable[..., Popen[bytes]]
) -> None:
    cli.room()
    ids = [cli.submit(_slow(n, seconds=4), f"slow {n}") for n in range(1, 4)]
    runner = background("work", "--concurrency", "3", "--until-idle")

    def holding_all() -> list[dict[str, Any]]:
        return [r for r in _runners(cli) if sorted(r["jobs"]) == ids]

    [shown] = _until(holding_all, "one runner to hold all three jobs at once")
    assert shown["state"] == "alive" and shown["concurrency"] == 3
    assert shown["pid"] == runner.pid and shown["host"] == os.uname().nodename
    assert runner.wait(timeout=CALL_TIMEOUT) == 0
    for job in ids:
        assert cli.show(job)["stage"] == "awaiting_review"
    assert _runners(cli) == [], "a runner that stopped cleanly leaves the ledger"


def _killed_runner_is_lost_and_its_job_claimable(
    cli: Cli, background: Callable[..., Popen[bytes]]
) -> None:
    cli.room()
    job = cli.submit(_slow(1, seconds=30), "slow forever")
    doomed = background("work", "--concurrency", "2")
    _until(lambda: any(job in r["jobs"] for r in _runners(cli)), "the runner to hold the job")
    os.killpg(doomed.pid, signal.SIGKILL)
    doomed.wait(timeout=CALL_TIMEOUT)

    [lost] = _until(
        lambda: [r for r in _runners(cli) if r["state"] == "lost"], "the runner to be lost"
    )
    assert lost["pid"] == doomed.pid and lost["jobs"] == [job]
    assert "(claimable)" in cli("runners").stdout

    rescuer = background("work", "--until-idle")

    def rescued() -> list[dict[str, Any]]:
        held = [r for r in _runners(cli) if r["state"] == "alive" and job in r["jobs"]]
        if not held and rescuer.poll() is not None:  # it ended the job before it was seen
            pytest.fail(f"the second runner exited ({rescuer.returncode}); {cli.show(job)}")
        return held

    _until(rescued, "another runner to claim the lost runner's job")
    os.killpg(rescuer.pid, signal.SIGTERM)
    assert rescuer.wait(timeout=CALL_TIMEOUT) == 143
    shown = cli.show(job)
    assert shown["status"] == "queued", "a runner stopped by SIGTERM hands its job back"
    assert [r["pid"] for r in _runners(cli)] == [doomed.pid], "only the lost runner is left"


def test_a_killed_runner_is_shown_lost_and_its_job_claimed_by_another(
    cli: Cli, background: Callable[..., Popen[bytes]]
) -> None:
    _killed_runner_is_lost_and_its_job_claimable(cli, background)


@pytest.mark.postgres
def test_a_killed_runner_is_shown_lost_on_postgres_too(
    pg_cli: Cli, background: Callable[..., Popen[bytes]]
) -> None:
    _killed_runner_is_lost_and_its_job_claimable(pg_cli, background)


def test_sigterm_hands_back_every_job_of_a_concurrent_runner(
    cli: Cli, background: Callable[..., Popen[bytes]]
) -> None:
    cli.room()
    ids = [cli.submit(_slow(n, seconds=30), f"slow {n}") for n in (1, 2)]
    runner = background("work", "--concurrency", "2")
    _until(lambda: [r for r in _runners(cli) if sorted(r["jobs"]) == ids], "both jobs to be held")
    os.killpg(runner.pid, signal.SIGTERM)
    assert runner.wait(timeout=CALL_TIMEOUT) == 143
    assert [cli.show(job)["status"] for job in ids] == ["queued", "queued"]
    assert _runners(cli) == []
