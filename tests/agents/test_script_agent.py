"""The script agent: every step kind against real files, and the outcomes it reports."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from cairn.agents import (
    DependencyAsk,
    Outcome,
    OutcomeKind,
    Script,
    ScriptAgent,
    WriteStep,
    parse_script,
)

from .support import ContextStore, run_script, snapshot, turn_for


def test_write_creates_parent_folders_and_writes_exact_utf8_bytes(workspace: Path) -> None:
    outcome, store = run_script(
        "steps:\n  - write: {path: src/pkg/app.py, content: \"print('héllo ✓')\\n\"}\n", workspace
    )
    assert (workspace / "src/pkg/app.py").read_bytes() == "print('héllo ✓')\n".encode()
    assert outcome == Outcome(OutcomeKind.changed)
    assert store.last == {"position": 1, "changed": True}


def test_write_keeps_carriage_returns_exactly(workspace: Path) -> None:
    script = Script((WriteStep("dos.txt", "a\r\nb\r\n"),))
    run_script(script, workspace)
    assert (workspace / "dos.txt").read_bytes() == b"a\r\nb\r\n"


def test_append_adds_to_an_existing_file_and_keeps_its_mode(workspace: Path) -> None:
    tool = workspace / "tool.sh"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    run_script('steps: [append: {path: tool.sh, content: "echo hi\\n"}]', workspace)
    assert tool.read_text() == "#!/bin/sh\necho hi\n"
    assert tool.stat().st_mode & 0o777 == 0o755


def test_append_creates_a_missing_file_with_an_ordinary_mode(workspace: Path) -> None:
    run_script("steps: [append: {path: notes/new.md, content: hello}]", workspace)
    created = workspace / "notes/new.md"
    umask = os.umask(0)
    os.umask(umask)
    assert created.read_text() == "hello"
    assert created.stat().st_mode & 0o777 == 0o666 & ~umask


def test_delete_removes_the_file(workspace: Path) -> None:
    (workspace / "old.txt").write_text("bye")
    outcome, _ = run_script("steps: [delete: {path: old.txt}, finish: {summary: gone}]", workspace)
    assert not (workspace / "old.txt").exists()
    assert outcome == Outcome(OutcomeKind.changed, summary="gone")


def test_deleting_a_missing_file_fails_clearly_and_does_not_advance(workspace: Path) -> None:
    outcome, store = run_script(
        "steps: [finish: {}, delete: {path: old.txt}]", workspace, {"position": 1}
    )
    assert outcome.kind is OutcomeKind.failed
    assert outcome.diagnosis == "step 2 (delete): there is no file old.txt to delete"
    assert store.saved == []


def test_a_file_step_on_a_folder_fails_without_leaving_temporary_files(workspace: Path) -> None:
    (workspace / "src").mkdir()
    outcome, _ = run_script("steps: [write: {path: src, content: x}]", workspace)
    assert outcome.kind is OutcomeKind.failed
    assert outcome.diagnosis is not None
    assert outcome.diagnosis.startswith("step 1 (write): could not write src")
    assert str(workspace) not in outcome.diagnosis
    assert os.listdir(workspace / "src") == []


def test_rewriting_identical_content_is_no_change(workspace: Path) -> None:
    (workspace / "same.txt").write_text("same")
    outcome, store = run_script(
        "steps: [write: {path: same.txt, content: same}, finish: {summary: s}]", workspace
    )
    assert outcome == Outcome(OutcomeKind.no_change, summary="s")
    assert store.last == {"position": 2, "changed": False}


def test_finish_without_changes_is_no_change(workspace: Path) -> None:
    outcome, store = run_script("steps: [finish: {summary: nothing to do}]", workspace)
    assert outcome == Outcome(OutcomeKind.no_change, summary="nothing to do")
    assert store.saved == [{"position": 1}]


def test_running_off_the_end_finishes_without_a_summary(workspace: Path) -> None:
    outcome, _ = run_script("steps: [write: {path: a.txt, content: a}]", workspace)
    assert outcome == Outcome(OutcomeKind.changed, summary=None)
    outcome, store = run_script("steps: []", workspace)
    assert outcome == Outcome(OutcomeKind.no_change)
    assert store.saved == []


def test_a_saved_position_past_the_end_finishes(workspace: Path) -> None:
    outcome, _ = run_script("steps: [fail: never]", workspace, {"position": 9, "changed": True})
    assert outcome == Outcome(OutcomeKind.changed)


def test_fail_reports_its_message_and_moves_past_it(workspace: Path) -> None:
    text = "steps: [fail: could not find the entry point, finish: {summary: later}]"
    outcome, store = run_script(text, workspace)
    assert outcome == Outcome(OutcomeKind.failed, diagnosis="could not find the entry point")
    assert store.last == {"position": 1}
    again, _ = run_script(text, workspace, store.last)
    assert again == Outcome(OutcomeKind.no_change, summary="later")


def test_lose_stream_is_interrupted_and_the_next_turn_continues(workspace: Path) -> None:
    text = (
        "steps: [write: {path: a.txt, content: a}, lose_stream: {},"
        " append: {path: a.txt, content: b}]"
    )
    outcome, store = run_script(text, workspace)
    assert outcome == Outcome(OutcomeKind.interrupted)
    assert store.last == {"position": 2, "changed": True}
    outcome, _ = run_script(text, workspace, store.last)
    assert outcome == Outcome(OutcomeKind.changed)
    assert (workspace / "a.txt").read_text() == "ab"


def test_dependency_request_then_the_approved_turn_continues_and_records_the_note(
    workspace: Path,
) -> None:
    text = """\
