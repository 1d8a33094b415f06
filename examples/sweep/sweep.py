"""The sweep on the engine: one stage per cell, then a report stage that measures coverage.

Cells are independent, so each is driven as a one-stage workflow by the same engine (one
snapshot for the whole run): in a single multi-stage workflow every cell's recipe would name
every earlier cell's content, and one failed cell would stop the rest. The report's recipe
names every cell's content identity, so it runs again whenever any cell does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cairn.engine import (
    NO_FAULTS,
    Engine,
    Evidence,
    Expect,
    Faults,
    Measurement,
    Result,
    Retry,
    StageDef,
    StageFailed,
    Workflow,
    digest,
    stage_recipe,
)
from examples.sweep import jsonl
from examples.sweep.errors import PlanError, RecipeChanged, SweepError
from examples.sweep.haystack import reconstruct
from examples.sweep.ledger import JsonlLedger
from examples.sweep.model import ModelUnavailable, ScriptedModel
from examples.sweep.plan import Cell, SweepPlan, cells

REPORT = "report"


class Results:
    """The run's results.jsonl: per model answer, the cell's recipe and the answer, no prompt."""

    def __init__(self, path: Path) -> None:
        self.path = path
        rows, self.unreadable = jsonl.read(path)
        # Read once, when the run starts, like the engine's snapshot; later rows are our own.
        self.latest = {row["cell"]: row for row in rows if isinstance(row.get("cell"), str)}

    def add(self, row: dict[str, Any]) -> None:
        """Record one answer durably."""
        jsonl.append(self.path, row)
        self.latest[row["cell"]] = row

    def content_id(self, cell: str) -> str | None:
        """The content identity of the cell's latest answer, or None when it has none."""
        row = self.latest.get(cell)
        return None if row is None else answer_identity(row)


def answer_identity(row: Mapping[str, Any]) -> str:
    """What a cell produced, as an identity: its recipe with the model's answer."""
    return digest({"recipe": row.get("recipe"), "answer": row.get("answer")})


@dataclass
class Bench:
    """Everything one run of the sweep works with: the stages' context."""

    plan: SweepPlan
    model: ScriptedModel
    results: Results
    report_path: Path
    contents: dict[str, str | None] = field(default_factory=dict)
    evidence: dict[str, Evidence] = field(default_factory=dict)


@dataclass
class SweepOutcome:
    """What one run did: cells ran, reused and failed, and the evidence of each stage."""

    run_name: str
    stages: tuple[str, ...]
    ran: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    evidence: dict[str, Evidence] = field(default_factory=dict)
    unreadable_lines: int = 0

    @property
    def complete(self) -> bool:
        """Whether every cell and the report were accepted."""
        return not self.failed

    def lines(self) -> list[str]:
        """A human summary, one line per stage."""
        ran, reused, failed = (
            sum(1 for stage in done if stage != REPORT)
            for done in (self.ran, self.reused, self.failed)
        )
        head = (
            f"sweep {self.run_name}: {len(self.stages) - 1} cells: "
            f"ran {ran}, reused {reused}, failed {failed}"
        )
        if self.unreadable_lines:
            head += f" ({self.unreadable_lines} unreadable lines ignored: that work ran again)"
        rows = [head]
        for stage in self.stages:
            how = "failed" if stage in self.failed else "ran" if stage in self.ran else "reused"
            rows.append(f"  {stage:<22} {how:<7} {self.evidence.get(stage, '')}")
            if stage in self.failed:
                rows.append(f"  {'':<22} {self.failed[stage]}")
        return rows


def run_cell(bench: Bench, cell: Cell) -> Result:
    """Ask the model the cell's prompt, rebuilt from the recipe, and record its answer."""
    prompt = reconstruct(cell.recipe)
    try:
        response = bench.model.complete(cell.name, prompt)
    except ModelUnavailable as outage:
        raise Retry(Evidence.of(Measurement("outcome", str(outage)))) from None
    row = {"cell": cell.name, "recipe": cell.recipe, "answer": response}
    bench.results.add(row)
    evidence = Evidence.of(
        Measurement("answered", int(bool(response.strip())), Expect.equals, 1),
        Measurement("correct", response == cell.recipe["needle"]["answer"]),
    )
    bench.evidence[cell.name] = evidence
    return Result(answer_identity(row), evidence)


def run_report(bench: Bench, planned: list[Cell]) -> Result:
    """Write report.json over the accepted cells and measure coverage of the plan."""
    rows = [
        {
            "cell": cell.name,
            "length": cell.recipe["length"],
            "depth": cell.recipe["depth"],
            "answer": bench.results.latest[cell.name]["answer"],
            "correct": bench.results.latest[cell.name]["answer"] == cell.recipe["needle"]["answer"],
        }
        for cell in planned
        if bench.contents.get(cell.name)
    ]
    data = {"run": bench.plan.run_name, "planned": len(planned), "cells": rows}
    jsonl.write_atomically(bench.report_path, data)
    evidence = Evidence.of(
        Measurement("cells", len(rows), Expect.all_of, len(planned)),
        Measurement("correct", sum(1 for row in rows if row["correct"])),
    )
    bench.evidence[REPORT] = evidence
    return Result(digest(data), evidence)


