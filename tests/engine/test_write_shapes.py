"""What the engine writes, and when: intent before work, effect-free stages in one write, and
reused stages marked in one batch. Crashes are simulated at the named fault points."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from cairn.engine import (
    Engine,
    Evidence,
    Expect,
    Faults,
    Measurement,
    MemoryLedger,
    Pause,
    Result,
    Retry,
    RunRecord,
    RunStatus,
    StageDef,
    Workflow,
)

HOLDS = Evidence.of(Measurement("done", 1, Expect.equals, 1))


class Crash(Exception):
    """Stands in for the runner dying at a fault point: nothing after it is written."""


def crash_at(*rules: str) -> Faults:
    faults = Faults.parse(",".join(f"crash:{rule}" for rule in rules))

    def die(_code: int) -> None:
        raise Crash(rules)

    faults.die = die
    return faults


class CallLog(MemoryLedger):
    """A memory ledger that also keeps every write the engine asked for, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, ...]] = []

    def start(self, stage: str, recipe_id: str) -> RunRecord:
        self.calls.append(("start", stage))
        return super().start(stage, recipe_id)

    def finish(
        self, run: RunRecord, status: RunStatus, content_id: str | None, evidence: Evidence
    ) -> None:
        self.calls.append(("finish", run.stage, status.value))
        super().finish(run, status, content_id, evidence)

    def record(
        self,
        stage: str,
        recipe_id: str,
        status: RunStatus,
        content_id: str | None,
        evidence: Evidence,
    ) -> RunRecord:
        self.calls.append(("record", stage, status.value))
        return super().record(stage, recipe_id, status, content_id, evidence)

    def mark_reused(self, records: Sequence[RunRecord]) -> None:
        self.calls.append(("reused", *(record.stage for record in records)))
        super().mark_reused(records)


@dataclass
class World:
    """What ran, and what each stage saw outside when it ran."""

    ran: list[str] = field(default_factory=list)
    changed: set[str] = field(default_factory=set)
    """Stages whose content "as it is now" no longer matches what they produced."""


def stage(name: str, *, effect_free: bool) -> StageDef[World]:
    def run(world: World, upstream: object) -> Result:
        world.ran.append(name)
        return Result(f"content-{name}", HOLDS)

    return StageDef(
        name,
        run=run,
        required=("done",),
        content_now=lambda world, prior: None if name in world.changed else f"content-{name}",
        effect_free=effect_free,
    )


def workflow(*names: str, effect_free: bool = True) -> Workflow[World]:
    return Workflow("w", tuple(stage(name, effect_free=effect_free) for name in names))


def statuses(ledger: MemoryLedger) -> list[tuple[str, int, str]]:
    return [(row["stage"], row["attempt"], row["status"]) for row in ledger.rows]


def test_an_effect_free_stage_is_recorded_once_after_it_ran() -> None:
    ledger, world = CallLog(), World()
    Engine.starting(ledger).drive(workflow("a", "b"), world)
    assert ledger.calls == [("record", "a", "accepted"), ("record", "b", "accepted")]
    assert statuses(ledger) == [("a", 1, "accepted"), ("b", 1, "accepted")]


def test_a_stage_that_may_act_outside_has_its_intent_written_before_it_runs() -> None:
    ledger, world = CallLog(), World()
    seen: list[list[tuple[str, ...]]] = []
    acting = StageDef(
        "acts",
        run=lambda w, up: seen.append(list(ledger.calls)) or Result("c", HOLDS),
        required=("done",),
    )
    Engine.starting(ledger).drive(Workflow("w", (acting,)), world)
    assert seen == [[("start", "acts")]], "the recipe was recorded before the work started"
    assert ledger.calls == [("start", "acts"), ("finish", "acts", "accepted")]


def test_a_crash_between_intent_and_acceptance_keeps_the_intent_of_a_stage_that_acts() -> None:
    ledger, world = MemoryLedger(), World()
    with pytest.raises(Crash):
        Engine.starting(ledger, faults=crash_at("before_accept:b")).drive(
            workflow("a", "b", effect_free=False), world
        )
    # The cut-off attempt is known, with its recipe: a resume can tell work may have happened.
    assert statuses(ledger) == [("a", 1, "accepted"), ("b", 1, "running")]
    assert ledger.rows[1]["recipe_id"]
    report = Engine.starting(ledger).drive(workflow("a", "b", effect_free=False), world)
    assert (report.reused, report.ran) == (["a"], ["b"])
    assert statuses(ledger)[-1] == ("b", 2, "accepted")


