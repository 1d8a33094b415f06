"""The job's CLI session file: saved masked and compressed, restored only where it is missing."""

from __future__ import annotations

from pathlib import Path

from cairn.agents import cli_session

KEY = "sk-ant-" + "api03-0123456789abcdef0123"


def test_a_saved_session_is_masked_and_restored_at_the_new_path(tmp_path: Path) -> None:
    old = tmp_path / "old" / "s.jsonl"
    old.parent.mkdir()
    old.write_text('{"type": "user", "content": "key=' + KEY + '"}\n')
    saved = cli_session.saved_session(old, lambda text: text.replace(KEY, "[secret]"))
    assert saved is not None and KEY not in str(saved)
    new = tmp_path / "new" / "projects" / "s.jsonl"
    assert cli_session.restore_session(new, saved)
    assert new.read_text() == '{"type": "user", "content": "key=[secret]"}\n'


def test_a_session_already_there_is_kept_and_an_unreadable_record_restores_nothing(
    tmp_path: Path,
) -> None:
    here = tmp_path / "s.jsonl"
    here.write_text("newer, written by the CLI itself\n")
    assert cli_session.restore_session(here, {"zlib": "AAAA"})
    assert here.read_text() == "newer, written by the CLI itself\n"
    elsewhere = tmp_path / "other" / "s.jsonl"
    assert not cli_session.restore_session(elsewhere, {"zlib": "not base64 zlib"})
    assert not cli_session.restore_session(elsewhere, None)
    assert not elsewhere.exists()
    assert cli_session.saved_session(tmp_path / "missing.jsonl", str) is None


def test_forgetting_a_session_removes_only_its_file(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("x")
    cli_session.forget_session(path)
    cli_session.forget_session(path)  # already gone: nothing to do
    assert not path.exists() and tmp_path.is_dir()
