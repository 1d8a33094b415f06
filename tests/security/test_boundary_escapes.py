"""Every agent tool stays inside its workspace: traversal, symlinks, hard links, `.git`, TOCTOU.

The script agent's tools are `write`, `append`, `delete` and `run`. Each test tries to reach
outside through one of them and asserts the step failed and nothing outside changed.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agents.support import run_script, snapshot
from cairn.agents import AppendStep, DeleteStep, OutcomeKind, Script, WriteStep
from cairn.agents.tools import edits as edits_module
from cairn.errors import BoundaryError
from cairn.workspace.boundary import escaping_links, open_folder_inside, resolve_inside

FILE_STEPS: dict[str, Callable[[str], Any]] = {
    "write": lambda path: WriteStep(path, "pwned\n"),
    "append": lambda path: AppendStep(path, "pwned\n"),
    "delete": lambda path: DeleteStep(path),
}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text("[core]\n")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('hi')\n")
    return root


def _fails_and_leaves_outside(workspace: Path, outside: Path, script: Script) -> str:
    before = snapshot(outside.parent / "outside"), snapshot(workspace / ".git")
    outcome, store = run_script(script, workspace)
    assert outcome.kind is OutcomeKind.failed, outcome
    assert (snapshot(outside.parent / "outside"), snapshot(workspace / ".git")) == before
    assert (outside / "secret.txt").read_text() == "keep me\n"
    assert store.saved == [] or store.saved[-1]["position"] == 1
    return outcome.diagnosis or ""


@pytest.mark.parametrize("kind", sorted(FILE_STEPS))
@pytest.mark.parametrize(
    "path",
    [
        "../outside/secret.txt",
        "src/../../outside/secret.txt",
        "{outside}/secret.txt",
        ".git/config",
        ".GIT/config",
        "./.git/config",
        "src/../.git/config",
    ],
)
def test_traversal_and_git_paths_are_refused_at_time_of_use(
    workspace: Path, outside: Path, kind: str, path: str
) -> None:
    step = FILE_STEPS[kind](path.format(outside=outside))
    diagnosis = _fails_and_leaves_outside(workspace, outside, Script((step,)))
    assert str(outside) not in diagnosis


@pytest.mark.parametrize("kind", sorted(FILE_STEPS))
@pytest.mark.parametrize("via", ["folder link", "file link", "link into .git", "relative link"])
def test_symlinks_out_are_never_followed(
    workspace: Path, outside: Path, kind: str, via: str
) -> None:
    (workspace / "out").symlink_to(outside, target_is_directory=True)
    (workspace / "secret-link").symlink_to(outside / "secret.txt")
    (workspace / "cfg").symlink_to(workspace / ".git" / "config")
    (workspace / "src" / "up").symlink_to("../../outside")
    path = {
        "folder link": "out/secret.txt",
        "file link": "secret-link",
        "link into .git": "cfg",
        "relative link": "src/up/secret.txt",
    }[via]
    _fails_and_leaves_outside(workspace, outside, Script((FILE_STEPS[kind](path),)))


@pytest.mark.parametrize("kind", sorted(FILE_STEPS))
def test_a_hard_link_to_a_file_outside_is_refused(
    workspace: Path, outside: Path, kind: str
) -> None:
    os.link(outside / "secret.txt", workspace / "linked.txt")
    diagnosis = _fails_and_leaves_outside(
        workspace, outside, Script((FILE_STEPS[kind]("linked.txt"),))
    )
    assert "hard link" in diagnosis
    assert (workspace / "linked.txt").read_text() == "keep me\n"


def _swap_after_check(monkeypatch: pytest.MonkeyPatch, swap: Callable[[], None]) -> list[Path]:
    """Let the time-of-use check pass, then swap something for a symlink before the use."""
    checked: list[Path] = []

    def check_then_swap(root: Path, relative: str) -> Path:
        resolved = resolve_inside(root, relative)
        checked.append(resolved)
        swap()
        return resolved

    # The script agent's file steps resolve their path in the shared exactly-once edit.
    monkeypatch.setattr(edits_module, "resolve_inside", check_then_swap)
    return checked


@pytest.mark.parametrize("kind", sorted(FILE_STEPS))
def test_a_folder_swapped_for_a_symlink_after_the_check_is_caught(
    workspace: Path, outside: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace / "docs").mkdir()
    (workspace / "docs" / "secret.txt").write_text("inside\n")

    def swap() -> None:
        (workspace / "docs").rename(workspace / "docs-moved")
        (workspace / "docs").symlink_to(outside, target_is_directory=True)

    checked = _swap_after_check(monkeypatch, swap)
    diagnosis = _fails_and_leaves_outside(
        workspace, outside, Script((FILE_STEPS[kind]("docs/secret.txt"),))
    )
    assert checked and "symlink" in diagnosis


@pytest.mark.parametrize("kind", sorted(FILE_STEPS))
def test_a_file_swapped_for_a_symlink_after_the_check_is_not_followed(
    workspace: Path, outside: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = workspace / "notes.txt"
    target.write_text("inside\n")

    def swap() -> None:
        target.unlink()
        target.symlink_to(outside / "secret.txt")

    _swap_after_check(monkeypatch, swap)
    before = snapshot(outside)
    outcome, _ = run_script(Script((FILE_STEPS[kind]("notes.txt"),)), workspace)
    # Whatever the step made of it, it acted on the name inside, never on the file outside.
    assert snapshot(outside) == before
    if kind == "append":
        assert outcome.kind is OutcomeKind.failed and "symlink" in (outcome.diagnosis or "")


def test_open_folder_inside_refuses_a_symlinked_component(workspace: Path, outside: Path) -> None:
    (workspace / "src" / "vendor").symlink_to(outside, target_is_directory=True)
    with pytest.raises(BoundaryError, match="symlink"):
        open_folder_inside(workspace, workspace / "src" / "vendor" / "lib", create=True)
    assert sorted(os.listdir(outside)) == ["secret.txt"]


def test_escaping_links_lists_symlinks_out_and_hard_links(workspace: Path, outside: Path) -> None:
    (workspace / "out").symlink_to(outside)
    (workspace / "src" / "in").symlink_to("../src/app.py")
    (workspace / "gitcfg").symlink_to(".git/config")
    os.link(outside / "secret.txt", workspace / "hard.txt")
    os.link(workspace / "src" / "app.py", workspace / "twin.py")  # both names inside: fine
    found = escaping_links(workspace)
    assert sorted(found) == ["gitcfg", "hard.txt", "out"]
    assert found["hard.txt"].startswith("hardlink:")
