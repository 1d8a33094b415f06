"""The model's file tools: bounded, symlink-safe, errors as results, edits exactly once."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

from cairn.agents.tools import files as file_tools
from cairn.agents.tools import list_files, read_file, replace_in_file, search, write_file
from cairn.agents.tools.edits import EditJournal, Intent
from cairn.agents.tools.files import ToolResult, ToolStatus

from .support import Crash


class Journal:
    """Saves each intent like a job's context would; can crash at the save or pass one back."""

    def __init__(self, pending: Intent | None = None, *, crash: bool = False) -> None:
        self.pending = pending
        self.crash = crash
        self.saved: list[tuple[Intent, bool]] = []

    def record(self, intent: Intent, changes: bool) -> None:
        if self.crash:
            raise Crash("crashed while saving the intent")
        self.saved.append((intent, changes))

    def __call__(self) -> EditJournal:
        return EditJournal(self.pending, self.record)


def ok(result: ToolResult) -> str:
    assert result.status is ToolStatus.ok, result.text
    return result.text


def error(result: ToolResult) -> str:
    assert result.status is ToolStatus.error, result.text
    return result.text


# list_files


def test_list_files_lists_every_file_sorted_without_git(workspace: Path) -> None:
    (workspace / "src" / "pkg").mkdir(parents=True)
    (workspace / "src" / "pkg" / "b.py").write_text("")
    (workspace / "a.txt").write_text("")
    assert ok(list_files(workspace)) == "a.txt\nsrc/pkg/b.py"
    assert ok(list_files(workspace, "src")) == "src/pkg/b.py"
    assert ok(list_files(workspace, "src/pkg/")) == "src/pkg/b.py"


def test_list_files_shows_a_symlink_but_never_enters_it(workspace: Path, outside: Path) -> None:
    (workspace / "away").symlink_to(outside)
    (workspace / "inner").symlink_to("a.txt")
    (workspace / "a.txt").write_text("")
    listing = ok(list_files(workspace))
    assert listing == "a.txt\naway -> (a symlink)\ninner -> (a symlink)"
    assert "secret" not in listing
    assert "outside the workspace" in error(list_files(workspace, "away"))


def test_list_files_is_bounded(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file_tools, "LIST_LIMIT", 3)
    for number in range(10):
        (workspace / f"f{number}.txt").write_text("")
    lines = ok(list_files(workspace)).splitlines()
    assert lines[:3] == ["f0.txt", "f1.txt", "f2.txt"] and len(lines) == 4
    assert "left out" in lines[3]


def test_list_files_reports_what_is_wrong_as_a_result(workspace: Path, outside: Path) -> None:
    (workspace / "a.txt").write_text("")
    assert "no folder" in error(list_files(workspace, "missing"))
    assert "not a folder" in error(list_files(workspace, "a.txt"))
    assert "climbs out" in error(list_files(workspace, "../outside"))
    assert "absolute path" in error(list_files(workspace, str(outside)))
    assert ".git" in error(list_files(workspace, ".git"))
    assert str(outside) not in error(list_files(workspace, str(outside)))
    assert ok(list_files(workspace, "")) == "a.txt"


# read_file


def test_read_file_returns_the_text(workspace: Path) -> None:
    (workspace / "a.txt").write_text("hello\nworld\n")
    assert ok(read_file(workspace, "a.txt")) == "hello\nworld\n"


def test_read_file_is_bounded_and_says_so(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file_tools, "READ_LIMIT_BYTES", 5)
    (workspace / "a.txt").write_text("0123456789")
    text = ok(read_file(workspace, "a.txt"))
    assert text.startswith("01234\n") and "continues" in text and "56789" not in text


def test_a_refusal_shows_a_files_name_on_one_printable_line(workspace: Path) -> None:
    os.mkfifo(workspace / "p\x1b[2J\nq")  # a name an agent's command may well have made
    refused = error(read_file(workspace, "p\x1b[2J\nq"))
    assert "not a regular file" in refused and refused.isprintable(), refused


