"""An idle runner says once that it waits, however often it polls."""

from __future__ import annotations

import time

import pytest

from cairn.jobs import runner as runner_module
from cairn.jobs.runner import IDLE_POLL_SECONDS, Runner
from cairn.stages import Stage
from cairn.testing.harness import Cairn

WRITE_B = 'steps:\n  - write: {path: b.txt, content: "b\\n"}\n  - finish: {summary: added b}\n'


class _Enough(Exception):
    pass


def test_an_idle_runner_says_once_each_time_it_starts_waiting(
    cairn: Cairn, monkeypatch: pytest.MonkeyPatch
) -> None:
    polls: list[float] = []
    real_sleep = time.sleep

    def poll(seconds: float) -> None:
        if seconds != IDLE_POLL_SECONDS:
            real_sleep(seconds)  # someone else's wait (a command, a retry)
            return
        polls.append(seconds)
        if len(polls) == 4:
            cairn.submit(WRITE_B)  # work arrives after four silent polls
        if len(polls) == 8:
            raise _Enough

    monkeypatch.setattr(runner_module.time, "sleep", poll)
    said: list[int] = []
    runner = Runner(cairn.store, cairn.config, on_idle=lambda: said.append(len(polls)))
    with pytest.raises(_Enough):
        runner.work()
    assert said == [0, 4], "once before the job, once after it; never per poll"
    assert cairn.job(1).stage is Stage.awaiting_review
