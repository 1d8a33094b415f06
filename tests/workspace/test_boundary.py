"""The workspace boundary: agent-named paths resolve inside the worktree or are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.errors import BoundaryError, WorkspaceError
from cairn.workspace.boundary import resolve_inside, shown_path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    workspace = tmp_path / "workspace"
    (workspace / "src").mkdir(parents=True)
    (workspace / ".git").write_text("gitdir: elsewhere\n")
    return workspace


@pytest.mark.parametrize("relative", ["src/app.py", "new/dir/file.txt", "./README.md"])
def test_paths_inside_resolve_under_the_root(root: Path, relative: str) -> None:
    resolved = resolve_inside(root, relative)
    assert resolved.is_relative_to(root.resolve())
    assert resolved == (root / relative).resolve()


@pytest.mark.parametrize("relative", ["/home/alice/secrets/notes.txt", "/etc/passwd"])
def test_absolute_paths_are_refused_showing_only_the_last_part(root: Path, relative: str) -> None:
    with pytest.raises(BoundaryError, match="absolute path") as caught:
        resolve_inside(root, relative)
    message = str(caught.value)
    assert relative not in message
    assert f"…/{Path(relative).name}" in message


@pytest.mark.parametrize("relative", ["..", "../sibling", "src/../../escape", "src/../app.py"])
def test_any_climbing_is_refused(root: Path, relative: str) -> None:
    with pytest.raises(BoundaryError, match="climbs out"):
        resolve_inside(root, relative)


def test_a_climbing_path_is_shown_by_its_last_part_only(root: Path) -> None:
    # What lies past the ".." is a place on this host the agent guessed at.
    with pytest.raises(BoundaryError, match="climbs out") as caught:
        resolve_inside(root, "../../home/alice/secrets/notes.txt")
    message = str(caught.value)
    assert "alice" not in message
    assert "(…/notes.txt)" in message


@pytest.mark.parametrize(
    ("relative", "shown"),
    [
        ("/" + "n" * 300, "…/" + "n" * 19 + "…" + "n" * 40),
        ("../" + "n" * 300, "…/" + "n" * 19 + "…" + "n" * 40),
        ("d/" * 150 + "file.py", ("d/" * 13) + "…" + ("d/" * 150 + "file.py")[-53:]),
    ],
    ids=["absolute", "climbing", "inside"],
)
def test_a_long_path_is_shown_cut_in_the_middle_so_its_name_stays(
    relative: str, shown: str
) -> None:
    assert shown_path(relative) == shown
    assert len(shown_path(relative)) <= 80


@pytest.mark.parametrize(("relative", "shown"), [("/", "/"), ("//", "/"), ("/etc/", "…/etc")])
def test_the_root_and_a_folder_are_shown_plainly(relative: str, shown: str) -> None:
    assert shown_path(relative) == shown


def test_an_accent_stays_with_its_letter_when_a_path_is_cut() -> None:
    decomposed = "e\u0301" * 100  # "é" as a letter and a combining accent
    assert shown_path(decomposed) == "é" * 26 + "…" + "é" * 53
    marked = "q\u0307" * 100  # a letter and a mark with no composed form
    head, tail = shown_path(marked).split("…")
    assert head == "q\u0307" * 13 and tail == "q\u0307" * 26


def test_a_path_out_through_a_symlink_is_shown_by_its_last_part_only(
    root: Path, tmp_path: Path
) -> None:
    (root / "up").symlink_to(tmp_path)  # a link a repository can carry, to a folder above
    with pytest.raises(BoundaryError, match="through a symlink") as caught:
        resolve_inside(root, "up/home/alice/.config/gh/hosts.yml")
    message = str(caught.value)
    assert "alice" not in message
    assert "…/hosts.yml" in message


@pytest.mark.parametrize("relative", [".git", ".git/config", ".git/hooks/post-checkout"])
def test_the_git_folder_is_off_limits(root: Path, relative: str) -> None:
    with pytest.raises(BoundaryError, match=r"\.git folder"):
        resolve_inside(root, relative)


@pytest.mark.parametrize("relative", ["", "a\0b"])
def test_empty_and_nul_paths_are_refused(root: Path, relative: str) -> None:
    with pytest.raises(BoundaryError, match="empty or invalid"):
        resolve_inside(root, relative)


def test_a_symlink_pointing_out_is_refused(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("not yours")
    (root / "link.txt").symlink_to(outside)
    with pytest.raises(BoundaryError, match="through a symlink"):
        resolve_inside(root, "link.txt")


def test_a_symlinked_directory_pointing_out_is_refused_for_paths_below_it(
    root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside-dir"
    outside.mkdir()
    (root / "src" / "vendor").symlink_to(outside, target_is_directory=True)
    with pytest.raises(BoundaryError, match="through a symlink"):
        resolve_inside(root, "src/vendor/new_file.py")
    assert not (outside / "new_file.py").exists()


def test_a_symlink_into_the_git_folder_is_refused(root: Path) -> None:
    (root / "sneaky").symlink_to(root / ".git")
    with pytest.raises(BoundaryError, match=r"\.git folder"):
        resolve_inside(root, "sneaky")


def test_a_symlink_that_stays_inside_is_allowed(root: Path) -> None:
    (root / "src" / "app.py").write_text("x = 1\n")
    (root / "alias.py").symlink_to(root / "src" / "app.py")
    assert resolve_inside(root, "alias.py") == (root / "src" / "app.py").resolve()


def test_a_symlinked_root_is_followed_once(tmp_path: Path, root: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(root, target_is_directory=True)
    assert resolve_inside(alias, "src") == (root / "src").resolve()


def test_boundary_errors_are_workspace_errors(root: Path) -> None:
    with pytest.raises(WorkspaceError):
        resolve_inside(root, "../x")