def test_a_crash_before_an_effect_free_stage_is_recorded_leaves_nothing_and_it_runs_again() -> None:
    ledger, world = MemoryLedger(), World()
    with pytest.raises(Crash):
        Engine.starting(ledger, faults=crash_at("before_accept:b")).drive(
            workflow("a", "b", "c"), world
        )
    assert statuses(ledger) == [("a", 1, "accepted")]
    report = Engine.starting(ledger).drive(workflow("a", "b", "c"), world)
    assert (report.reused, report.ran) == (["a"], ["b", "c"])
    assert statuses(ledger) == [("a", 1, "accepted"), ("b", 1, "accepted"), ("c", 1, "accepted")]
    assert world.ran == ["a", "b", "b", "c"]


def test_a_crash_right_after_an_effect_free_stage_was_recorded_reuses_it() -> None:
    ledger, world = MemoryLedger(), World()
    with pytest.raises(Crash):
        Engine.starting(ledger, faults=crash_at("after_accept:b")).drive(
            workflow("a", "b", "c"), world
        )
    report = Engine.starting(ledger).drive(workflow("a", "b", "c"), world)
    assert (report.reused, report.ran) == (["a", "b"], ["c"])
    assert world.ran == ["a", "b", "c"]


@pytest.mark.parametrize("effect_free", [True, False])
def test_pauses_failures_and_retries_are_recorded_the_same_either_way(effect_free: bool) -> None:
    ledger, world, tries = MemoryLedger(), World(), []

    def flaky(w: World, upstream: object) -> Result:
        tries.append(1)
        if len(tries) == 1:
            raise Retry(Evidence())
        return Result("c", HOLDS)

    def gate(w: World, upstream: object) -> Result:
        raise Pause("awaiting_review")

    stages = (
        StageDef("flaky", run=flaky, required=("done",), max_attempts=2, effect_free=effect_free),
        StageDef("gate", run=gate, effect_free=effect_free),
    )
    report = Engine.starting(ledger).drive(Workflow("w", stages), world)
    assert report.paused_at == "awaiting_review"
    assert statuses(ledger) == [
        ("flaky", 1, "failed"),
        ("flaky", 2, "accepted"),
        ("gate", 1, "paused"),
    ]


def test_reused_stages_are_marked_in_one_batch_before_the_next_stage_runs() -> None:
    ledger, world = CallLog(), World()
    Engine.starting(ledger).drive(workflow("a", "b", "c", "d"), world)
    ledger.calls.clear()
    world.changed = {"c"}
    report = Engine.starting(ledger).drive(workflow("a", "b", "c", "d"), world)
    assert (report.reused, report.ran) == (["a", "b", "d"], ["c"])
    assert ledger.calls == [("reused", "a", "b"), ("record", "c", "accepted"), ("reused", "d")]
    assert [row.get("reused") for row in ledger.rows[:4]] == [1, 1, None, 1]


def test_a_crash_before_the_reuse_batch_is_written_marks_none_and_resumes() -> None:
    ledger, world = CallLog(), World()
    Engine.starting(ledger).drive(workflow("a", "b", "c"), world)
    with pytest.raises(Crash):
        Engine.starting(ledger, faults=crash_at("before_reuse:c")).drive(
            workflow("a", "b", "c"), world
        )
    assert [row.get("reused") for row in ledger.rows] == [None, None, None]
    report = Engine.starting(ledger).drive(workflow("a", "b", "c"), world)
    assert report.reused == ["a", "b", "c"] and world.ran == ["a", "b", "c"]
    assert [row.get("reused") for row in ledger.rows] == [1, 1, 1]


def test_a_crash_right_after_the_reuse_batch_leaves_every_reused_stage_marked() -> None:
    ledger, world = CallLog(), World()
    Engine.starting(ledger).drive(workflow("a", "b", "c"), world)
    world.changed = {"c"}
    with pytest.raises(Crash):
        Engine.starting(ledger, faults=crash_at("after_reuse:b")).drive(
            workflow("a", "b", "c"), world
        )
    assert [row.get("reused") for row in ledger.rows] == [1, 1, None]
    assert world.ran == ["a", "b", "c"], "the crash came before c ran again"
    report = Engine.starting(ledger).drive(workflow("a", "b", "c"), world)
    assert (report.reused, report.ran) == (["a", "b"], ["c"])
