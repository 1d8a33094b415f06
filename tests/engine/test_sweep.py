"""The second workflow on the engine: a needle-in-a-haystack sweep, on real files in tmp_path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from examples.sweep import (
    REPORT,
    JsonlLedger,
    Needle,
    PlanError,
    RecipeChanged,
    ScriptedModel,
    SweepOutcome,
    SweepPlan,
    Unreproducible,
    cell_name,
    haystack,
    jsonl,
    reconstruct,
    run_sweep,
    stored_recipe,
)

from cairn.engine import Evidence, Faults, RunStatus, Snapshot

ROOT = Path(__file__).resolve().parents[2]

ALL = [cell_name(length, depth) for length in (200, 400, 800) for depth in (0, 50, 100)]
MIDDLE = cell_name(400, 50)  # the fifth cell
LAST = cell_name(800, 100)


class Died(BaseException):
    """Raised by the faults' die() in place of os._exit, so the test survives the crash."""


def _die(code: int) -> None:
    raise Died(code)


def _dying(rule: str) -> Faults:
    faults = Faults.parse(rule)
    faults.die = _die
    return faults


def _sweep(
    out: Path, scripted: ScriptedModel | None = None, run: str = "demo", **plan
) -> tuple[SweepOutcome, ScriptedModel]:
    sweep_plan = SweepPlan(run, **plan)
    model = scripted if scripted is not None else ScriptedModel(sweep_plan.model)
    return run_sweep(sweep_plan, out, model), model


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[bytes]:
    environment = {k: v for k, v in os.environ.items() if k != "CAIRN_FAULTS"} | env
    return subprocess.run(
        [sys.executable, "-m", "examples.sweep", *args],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        check=False,
    )


def test_the_prompt_the_model_saw_is_rebuilt_byte_for_byte_from_the_stored_recipe(
    tmp_path: Path,
) -> None:
    _, model = _sweep(tmp_path)
    assert model.cells_called == ALL
    for cell, prompt in model.seen:
        assert reconstruct(stored_recipe(tmp_path, "demo", cell)).encode() == prompt.encode()
    seen = dict(model.seen)
    needle = Needle().text
    assert f"<document>\n{needle} " in seen[cell_name(200, 0)]
    assert f" {needle}\n</document>" in seen[cell_name(200, 100)]
    # What is stored is the recipe, never the rendered prompt.
    rows = (tmp_path / "demo" / "results.jsonl").read_text().splitlines()
    assert len(rows) == 9 and max(len(row) for row in rows) < 1024
    assert len(seen[cell_name(800, 50)]) > 4000
    assert all(prompt[200:300] not in "\n".join(rows) for prompt in seen.values())