def test_read_file_refuses_what_it_must_not_read(workspace: Path, outside: Path) -> None:
    (workspace / "away.txt").symlink_to(outside / "secret.txt")
    (workspace / "via").symlink_to(outside)
    os.link(outside / "secret.txt", workspace / "linked.txt")
    (workspace / "blob.bin").write_bytes(b"\0\1\2")
    (workspace / "folder").mkdir()
    os.mkfifo(workspace / "fifo")
    assert "outside the workspace" in error(read_file(workspace, "away.txt"))
    assert "outside the workspace" in error(read_file(workspace, "via/secret.txt"))
    assert "hard link" in error(read_file(workspace, "linked.txt"))
    assert "binary" in error(read_file(workspace, "blob.bin"))
    assert "folder" in error(read_file(workspace, "folder"))
    assert "not a regular file" in error(read_file(workspace, "fifo"))  # and it did not hang
    assert "no file missing.txt" in error(read_file(workspace, "missing.txt"))
    assert "no file" in error(read_file(workspace, "nowhere/missing.txt"))
    assert ".git" in error(read_file(workspace, ".git/config"))
    every = [
        read_file(workspace, name)
        for name in ("away.txt", "via/secret.txt", "linked.txt", "../outside/secret.txt")
    ]
    assert not any("keep me" in result.text for result in every)


# write_file


def test_write_file_creates_the_file_and_its_folders(workspace: Path) -> None:
    journal = Journal()
    assert "wrote src/new.py" in ok(write_file(workspace, "src/new.py", "x = 1\n", journal()))
    assert (workspace / "src" / "new.py").read_text() == "x = 1\n"
    [(intent, changes)] = journal.saved
    assert intent.path == "src/new.py" and intent.sha256 and changes


def test_write_file_saves_its_intent_before_the_effect(workspace: Path) -> None:
    journal = Journal(crash=True)
    with pytest.raises(Crash):
        write_file(workspace, "a.txt", "new", journal())
    assert not (workspace / "a.txt").exists()
    assert [p.name for p in workspace.iterdir()] == [".git"]  # no temporary file left either


def test_write_file_replaces_a_symlink_instead_of_writing_through_it(
    workspace: Path, outside: Path
) -> None:
    (workspace / "away.txt").symlink_to(outside / "secret.txt")
    (workspace / "via").symlink_to(outside)
    assert "outside the workspace" in error(write_file(workspace, "away.txt", "x", Journal()()))
    assert "outside" in error(write_file(workspace, "via/new.txt", "x", Journal()()))
    assert "climbs out" in error(write_file(workspace, "../outside/secret.txt", "x", Journal()()))
    assert (outside / "secret.txt").read_text() == "keep me\n"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_write_file_is_bounded(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file_tools, "WRITE_LIMIT_BYTES", 4)
    assert "larger than 4 bytes" in error(write_file(workspace, "a.txt", "12345", Journal()()))
    assert not (workspace / "a.txt").exists()


def test_write_file_keeps_an_executable_s_mode(workspace: Path) -> None:
    script = workspace / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    ok(write_file(workspace, "run.sh", "#!/bin/sh\necho hi\n", Journal()()))
    assert script.stat().st_mode & 0o777 == 0o755


# replace_in_file


def test_replace_in_file_replaces_the_one_occurrence(workspace: Path) -> None:
    (workspace / "a.py").write_text("x = 1\ny = 2\n")
    ok(replace_in_file(workspace, "a.py", "y = 2", "y = 3", Journal()()))
    assert (workspace / "a.py").read_text() == "x = 1\ny = 3\n"


@pytest.mark.parametrize(("old", "why"), [("z", "does not occur"), ("= ", "occurs 2 times")])
def test_replace_in_file_needs_exactly_one_occurrence(workspace: Path, old: str, why: str) -> None:
    (workspace / "a.py").write_text("x = 1\ny = 2\n")
    journal = Journal()
    assert why in error(replace_in_file(workspace, "a.py", old, "!", journal()))
    assert (workspace / "a.py").read_text() == "x = 1\ny = 2\n"
    assert journal.saved == []  # nothing was about to change, so nothing was saved