def _report_now(bench: Bench) -> str | None:
    try:
        return digest(json.loads(bench.report_path.read_bytes()))
    except (OSError, ValueError, TypeError):
        return None


def cell_stage(cell: Cell, plan: SweepPlan) -> StageDef[Bench]:
    """The engine stage for one cell: its recipe is the cell's recipe, nothing rendered."""
    return StageDef(
        name=cell.name,
        run=lambda bench, upstream: run_cell(bench, cell),
        inputs=lambda bench: cell.recipe,
        required=("answered",),
        content_now=lambda bench, prior: bench.results.content_id(cell.name),
        max_attempts=plan.retries + 1,
    )


def report_stage(planned: list[Cell]) -> StageDef[Bench]:
    """The final stage: depends on every cell's content, accepted only at full coverage."""
    return StageDef(
        name=REPORT,
        run=lambda bench, upstream: run_report(bench, planned),
        inputs=lambda bench: {"cells": [[c.name, bench.contents.get(c.name)] for c in planned]},
        required=("cells",),
        content_now=lambda bench, prior: _report_now(bench),
    )


def refuse_changed_recipes(
    plan: SweepPlan, rows: Iterable[Mapping[str, Any]], stages: list[StageDef[Bench]], bench: Bench
) -> None:
    """Refuse the whole run if any planned cell was recorded under this name with another recipe."""
    recorded: dict[str, set[str]] = {}
    for row in rows:
        if isinstance(row.get("stage"), str) and isinstance(row.get("recipe_id"), str):
            recorded.setdefault(row["stage"], set()).add(row["recipe_id"])
    # Each cell is a one-stage workflow: no upstream stages feed its recipe.
    changed = [
        stage.name
        for stage in stages
        if recorded.get(stage.name, set()) - {stage_recipe(stage, bench, {})}
    ]
    if changed:
        shown = ", ".join(changed[:3]) + (
            f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        )
        raise RecipeChanged(
            f"run name {plan.run_name!r} already holds results for a different recipe "
            f"(changed cells: {shown}); use a new run name"
        )


def run_sweep(
    plan: SweepPlan, out: Path, model: ScriptedModel | None = None, faults: Faults = NO_FAULTS
) -> SweepOutcome:
    """Run or resume the sweep `plan.run_name` under `out`, reusing the cells it accepted."""
    model = model if model is not None else ScriptedModel(plan.model)
    if model.name != plan.model:
        raise PlanError(f"the plan names model {plan.model!r} but {model.name!r} was given")
    directory = out / plan.run_name
    ledger = JsonlLedger(directory / "ledger.jsonl")
    bench = Bench(plan, model, Results(directory / "results.jsonl"), directory / "report.json")
    planned = cells(plan)
    stages = [cell_stage(cell, plan) for cell in planned]
    refuse_changed_recipes(plan, ledger.runs(), stages, bench)
    engine: Engine[Bench] = Engine.starting(
        ledger, faults=faults, on_reuse=lambda stage, run: _reused(bench, stage, run.evidence)
    )
    outcome = SweepOutcome(plan.run_name, (*(c.name for c in planned), REPORT))
    outcome.unreadable_lines = ledger.unreadable + bench.results.unreadable
    for stage in [*stages, report_stage(planned)]:
        _drive_one(engine, stage, bench, outcome)
    outcome.evidence = dict(bench.evidence)
    return outcome


def _reused(bench: Bench, stage: StageDef[Bench], evidence: Evidence | None) -> None:
    if evidence is not None:
        bench.evidence[stage.name] = evidence


def _drive_one(
    engine: Engine[Bench], stage: StageDef[Bench], bench: Bench, outcome: SweepOutcome
) -> None:
    try:
        report = engine.drive(Workflow(f"{bench.plan.run_name}/{stage.name}", (stage,)), bench)
    except StageFailed as failed:
        outcome.failed[stage.name] = failed.diagnosis
        return
    outcome.ran += report.ran
    outcome.reused += report.reused
    bench.contents.update(report.contents)


def stored_recipe(out: Path, run_name: str, cell: str) -> dict[str, Any]:
    """The recipe a run stored for `cell`, read back from its results file."""
    results = Results(out / run_name / "results.jsonl")
    row = results.latest.get(cell)
    if row is None or not isinstance(row.get("recipe"), dict):
        known = ", ".join(sorted(results.latest)) or "none"
        raise SweepError(f"run {run_name!r} holds no recipe for {cell!r}; cells with one: {known}")
    return row["recipe"]