def test_a_fresh_process_rebuilds_the_same_bytes(tmp_path: Path) -> None:
    _, model = _sweep(tmp_path)
    shown = _cli(
        "--run-name", "demo", "--out", str(tmp_path), "--reconstruct", MIDDLE, PYTHONHASHSEED="99"
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == dict(model.seen)[MIDDLE].encode()


def test_a_second_run_reuses_every_accepted_cell_without_calling_the_model(
    tmp_path: Path,
) -> None:
    first, _ = _sweep(tmp_path)
    second, model = _sweep(tmp_path)
    assert first.ran == [*ALL, REPORT] and first.reused == []
    assert model.seen == [] and second.ran == [] and second.reused == [*ALL, REPORT]
    assert second.complete


def test_the_report_measures_coverage_cells_9_of_9(tmp_path: Path) -> None:
    outcome, _ = _sweep(tmp_path)
    assert str(outcome.evidence[REPORT]) == "cells: 9 of 9, correct: 9"
    assert str(outcome.evidence[MIDDLE]) == "answered: 1 (= 1), correct: True"
    accepted = [
        row
        for row in JsonlLedger(tmp_path / "demo" / "ledger.jsonl").runs()
        if row["status"] == RunStatus.accepted
    ]
    assert [row["stage"] for row in accepted] == [*ALL, REPORT]
    assert str(Evidence.from_data(accepted[-1]["evidence"])) == "cells: 9 of 9, correct: 9"


def test_a_failed_cell_is_not_done_and_runs_again_on_the_next_run(tmp_path: Path) -> None:
    first, _ = _sweep(tmp_path, ScriptedModel(mute=frozenset({LAST})))
    assert set(first.failed) == {LAST, REPORT}
    assert "answered: 0 (= 1) is short" in first.failed[LAST]
    assert str(first.evidence[REPORT]) == "cells: 8 of 9, correct: 8"
    second, model = _sweep(tmp_path)
    assert model.cells_called == [LAST]
    assert second.ran == [LAST, REPORT] and second.complete
    assert str(second.evidence[REPORT]) == "cells: 9 of 9, correct: 9"


def test_an_outage_is_retried_within_a_run(tmp_path: Path) -> None:
    outcome, model = _sweep(tmp_path, ScriptedModel(flaky={MIDDLE: 2}), retries=2)
    assert outcome.complete and model.cells_called.count(MIDDLE) == 3
    runs = JsonlLedger(tmp_path / "demo" / "ledger.jsonl").runs()
    assert [(r["attempt"], r["status"]) for r in runs if r["stage"] == MIDDLE] == [
        (1, "failed"),
        (2, "failed"),
        (3, "accepted"),
    ]


def test_an_outage_that_outlasts_the_retries_is_retried_on_the_next_run(tmp_path: Path) -> None:
    first, _ = _sweep(tmp_path, ScriptedModel(flaky={MIDDLE: 1}), retries=0)
    assert first.failed[MIDDLE] == f"{MIDDLE} was tried 1 times without a result"
    # Retries are not part of any recipe: changing them does not change the run.
    second, model = _sweep(tmp_path, retries=2)
    assert model.cells_called == [MIDDLE] and second.ran == [MIDDLE, REPORT] and second.complete


@pytest.mark.parametrize(
    ("interruption", "resumes_at"),
    [
        ("crash:after_accept", 5),  # MIDDLE was accepted: it is reused
        ("crash:before_accept", 4),  # MIDDLE ran but was never accepted: it runs again
        ("ctrl-c", 4),  # a KeyboardInterrupt while the model worked on MIDDLE
    ],
)
def test_an_interrupted_run_resumes_with_only_the_remaining_cells(
    tmp_path: Path, interruption: str, resumes_at: int
) -> None:
    plan = SweepPlan("demo")
    if interruption == "ctrl-c":
        with pytest.raises(KeyboardInterrupt):
            run_sweep(plan, tmp_path, ScriptedModel(interrupt=frozenset({MIDDLE})))
    else:
        with pytest.raises(Died):
            run_sweep(plan, tmp_path, ScriptedModel(), _dying(f"{interruption}:{MIDDLE}"))
    resumed, model = _sweep(tmp_path)
    assert model.cells_called == ALL[resumes_at:]
    assert resumed.reused == ALL[:resumes_at] and resumed.ran == [*ALL[resumes_at:], REPORT]
    assert str(resumed.evidence[REPORT]) == "cells: 9 of 9, correct: 9"


def test_a_runner_killed_for_real_resumes_where_it_stopped(tmp_path: Path) -> None:
    args = ("--run-name", "demo", "--out", str(tmp_path))
    killed = _cli(*args, CAIRN_FAULTS=f"crash:after_accept:{MIDDLE}")
    assert killed.returncode == 137 and killed.stdout == b""
    resumed = _cli(*args)
    assert resumed.returncode == 0, resumed.stderr
    assert b"9 cells: ran 4, reused 5, failed 0" in resumed.stdout
    assert b"cells: 9 of 9" in resumed.stdout


@pytest.mark.parametrize(
    "change",
    [
        {"model": "scripted-needle-2"},
        {"template": "v2"},
        {"corpus_seed": 8},
        {"needle": Needle("The pass code for the east gate is 4417.", "What is the pass code?")},
    ],
    ids=["model", "template", "haystack", "needle"],
)
def test_a_changed_recipe_under_the_same_run_name_is_refused(tmp_path: Path, change) -> None:
    _sweep(tmp_path)
    ledger = tmp_path / "demo" / "ledger.jsonl"
    before = ledger.read_bytes()
    model = ScriptedModel(SweepPlan("demo", **change).model)
    refusal = r"run name 'demo' already holds results for a different recipe .*use a new run name"
    with pytest.raises(RecipeChanged, match=refusal):
        run_sweep(SweepPlan("demo", **change), tmp_path, model)
    assert model.seen == [] and ledger.read_bytes() == before
    fresh, _ = _sweep(tmp_path, run="demo-2", **change)
    assert fresh.ran == [*ALL, REPORT]


def test_a_changed_recipe_is_refused_even_when_the_earlier_run_never_finished(
    tmp_path: Path,
) -> None:
    with pytest.raises(KeyboardInterrupt):
        _sweep(tmp_path, ScriptedModel(interrupt=frozenset({ALL[0]})))
    with pytest.raises(RecipeChanged, match=ALL[0]):
        _sweep(tmp_path, model="scripted-needle-2")


def test_extending_the_grid_under_the_same_run_name_runs_only_the_new_cells(
    tmp_path: Path,
) -> None:
    _sweep(tmp_path)
    extended, model = _sweep(tmp_path, lengths=(200, 400, 800, 1600))
    new = [cell_name(1600, depth) for depth in (0, 50, 100)]
    assert model.cells_called == new and extended.ran == [*new, REPORT]
    assert str(extended.evidence[REPORT]) == "cells: 12 of 12, correct: 12"


def test_a_torn_last_ledger_line_is_run_again_not_a_crash(tmp_path: Path) -> None:
    with pytest.raises(Died):
        run_sweep(
            SweepPlan("demo"), tmp_path, ScriptedModel(), _dying(f"crash:after_accept:{MIDDLE}")
        )
    ledger = tmp_path / "demo" / "ledger.jsonl"
    *whole, last, _ = ledger.read_bytes().split(b"\n")
    assert b'"accepted"' in last  # MIDDLE's acceptance, cut in half as a kill mid-write would
    ledger.write_bytes(b"\n".join([*whole, last[: len(last) // 2]]))
    resumed, model = _sweep(tmp_path)
    assert model.cells_called == ALL[4:] and resumed.complete
    assert resumed.unreadable_lines == 1
    again, model = _sweep(tmp_path)
    assert model.seen == [] and again.reused == [*ALL, REPORT]
    # The first line written after the torn one (ALL[0] reused on resuming) was not swallowed.
    first = next(run for run in JsonlLedger(ledger).runs() if run["stage"] == ALL[0])
    assert first["reused"] == 2


@pytest.mark.parametrize(
    "corrupt",
    [
        lambda line: line.replace(b'"recipe_id":"', b'"recipe_id":"0'),  # valid JSON, wrong check
        lambda line: b"\x00\xff garbage",
    ],
    ids=["altered", "garbage"],
)
def test_a_corrupted_ledger_line_runs_its_cell_again(tmp_path: Path, corrupt) -> None:
    _sweep(tmp_path)
    ledger = tmp_path / "demo" / "ledger.jsonl"
    lines = ledger.read_bytes().split(b"\n")
    assert b'"event":"start"' in lines[0] and ALL[0].encode() in lines[0]
    ledger.write_bytes(b"\n".join([corrupt(lines[0]), *lines[1:]]))
    resumed, model = _sweep(tmp_path)
    assert model.cells_called == [ALL[0]] and resumed.ran == [ALL[0]]
    # The cell reproduced its answer, so the report's recipe is unchanged and it is reused.
    assert resumed.reused == [*ALL[1:], REPORT] and resumed.complete


def test_the_jsonl_ledger_keeps_the_engine_protocol_and_fsyncs_every_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(jsonl.os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    ledger = JsonlLedger(tmp_path / "ledger.jsonl")
    run = ledger.start("s", "recipe-1")
    ledger.finish(run, RunStatus.accepted, "content-1", Evidence())
    record = Snapshot.take(JsonlLedger(tmp_path / "ledger.jsonl")).accepted("s")
    assert record is not None and (record.recipe_id, record.content_id) == ("recipe-1", "content-1")
    ledger.mark_reused([record])
    assert ledger.runs()[0]["reused"] == 1 and len(synced) >= 3


def test_the_jsonl_ledger_records_a_run_and_a_reuse_batch_in_one_line_each(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = JsonlLedger(path)
    first = ledger.record("a", "recipe-a", RunStatus.accepted, "content-a", Evidence())
    second = ledger.record("b", "recipe-b", RunStatus.accepted, "content-b", Evidence())
    again = JsonlLedger(path).record("a", "recipe-a2", RunStatus.failed, None, Evidence())
    assert (first.attempt, second.attempt, again.attempt) == (1, 1, 2)
    snapshot = Snapshot.take(JsonlLedger(path))
    assert snapshot.accepted("a") == first and snapshot.accepted("b") == second
    lines_before = len(path.read_bytes().splitlines())
    ledger.mark_reused([first, second])
    assert len(path.read_bytes().splitlines()) == lines_before + 1
    jsonl.append(path, {"event": "reused", "id": first.ref})  # one run a line, as before
    assert [row.get("reused") for row in JsonlLedger(path).runs()] == [2, 1, None]
    # A torn batch line marks none of its runs.
    with path.open("ab") as file:
        file.write(b'{"event":"reused","ids":[1,2')
    assert [row.get("reused") for row in JsonlLedger(path).runs()] == [2, 1, None]


def test_a_recipe_whose_template_was_edited_cannot_be_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _sweep(tmp_path)
    recipe = stored_recipe(tmp_path, "demo", MIDDLE)
    monkeypatch.setitem(haystack.TEMPLATES, "v1", haystack.TEMPLATES["v1"] + "Be brief.\n")
    with pytest.raises(Unreproducible, match="was edited"):
        reconstruct(recipe)


@pytest.mark.parametrize(
    "plan",
    [{"run_name": "../elsewhere"}, {"depths": (0, 150)}, {"template": "v9"}, {"lengths": ()}],
)
def test_a_plan_that_cannot_be_swept_is_refused_before_anything_runs(plan: dict) -> None:
    with pytest.raises(PlanError):
        SweepPlan(**({"run_name": "demo"} | plan))


def test_the_sweep_imports_only_the_engine_from_cairn() -> None:
    probe = (
        "import sys, examples.sweep, examples.sweep.__main__; "
        "print(sorted(m for m in sys.modules if m.startswith('cairn')"
        " and not m.startswith('cairn.engine')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    # cairn.errors, cairn.canonical and cairn.next_action (standard library only) are the
    # engine's own leaves.
    leaves = ["cairn", "cairn.canonical", "cairn.errors", "cairn.next_action"]
    assert done.stdout.strip() == str(leaves)