steps:
  - request_dependency: {ecosystem: pypi, name: rich, version: "13.7.1", reason: colour output}
  - write: {path: app.py, content: "import rich\\n"}
  - finish: {summary: uses rich}
"""
    outcome, store = run_script(text, workspace)
    assert outcome == Outcome(
        OutcomeKind.dependency_request,
        dependency=DependencyAsk("pypi", "rich", "13.7.1", "colour output"),
    )
    assert store.last == {"position": 1}
    assert not (workspace / "app.py").exists()

    note = "dependency pypi rich==13.7.1 was approved"
    next_store = ContextStore()
    agent = ScriptAgent(parse_script(text))
    outcome = agent.run_turn(turn_for(workspace, next_store, store.last, notes=(note,)))
    assert outcome == Outcome(OutcomeKind.changed, summary="uses rich")
    assert next_store.saved[0] == {"position": 1, "notes_seen": [note]}
    assert next_store.last == {"position": 3, "changed": True, "notes_seen": [note]}


def test_notes_reach_only_the_job_they_were_given_to(workspace: Path) -> None:
    agent = ScriptAgent(parse_script("steps: [finish: {}]"))
    mine, other = ContextStore(), ContextStore()
    agent.run_turn(turn_for(workspace, mine, None, notes=("approved for job 1",), job_id=1))
    agent.run_turn(turn_for(workspace, other, None, job_id=2))
    assert mine.last == {"position": 1, "notes_seen": ["approved for job 1"]}
    assert other.last == {"position": 1}


def test_notes_seen_keeps_only_the_last_twenty(workspace: Path) -> None:
    agent = ScriptAgent(parse_script("steps: []"))
    store = ContextStore()
    state = {"position": 0, "notes_seen": [f"old {n}" for n in range(15)]}
    notes = tuple(f"new {n}" for n in range(10))
    agent.run_turn(turn_for(workspace, store, state, notes=notes))
    assert store.last is not None
    assert store.last["notes_seen"] == [f"old {n}" for n in range(5, 15)] + list(notes)


@pytest.mark.parametrize(
    "state",
    [{"position": "1"}, {"position": -1}, {}, {"position": True}, {"position": 0, "pending": 3}],
)
def test_an_unreadable_context_fails_instead_of_starting_over(
    workspace: Path, state: dict[str, object]
) -> None:
    outcome, store = run_script("steps: [write: {path: a.txt, content: a}]", workspace, state)
    assert outcome.kind is OutcomeKind.failed
    assert "saved context is unreadable" in (outcome.diagnosis or "")
    assert store.saved == []
    assert not (workspace / "a.txt").exists()


# --- run ---


def test_run_happens_in_the_workspace_and_continues_on_success(workspace: Path) -> None:
    text = "steps: [write: {path: in.txt, content: data}, run: cp in.txt out.txt, finish: {}]"
    outcome, store = run_script(text, workspace)
    assert (workspace / "out.txt").read_text() == "data"
    assert outcome == Outcome(OutcomeKind.changed)
    # The third save marks the command as running before it starts (see the resume tests).
    assert [state["position"] for state in store.saved] == [0, 1, 1, 2, 3]
    assert store.saved[2]["running"]["position"] == 1 and "running" not in store.saved[3]


def test_run_failure_reports_the_exit_code_and_the_last_lines(workspace: Path) -> None:
    text = "steps: [run: 'seq 1 100; echo oops >&2; exit 3', finish: {}]"
    outcome, store = run_script(text, workspace)
    assert outcome.kind is OutcomeKind.failed
    diagnosis = outcome.diagnosis or ""
    assert diagnosis.startswith("step 1 (run): the command exited with code 3")
    shown = diagnosis.splitlines()[1:]
    assert shown == [str(n) for n in range(82, 101)] + ["oops"]
    assert store.last == {"position": 1}


def test_run_failure_diagnosis_stays_modest_for_huge_lines(workspace: Path) -> None:
    outcome, _ = run_script(
        "steps: [run: 'head -c 100000 /dev/zero | tr \"\\\\0\" x; exit 1']", workspace
    )
    diagnosis = outcome.diagnosis or ""
    assert "exited with code 1" in diagnosis
    assert "xxxx" in diagnosis
    assert len(diagnosis) <= 2000


def test_run_failure_without_output_says_so(workspace: Path) -> None:
    outcome, _ = run_script("steps: [run: 'exit 9']", workspace)
    assert outcome.diagnosis == "step 1 (run): the command exited with code 9, with no output"


def test_run_timeout_stops_the_command(workspace: Path) -> None:
    started = time.monotonic()
    outcome, store = run_script(
        "steps: [run: 'echo waiting; sleep 30', finish: {}]", workspace, command_timeout=0.5
    )
    assert time.monotonic() - started < 10
    assert outcome.kind is OutcomeKind.failed
    assert "did not finish within 0.5 seconds" in (outcome.diagnosis or "")
    assert "waiting" in (outcome.diagnosis or "")
    assert store.last == {"position": 1}


def test_background_processes_do_not_outlive_the_step(workspace: Path) -> None:
    # The background job would write its mark a second after the step ended, if it lived on.
    started = time.monotonic()
    outcome, _ = run_script(
        "steps: [run: '(sleep 1; echo late > late.txt) & echo started > started.txt', finish: {}]",
        workspace,
    )
    assert time.monotonic() - started < 10
    assert outcome.kind is OutcomeKind.changed or outcome.kind is OutcomeKind.no_change
    assert (workspace / "started.txt").read_text() == "started\n"
    time.sleep(2)
    assert not (workspace / "late.txt").exists()


def test_a_command_that_cannot_start_fails_without_advancing(tmp_path: Path) -> None:
    outcome, store = run_script("steps: [run: 'true']", tmp_path / "missing")
    assert outcome.kind is OutcomeKind.failed
    assert (outcome.diagnosis or "").startswith("step 1 (run): could not start the command")
    assert {state["position"] for state in store.saved} == {0}


# --- the workspace boundary at time of use ---


def test_unchecked_escaping_paths_are_refused_at_time_of_use(
    workspace: Path, outside: Path
) -> None:
    before = snapshot(outside.parent)
    for path in ("../outside/secret.txt", str(outside / "secret.txt"), ".git/config"):
        outcome, store = run_script(Script((WriteStep(path, "pwned"),)), workspace)
        assert outcome.kind is OutcomeKind.failed
        assert store.saved == []
    assert snapshot(outside.parent) == before


@pytest.mark.parametrize(
    "step",
    [
        "write: {path: link/evil.txt, content: pwned}",
        "append: {path: link/secret.txt, content: pwned}",
        "delete: {path: link/secret.txt}",
        "write: {path: secret-link, content: pwned}",
        "append: {path: secret-link, content: pwned}",
    ],
)
def test_a_symlink_planted_after_parsing_cannot_redirect_a_step(
    workspace: Path, outside: Path, step: str
) -> None:
    script = parse_script(f"steps: [{step}]")
    # Planted after the script was parsed and checked: only the time-of-use check can see it.
    (workspace / "link").symlink_to(outside, target_is_directory=True)
    (workspace / "secret-link").symlink_to(outside / "secret.txt")
    outcome, store = run_script(script, workspace)
    assert outcome.kind is OutcomeKind.failed
    assert "outside the workspace through a symlink" in (outcome.diagnosis or "")
    assert str(outside) not in (outcome.diagnosis or "")
    assert store.saved == []
    assert sorted(os.listdir(outside)) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "keep me\n"


def test_a_symlink_to_the_git_folder_is_refused(workspace: Path) -> None:
    script = parse_script("steps: [write: {path: cfg, content: pwned}]")
    (workspace / "cfg").symlink_to(workspace / ".git" / "config")
    outcome, _ = run_script(script, workspace)
    assert outcome.kind is OutcomeKind.failed
    assert (workspace / ".git" / "config").read_text() == "[core]\n"


def test_a_symlink_loop_fails_without_revealing_local_paths(workspace: Path) -> None:
    (workspace / "loop").symlink_to("loop")
    outcome, store = run_script("steps: [write: {path: loop/x.txt, content: x}]", workspace)
    assert outcome.diagnosis == "step 1 (write): the path …/x.txt goes through a symlink loop"
    assert store.saved == []
