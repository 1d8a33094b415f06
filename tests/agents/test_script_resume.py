"""Resuming the script agent after a crash at any point: each file step happens exactly once."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from cairn.agents import Outcome, OutcomeKind, Script, ScriptAgent, parse_script
from cairn.agents import script as script_module

from .support import ContextStore, Crash, snapshot, turn_for

DEMO = """\
steps:
  - write: {path: src/app.py, content: "print('hi')\\n"}
  - append: {path: README.md, content: "usage\\n"}
  - append: {path: README.md, content: "more\\n"}
  - run: "cat README.md > copy.txt"
  - request_dependency: {ecosystem: pypi, name: rich, version: "13.7.1", reason: colour}
  - delete: {path: old.txt}
  - lose_stream: {}
  - append: {path: log.txt, content: x}
  - finish: {summary: done}
"""
ONGOING = (OutcomeKind.dependency_request, OutcomeKind.interrupted)


def starter(root: Path) -> Path:
    root.mkdir()
    (root / "README.md").write_text("# demo\n")
    (root / "old.txt").write_text("old\n")
    return root


def drive(script: Script, workspace: Path, crash_at: int | None) -> tuple[Outcome, int, int]:
    """Run turns, each resuming from the last saved state, until the job reaches an end.

    Returns the final outcome, how many crashes happened and how many states were saved.
    """
    store = ContextStore(crash_after=crash_at)
    agent = ScriptAgent(script)
    crashes = 0
    for _ in range(30):
        try:
            outcome = agent.run_turn(turn_for(workspace, store, store.last))
        except Crash:
            crashes += 1
            store.crash_after = None  # the runner comes back up and resumes
            continue
        if outcome.kind not in ONGOING:
            return outcome, crashes, len(store.saved)
    raise AssertionError("the script never finished")


def test_a_crash_at_every_save_point_ends_in_the_same_workspace(tmp_path: Path) -> None:
    script = parse_script(DEMO)
    clean = starter(tmp_path / "clean")
    expected, crashes, saves = drive(script, clean, crash_at=None)
    assert expected == Outcome(OutcomeKind.changed, summary="done")
    assert crashes == 0
    assert (clean / "README.md").read_text() == "# demo\nusage\nmore\n"
    for crash_at in range(saves):
        workspace = starter(tmp_path / f"crash-at-{crash_at}")
        outcome, crashes, _ = drive(script, workspace, crash_at)
        assert crashes == 1
        assert outcome == expected, f"crash at save {crash_at + 1}"
        assert snapshot(workspace) == snapshot(clean), f"crash at save {crash_at + 1}"


def test_append_happens_once_when_the_crash_follows_the_write(workspace: Path) -> None:
    (workspace / "README.md").write_text("# demo\n")
    script = parse_script('steps: [append: {path: README.md, content: "usage\\n"}, finish: {}]')
    store = ContextStore(crash_after=1)  # the intent is saved; saving the new position crashes
    with pytest.raises(Crash):
        ScriptAgent(script).run_turn(turn_for(workspace, store))
    assert (workspace / "README.md").read_text() == "# demo\nusage\n"
    digest = hashlib.sha256(b"# demo\nusage\n").hexdigest()
    assert store.last == {
        "position": 0,
        "pending": {"path": "README.md", "sha256": digest},
        "changed": True,
    }

    resumed = ContextStore()
    outcome = ScriptAgent(script).run_turn(turn_for(workspace, resumed, store.last))
    assert outcome == Outcome(OutcomeKind.changed)
    assert (workspace / "README.md").read_text() == "# demo\nusage\n"
    assert resumed.saved == [{"position": 1, "changed": True}, {"position": 2, "changed": True}]


def test_append_happens_once_when_the_crash_precedes_the_write(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace / "README.md").write_text("# demo\n")
    script = parse_script('steps: [append: {path: README.md, content: "usage\\n"}]')

    def crash(*_args: Any, **_kwargs: Any) -> None:
        raise Crash("died between the intent and the rename")

    store = ContextStore()
    with monkeypatch.context() as patched:
        patched.setattr(os, "replace", crash)
        with pytest.raises(Crash):
            ScriptAgent(script).run_turn(turn_for(workspace, store))
    assert (workspace / "README.md").read_text() == "# demo\n"
    assert store.last is not None and "pending" in store.last

    outcome = ScriptAgent(script).run_turn(turn_for(workspace, ContextStore(), store.last))
    assert outcome.kind is OutcomeKind.changed
    assert (workspace / "README.md").read_text() == "# demo\nusage\n"
    assert sorted(os.listdir(workspace)) == [".git", "README.md"]


def test_the_intent_is_saved_before_the_file_changes(workspace: Path) -> None:
    target = workspace / "a.txt"
    seen: list[tuple[bool, bool]] = []

    def save_state(state: dict[str, Any], outcome: object = None) -> None:
        seen.append(("pending" in state, target.exists()))

    script = parse_script("steps: [write: {path: a.txt, content: a}]")
    ScriptAgent(script).run_turn(turn_for(workspace, save_state))  # type: ignore[arg-type]
    assert seen == [(True, False), (False, True)]


def test_a_pending_delete_of_an_already_deleted_file_just_moves_on(workspace: Path) -> None:
    script = parse_script("steps: [delete: {path: old.txt}, finish: {summary: s}]")
    state = {"position": 0, "pending": {"path": "old.txt", "sha256": None}, "changed": True}
    store = ContextStore()
    outcome = ScriptAgent(script).run_turn(turn_for(workspace, store, state))
    assert outcome == Outcome(OutcomeKind.changed, summary="s")
    assert store.saved[0] == {"position": 1, "changed": True}


def test_resuming_removes_temporary_files_a_crash_left_behind(workspace: Path) -> None:
    (workspace / ".a.txt.cairn-0123456789ab.tmp").write_text("half")
    (workspace / "keep.tmp").write_text("not ours")
    digest = hashlib.sha256(b"a").hexdigest()
    state = {"position": 0, "pending": {"path": "a.txt", "sha256": digest}}
    script = parse_script("steps: [write: {path: a.txt, content: a}]")
    ScriptAgent(script).run_turn(turn_for(workspace, ContextStore(), state))
    assert sorted(os.listdir(workspace)) == [".git", "a.txt", "keep.tmp"]
    assert (workspace / "a.txt").read_text() == "a"


def test_a_command_that_changed_files_before_a_crash_is_not_run_again(workspace: Path) -> None:
    # Rule 9: the command ran and edited the workspace, then the runner died before the
    # position moved on. The resumed turn sees the workspace changed and does not repeat it.
    script = parse_script("steps: [run: 'echo x >> count.txt', finish: {summary: s}]")
    store = ContextStore(crash_after=1)
    with pytest.raises(Crash):
        ScriptAgent(script).run_turn(turn_for(workspace, store))
    assert store.last is not None and "running" in store.last
    outcome = ScriptAgent(script).run_turn(turn_for(workspace, ContextStore(), store.last))
    assert (workspace / "count.txt").read_text() == "x\n"
    assert outcome.summary == "s"


def test_a_command_that_changed_nothing_before_a_crash_runs_again(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nothing in the workspace shows the command ran, so running it again is the safe way on.
    # (The sandbox lets a command write nowhere else, so the test counts the runs from outside.)
    runs: list[str] = []
    real_run = script_module.run_in_workspace

    def counted(command: str, *args: Any, **kwargs: Any) -> Any:
        runs.append(command)
        return real_run(command, *args, **kwargs)

    monkeypatch.setattr(script_module, "run_in_workspace", counted)
    script = parse_script("steps: [run: 'echo x']")
    store = ContextStore(crash_after=1)
    with pytest.raises(Crash):
        ScriptAgent(script).run_turn(turn_for(workspace, store))
    ScriptAgent(script).run_turn(turn_for(workspace, ContextStore(), store.last))
    assert runs == ["echo x", "echo x"]


def test_a_resumed_job_continues_where_it_stopped_not_from_the_start(workspace: Path) -> None:
    script = parse_script(
        "steps: [append: {path: a.txt, content: '1'}, lose_stream: {},"
        " append: {path: a.txt, content: '2'}, fail: stop, append: {path: a.txt, content: '3'}]"
    )
    store = ContextStore()
    kinds = []
    for _ in range(3):
        kinds.append(ScriptAgent(script).run_turn(turn_for(workspace, store, store.last)).kind)
    assert kinds == [OutcomeKind.interrupted, OutcomeKind.failed, OutcomeKind.changed]
    assert (workspace / "a.txt").read_text() == "123"