def test_replace_in_file_reports_what_it_cannot_edit(workspace: Path, outside: Path) -> None:
    (workspace / "latin1.txt").write_bytes("café".encode("latin-1"))
    (workspace / "away.txt").symlink_to(outside / "secret.txt")
    assert "no file" in error(replace_in_file(workspace, "missing.txt", "a", "b", Journal()()))
    assert "not UTF-8" in error(replace_in_file(workspace, "latin1.txt", "caf", "b", Journal()()))
    assert "empty" in error(replace_in_file(workspace, "latin1.txt", "", "b", Journal()()))
    assert "outside" in error(replace_in_file(workspace, "away.txt", "keep", "lose", Journal()()))
    assert (outside / "secret.txt").read_text() == "keep me\n"


def test_a_replace_applied_before_a_crash_is_not_applied_again(workspace: Path) -> None:
    # The replacement contains what it replaces: applied twice, it would double.
    (workspace / "a.txt").write_text("say hi\n")
    first = Journal()
    ok(replace_in_file(workspace, "a.txt", "hi", "hi hi", first()))
    # The runner died after the edit, before the tool's result was saved; the resumed call
    # passes back the intent it saved.
    [(intent, _changes)] = first.saved
    resumed = Journal(pending=intent)
    ok(replace_in_file(workspace, "a.txt", "hi", "hi hi", resumed()))
    assert (workspace / "a.txt").read_text() == "say hi hi\n"
    assert resumed.saved == []


def test_a_replace_whose_intent_was_saved_but_not_applied_is_applied_once(
    workspace: Path,
) -> None:
    (workspace / "a.txt").write_text("say hi\n")
    first = Journal()

    def crash_after_saving(intent: Intent, changes: bool) -> None:
        first.record(intent, changes)
        raise Crash("died between saving the intent and the edit")

    with pytest.raises(Crash):
        replace_in_file(workspace, "a.txt", "hi", "hi hi", EditJournal(None, crash_after_saving))
    assert (workspace / "a.txt").read_text() == "say hi\n"
    [(intent, _changes)] = first.saved
    ok(replace_in_file(workspace, "a.txt", "hi", "hi hi", Journal(pending=intent)()))
    assert (workspace / "a.txt").read_text() == "say hi hi\n"


def test_a_resumed_edit_removes_the_temporary_file_a_crash_left(workspace: Path) -> None:
    (workspace / "a.txt").write_text("one\n")
    (workspace / ".a.txt.cairn-0123456789ab.tmp").write_text("half")
    pending = Intent("a.txt", "0" * 64)
    ok(write_file(workspace, "a.txt", "two\n", Journal(pending=pending)()))
    assert sorted(p.name for p in workspace.iterdir()) == [".git", "a.txt"]


# search


def test_search_finds_matching_lines_with_their_place(workspace: Path) -> None:
    (workspace / "src").mkdir()
    (workspace / "src" / "a.py").write_text("import os\ndef main():\n    pass\n")
    (workspace / "b.txt").write_text("main street\n")
    assert ok(search(workspace, r"\bmain\b")) == "b.txt:1: main street\nsrc/a.py:2: def main():"
    assert ok(search(workspace, "main", "src")) == "src/a.py:2: def main():"
    assert ok(search(workspace, "main", "b.txt")) == "b.txt:1: main street"
    assert "no line under src matches" in ok(search(workspace, "nothing", "src"))


def test_search_never_leaves_the_workspace(workspace: Path, outside: Path) -> None:
    (workspace / "away").symlink_to(outside)
    (workspace / "away.txt").symlink_to(outside / "secret.txt")
    os.link(outside / "secret.txt", workspace / "linked.txt")
    (workspace / ".git" / "HEAD").write_text("keep me\n")
    os.mkfifo(workspace / "fifo")
    assert "no line" in ok(search(workspace, "keep"))
    assert "outside" in error(search(workspace, "keep", "away"))
    assert "outside" in error(search(workspace, "keep", "away.txt"))
    assert ".git" in error(search(workspace, "keep", ".git"))


