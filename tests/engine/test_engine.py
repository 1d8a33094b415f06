"""The engine on its own: recipes, evidence, fixed-snapshot reuse, cascades, effects, faults."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cairn.canonical import Form
from cairn.engine import (
    EffectState,
    Engine,
    Evidence,
    EvidenceShort,
    Expect,
    Faults,
    Measurement,
    MemoryEffects,
    MemoryLedger,
    Pause,
    Result,
    Retry,
    RunStatus,
    Snapshot,
    StageDef,
    StageFailed,
    Undecidable,
    Upstream,
    Workflow,
    canonical_json,
    digest,
    perform,
    recipe_id,
)
from cairn.errors import UsageError


@dataclass
class Files:
    """A toy world: named files, and a count of how often each stage really ran."""

    root: Path
    settings: dict[str, str] = field(default_factory=lambda: {"upper": "no"})
    runs: dict[str, int] = field(default_factory=dict)

    def content(self, name: str) -> str | None:
        path = self.root / name
        return digest(path.read_bytes().hex()) if path.exists() else None


def _write_stage(name: str, source: str | None, transform) -> StageDef[Files]:
    def run(world: Files, upstream: Upstream) -> Result:
        world.runs[name] = world.runs.get(name, 0) + 1
        data = (world.root / source).read_text() if source else "seed data\n"
        (world.root / name).write_text(transform(data, world))
        return Result(
            world.content(name) or "",
            Evidence.of(Measurement("bytes", len(data), Expect.at_least, 1)),
        )

    return StageDef(
        name=name,
        run=run,
        settings=lambda world: world.settings if name == "render" else {},
        required=("bytes",),
        content_now=lambda world, prior: world.content(name),
    )


def _workflow() -> Workflow[Files]:
    return Workflow(
        "toy",
        (
            _write_stage("fetch", None, lambda data, w: data),
            _write_stage(
                "render", "fetch", lambda d, w: d.upper() if w.settings["upper"] == "yes" else d
            ),
            _write_stage("publish", "render", lambda data, w: f"<p>{data}</p>"),
        ),
    )


def _drive(ledger: MemoryLedger, world: Files, **options):
    return Engine.starting(ledger, **options).drive(_workflow(), world)


def test_recipe_identity_is_canonical_and_refuses_floats() -> None:
    a = recipe_id("s", {"b": 1, "a": [1, "x"]}, upstream={"up": "c1"})
    b = recipe_id("s", {"a": [1, "x"], "b": 1}, upstream={"up": "c1"})
    assert a == b and a != recipe_id("s", {"a": [1, "x"], "b": 1}, upstream={"up": "c2"})
    with pytest.raises(TypeError, match="floats"):
        recipe_id("s", {"ratio": 0.1})


def test_a_second_drive_reuses_every_accepted_stage(tmp_path: Path) -> None:
    ledger, world = MemoryLedger(), Files(tmp_path)
    first = _drive(ledger, world)
    second = _drive(ledger, world)
    assert first.ran == ["fetch", "render", "publish"] and second.reused == first.ran
    assert world.runs == {"fetch": 1, "render": 1, "publish": 1}


def test_an_equal_size_edit_makes_exactly_the_uncertain_stage_run_again(tmp_path: Path) -> None:
    ledger, world = MemoryLedger(), Files(tmp_path)
    _drive(ledger, world)
    rendered = tmp_path / "render"
    original = rendered.read_bytes()
    edited = original.replace(b"seed", b"SEED")
    assert len(edited) == len(original)
    rendered.write_bytes(edited)
    report = _drive(ledger, world)
    # render is stale and runs again; it reproduces its old content, so publish (whose
    # recipe names render's content) still matches and is reused.
    assert report.ran == ["render"] and report.reused == ["fetch", "publish"]
    assert rendered.read_bytes() == original


def test_a_changed_setting_reruns_its_stage_and_everything_after_it(tmp_path: Path) -> None:
    ledger, world = MemoryLedger(), Files(tmp_path)
    _drive(ledger, world)
    world.settings = {"upper": "yes"}
    report = _drive(ledger, world)
    assert report.reused == ["fetch"] and report.ran == ["render", "publish"]
    assert (tmp_path / "publish").read_text() == "<p>SEED DATA\n</p>"


def test_reuse_reads_one_snapshot_taken_when_the_process_started(tmp_path: Path) -> None:
    ledger, world = MemoryLedger(), Files(tmp_path)
    engine = Engine.starting(ledger)  # the snapshot is empty: nothing accepted yet
    _drive(ledger, world)  # another process accepts every stage meanwhile
    report = engine.drive(_workflow(), world)
    assert report.reused == [] and world.runs["fetch"] == 2


@pytest.mark.parametrize(
    "corruption",
    [
        {"evidence": {"bytes": {"value": 1, "expect": "no-such-expectation"}}},
        {"evidence": None},
        {"attempt": "first"},
        {"status": "mystery"},
        {"content_id": None},
    ],
)
def test_an_unreadable_record_means_run_again_not_block(tmp_path: Path, corruption: dict) -> None:
    ledger, world = MemoryLedger(), Files(tmp_path)
    _drive(ledger, world)
    ledger.rows[0] |= corruption
    report = _drive(ledger, world)
    assert report.ran[0] == "fetch" and report.paused_at is None


def test_a_missing_or_short_measurement_is_never_accepted(tmp_path: Path) -> None:
    ledger = MemoryLedger()
    for evidence in (Evidence(), Evidence.of(Measurement("bytes", 0, Expect.at_least, 1))):
        stage = StageDef(
            "s", run=lambda ctx, upstream, e=evidence: Result("c", e), required=("bytes",)
        )
        with pytest.raises(EvidenceShort):
            Engine.starting(ledger).drive(Workflow("w", (stage,)), None)
    assert [row["status"] for row in ledger.rows] == ["failed", "failed"]
    assert len(Snapshot.take(ledger)) == 0


def test_evidence_reads_as_measurements() -> None:
    evidence = Evidence.of(
        Measurement("files_changed", 3, Expect.at_least, 1),
        Measurement("tests_run", 41, Expect.all_of, 41, "collected"),
        Measurement("cells", 99, Expect.all_of, 100),
    )
    assert (
        str(evidence) == "files_changed: 3 (>= 1), tests_run: 41 of 41 collected, cells: 99 of 100"
    )
    assert evidence.shortfalls(["files_changed", "coverage"]) == [
        "coverage: not measured",
        "cells: 99 of 100 is short",
    ]
    assert Evidence.from_data(evidence.to_data()) == evidence


def test_a_pause_records_a_paused_run_and_stops_the_workflow() -> None:
    ledger = MemoryLedger()
    gate = StageDef(
        "gate", run=lambda ctx, upstream: (_ for _ in ()).throw(Pause("awaiting_review"))
    )
    after = StageDef("after", run=lambda ctx, upstream: pytest.fail("ran past a gate"))
    report = Engine.starting(ledger).drive(Workflow("w", (gate, after)), None)
    assert report.paused_at == "awaiting_review"
    assert [row["status"] for row in ledger.rows] == [RunStatus.paused.value]


def test_retry_runs_a_new_attempt_up_to_the_limit() -> None:
    ledger, tries = MemoryLedger(), []

    def flaky(ctx, upstream) -> Result:
        tries.append(1)
        if len(tries) < 3:
            raise Retry(Evidence.of(Measurement("outcome", "interrupted")))
        return Result("c", Evidence())

    Engine.starting(ledger).drive(Workflow("w", (StageDef("s", run=flaky, max_attempts=3),)), None)
    assert [(r["attempt"], r["status"]) for r in ledger.rows] == [
        (1, "failed"),
        (2, "failed"),
        (3, "accepted"),
    ]
    with pytest.raises(StageFailed, match="tried 1 times"):
        stage = StageDef("t", run=lambda ctx, upstream: (_ for _ in ()).throw(Retry(Evidence())))
        Engine.starting(ledger).drive(Workflow("w", (stage,)), None)


def test_an_effect_is_inspected_before_it_is_repeated() -> None:
    effects, world = MemoryEffects(), {"pushed": 0, "remote": None}

    def act() -> str:
        world["pushed"] += 1
        world["remote"] = "sha1"
        return "sha1"

    def inspect() -> str | None:
        return world["remote"]

    died = Faults.parse("crash:after_effect:push")
    died.die = lambda code: (_ for _ in ()).throw(SystemExit(code))
    with pytest.raises(SystemExit):
        perform(effects, "push", "job-1:push", inspect=inspect, act=act, faults=died)
    assert effects.begin("push", "job-1:push").status == "intended"
    assert perform(effects, "push", "job-1:push", inspect=inspect, act=act) == "sha1"
    assert world["pushed"] == 1 and effects.begin("push", "job-1:push").status == "done"
    assert perform(effects, "push", "job-1:push", inspect=inspect, act=act) == "sha1"
    assert world["pushed"] == 1


def test_a_failed_effect_is_intended_again_before_it_is_retried() -> None:
    effects, world = MemoryEffects(), {"merged": None, "tries": 0}

    def act() -> str | None:
        world["tries"] += 1
        return world["merged"]

    def inspect() -> str | None:
        return world["merged"]

    assert perform(effects, "merge", "k", inspect=inspect, act=act) is None
    assert effects.begin("merge", "k").status == "failed"
    died = Faults.parse("crash:after_intent:merge")
    died.die = lambda code: (_ for _ in ()).throw(SystemExit(code))
    with pytest.raises(SystemExit):
        perform(effects, "merge", "k", inspect=inspect, act=act, faults=died)
    assert effects.begin("merge", "k").status == "intended", "the retry's intent came first"
    world["merged"] = "tip"  # done meanwhile by a person: recognized, not repeated
    assert perform(effects, "merge", "k", inspect=inspect, act=act) == "tip"
    assert world["tries"] == 1 and effects.begin("merge", "k") == EffectState("done", "tip")


def test_an_undecidable_inspection_does_not_act() -> None:
    acted = []

    def inspect() -> str | None:
        raise Undecidable("the branch exists at another commit")

    with pytest.raises(Undecidable):
        perform(MemoryEffects(), "push", "k", inspect=inspect, act=lambda: acted.append(1) or "x")
    assert acted == []


def test_fault_rules_parse_and_fire_where_named() -> None:
    fired: list[int] = []
    faults = Faults.parse("crash:after_accept:verifying, crash:after_intent:push")
    faults.die = fired.append
    faults.point("after_accept", "summarizing")
    faults.point("after_accept", "verifying")
    faults.point("after_intent", "push")
    assert fired == [137, 137]
    seeded = [Faults.parse("crash:random:0.5:seed-1") for _ in range(2)]
    draws = [[f.rng.random() for _ in range(5)] for f in seeded]
    assert draws[0] == draws[1], "the same seed crashes at the same points"
    for bad in ("crash:sometime:push", "crash:random:2:x", "explode"):
        with pytest.raises(UsageError, match=r"CAIRN_FAULTS|between 0 and 1"):
            Faults.parse(bad)


def test_the_engine_imports_no_job_agent_git_or_api_code() -> None:
    probe = (
        "import sys, cairn.engine; "
        "bad = [m for m in sys.modules if m.startswith(('cairn.jobs', 'cairn.agents', "
        "'cairn.workspace', 'cairn.cli', 'cairn.api', 'fastapi'))]; print(bad)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_recipe_identities_are_stable_across_versions() -> None:
    """A recorded recipe must keep meaning the same instructions: pin one identity."""
    pinned = recipe_id(
        "verifying",
        {"command": "pytest -q"},
        upstream={"a": "c1", "b": None},
        settings={"n": 1},
        tools={"git": "2.39"},
    )
    assert pinned == digest(
        {
            "stage": "verifying",
            "inputs": {"command": "pytest -q"},
            "upstream": [["a", "c1"], ["b", None]],
            "settings": {"n": 1},
            "tools": {"git": "2.39"},
        }
    )
    with pytest.raises(TypeError, match="strings"):
        recipe_id("s", {}, upstream={"a": 3})  # type: ignore[dict-item]


def test_one_hasher_keeps_both_stored_forms() -> None:
    """The compact form (recipes, decisions) and the spaced one (agent specs) hash as stored."""
    spec = {"model": "m é", "timeout": 12.5, "b": [1, 2]}
    assert canonical_json(spec, Form.spaced) == json.dumps(spec, sort_keys=True)
    assert (
        digest(spec, Form.spaced)
        == hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()
    )
    compact = {"b": [1, "ü"], "a": None}
    assert canonical_json(compact) == '{"a":null,"b":[1,"ü"]}'
    with pytest.raises(TypeError, match="floats"):
        digest(spec)


def _reading_stage(seen: list[tuple[str | None, object]]) -> StageDef[None]:
    def run(ctx: None, upstream: Upstream) -> Result:
        made = upstream["make"]
        seen.append((made.content_id, made.evidence.get("bytes")))
        return Result(f"read-{made.content_id}", Evidence())

    return StageDef("read", run=run, needs=("make",))


def test_a_stage_is_handed_the_accepted_runs_it_needs_with_parsed_evidence() -> None:
    ledger, seen, made = MemoryLedger(), [], []

    def make(ctx: None, upstream: Upstream) -> Result:
        made.append(len(upstream))
        return Result("c1", Evidence.of(Measurement("bytes", 7, Expect.at_least, 1)))

    maker = StageDef("make", run=make, content_now=lambda ctx, prior: "c1")
    workflow = Workflow("w", (maker, _reading_stage(seen)))
    Engine.starting(ledger).drive(workflow, None)  # accepted in the same drive
    report = Engine.starting(ledger).drive(workflow, None)  # reused from the snapshot
    assert report.reused == ["make"] and report.ran == ["read"]
    assert seen == [("c1", 7), ("c1", 7)] and made == [0]


def test_a_stage_may_read_only_the_earlier_stages_it_declares() -> None:
    with pytest.raises(ValueError, match="needs make, which must be stages before it"):
        Workflow("w", (_reading_stage([]), StageDef("make", run=lambda ctx, upstream: None)))
    undeclared = StageDef("read", run=lambda ctx, upstream: upstream["make"])
    maker = StageDef("make", run=lambda ctx, upstream: Result("c", Evidence()))
    with pytest.raises(KeyError, match="does not declare make"):
        Engine.starting(MemoryLedger()).drive(Workflow("w", (maker, undeclared)), None)


def test_a_recipe_from_encoded_upstream_contents_is_the_recipe_from_the_mapping() -> None:
    from cairn.engine.identity import UpstreamContents

    pairs = {"fetch": "c1", "rendér ✓": 'ü"quoted"', "skipped": None, "publish": "x" * 64}
    encoded = UpstreamContents()
    for name, content in pairs.items():
        encoded.add(name, content)
    document = {
        "stage": "s",
        "inputs": {"b": [1, "x"]},
        "upstream": [[name, content] for name, content in pairs.items()],
        "settings": {"model": "m"},
        "tools": {"git": "2"},
    }
    options = {"settings": {"model": "m"}, "tools": {"git": "2"}}
    expected = digest(document)
    assert recipe_id("s", {"b": [1, "x"]}, upstream=pairs, **options) == expected
    assert recipe_id("s", {"b": [1, "x"]}, upstream=encoded, **options) == expected
    with pytest.raises(TypeError, match="content identities are strings"):
        encoded.add("bad", 3)  # type: ignore[arg-type]