def test_search_is_bounded(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file_tools, "SEARCH_MATCHES", 2)
    monkeypatch.setattr(file_tools, "LINE_CHARS", 6)
    (workspace / "a.txt").write_text("match one\nmatch two\nmatch three\n")
    (workspace / "blob.bin").write_bytes(b"match\0")
    assert ok(search(workspace, "match")).splitlines() == [
        "a.txt:1: match ",
        "a.txt:2: match ",
        "… (more matches left out; narrow the pattern or path)",
    ]


def test_a_search_that_backtracks_for_ever_is_stopped_and_told(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_tools, "SEARCH_SECONDS", 0.3)
    (workspace / "a.txt").write_text("a" * 60 + "b\n")
    assert "took longer than 0.3 s" in error(search(workspace, r"(a+)+$"))
    assert signal.getsignal(signal.SIGALRM) is signal.SIG_DFL, "the alarm handler is put back"
    assert "a.txt:1" in ok(search(workspace, "b$")), "the next search runs as usual"


def test_a_search_off_the_main_thread_stops_at_its_deadline(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_tools, "SEARCH_SECONDS", 0.0)
    for name in ("a", "b"):
        (workspace / f"{name}.txt").write_text("match\n")
    results: list[ToolResult] = []
    worker = threading.Thread(target=lambda: results.append(search(workspace, "match")))
    worker.start()
    worker.join()
    assert "took longer" in error(results[0])


def test_search_reports_a_bad_pattern_as_a_result(workspace: Path) -> None:
    assert "not a valid regular expression" in error(search(workspace, "("))
    assert "pattern" in error(search(workspace, ""))
    assert "could not search missing" in error(search(workspace, "x", "missing"))


def test_search_reads_a_bounded_number_of_files(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_tools, "SEARCH_FILES", 2)
    for name in ("a", "b", "c"):
        (workspace / f"{name}.txt").write_text("match\n")
    assert ok(search(workspace, "match")).splitlines() == [
        "a.txt:1: match",
        "b.txt:1: match",
        "… (stopped after 2 files; narrow the path)",
    ]


def test_cairn_s_dependency_folders_are_left_out_unless_named(workspace: Path) -> None:
    venv = workspace / ".venv"
    (venv / "lib").mkdir(parents=True)
    (venv / ".cairn-dependencies").write_text("fingerprint")
    (venv / "lib" / "dep.py").write_text("match\n")
    (workspace / "own.py").write_text("match\n")
    assert ok(list_files(workspace)) == "own.py"
    assert ok(search(workspace, "match")) == "own.py:1: match"
    assert ok(search(workspace, "match", ".venv")) == ".venv/lib/dep.py:1: match"


def test_folders_nested_too_deep_are_not_entered(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_tools, "WALK_DEPTH", 2)
    deep = workspace / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (workspace / "a" / "b" / "shallow.txt").write_text("")
    (deep / "deep.txt").write_text("")
    assert ok(list_files(workspace)) == "a/b/shallow.txt"


def test_text_that_is_not_valid_unicode_is_an_error_result(workspace: Path) -> None:
    (workspace / "a.txt").write_text("one\n")
    lone = "\ud800"
    assert "not valid Unicode" in error(write_file(workspace, "a.txt", lone, Journal()()))
    assert "not valid Unicode" in error(
        replace_in_file(workspace, "a.txt", "one", lone, Journal()())
    )
    assert "not valid Unicode" in error(read_file(workspace, f"{lone}.txt"))
    assert (workspace / "a.txt").read_text() == "one\n"


def test_a_write_applied_before_a_crash_is_not_made_again(workspace: Path) -> None:
    first = Journal()
    ok(write_file(workspace, "a.txt", "one\n", first()))
    inode = (workspace / "a.txt").stat().st_ino  # a rewrite renames a new file over it
    [(intent, _changes)] = first.saved
    resumed = Journal(pending=intent)
    ok(write_file(workspace, "a.txt", "one\n", resumed()))
    assert resumed.saved == [] and (workspace / "a.txt").stat().st_ino == inode


@pytest.mark.parametrize("saved", [None, "a.txt", {"path": 1}, {"path": "a", "sha256": 2}])
def test_a_malformed_saved_intent_reads_as_none(saved: object) -> None:
    assert Intent.from_data(saved) is None
