"""The room's mirror: fetching the baseline, locking, and looking at a person's checkout."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cairn.errors import WorkspaceError
from cairn.jobs.gc import prune_mirror
from cairn.testing.repos import commit_file, make_sample_repo
from cairn.workspace import fetch_stamp
from cairn.workspace.git import GitTimeout
from cairn.workspace.mirror import Mirror, checkout_changes
from cairn.workspace.worktree import Worktree

from .gitcli import plain_git


def test_fetch_baseline_from_a_local_path_returns_the_base_tip(
    mirror: Mirror, project: Path
) -> None:
    assert mirror.fetch_baseline() == plain_git(project, "rev-parse", "main")
    assert mirror.exists()
    assert plain_git(mirror.path, "rev-parse", "--is-bare-repository") == "true"


def test_fetch_baseline_follows_the_base_branch_as_it_moves(mirror: Mirror, project: Path) -> None:
    first = mirror.fetch_baseline()
    newer = commit_file(project, "NOTES.md", "notes\n", "Add notes")
    assert mirror.fetch_baseline() == newer != first


def _counting_fetches(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The threads' names, one per fetch from the room's repository made from now on."""
    fetches: list[str] = []
    real = Mirror._fetch_base

    def counted(self: Mirror) -> None:
        fetches.append(threading.current_thread().name)
        real(self)

    monkeypatch.setattr(Mirror, "_fetch_base", counted)
    return fetches


@pytest.mark.parametrize("address", ["checkout", "bare repository by file URL"])
def test_a_repository_on_this_host_is_fetched_only_when_its_tip_moved(
    tmp_path: Path, project: Path, monkeypatch: pytest.MonkeyPatch, address: str
) -> None:
    source = project
    if address != "checkout":
        source = tmp_path / "server" / "app.git"
        plain_git(tmp_path, "clone", "--quiet", "--bare", str(project), str(source))
    repo = str(project) if address == "checkout" else source.as_uri()
    mirror = Mirror(tmp_path / "home" / "room.git", repo, "main")
    first = mirror.fetch_baseline()  # the clone, and a fetch
    fetches = _counting_fetches(monkeypatch)
    asked = fetch_stamp.now()
    assert mirror.fetch_baseline() == first and fetches == []
    # Looked at after this call asked: it serves a job that waited for it, as a fetch would.
    assert fetch_stamp.fetched_since(mirror.path, repo, "main", asked)
    newer = commit_file(project, "NOTES.md", "notes\n", "Add notes")
    if source != project:
        plain_git(project, "push", "--quiet", str(source), "main")
    assert mirror.fetch_baseline() == newer != first and len(fetches) == 1
    assert plain_git(mirror.path, "rev-parse", mirror.base_ref) == newer


@pytest.mark.parametrize("named", ["by its path", "through a link", "under a colon's name"])
def test_a_folder_inside_a_repository_is_never_taken_for_that_repository(
    tmp_path: Path, project: Path, named: str
) -> None:
    if named == "under a colon's name":  # git splits its ceiling setting at colons
        moved = tmp_path / "a:b" / "project"
        plain_git(tmp_path, "clone", "--quiet", str(project), str(moved))
        project = moved
    home = tmp_path / "home" / "room.git"
    Mirror(home, str(project), "main").fetch_baseline()
    # The same mirror, now named for a plain folder of the checkout (not a repository): the
    # checkout's branch, which the mirror holds, must not answer for it.
    folder = project / "docs"
    folder.mkdir()
    if named == "through a link":  # git compares its ceiling with the real folder
        (tmp_path / "links").mkdir()
        (tmp_path / "links" / "docs").symlink_to(folder)
        folder = tmp_path / "links" / "docs"
    elsewhere = Mirror(home, str(folder), "main")
    with pytest.raises(WorkspaceError, match="could not fetch"):
        elsewhere.fetch_baseline()


def test_a_repository_on_this_host_that_never_answers_is_given_up_on(tmp_path: Path) -> None:
    # A stalled disk, or a FIFO where git reads the branch: the lookup before the fetch is
    # held to the same time limit as the fetch, or it would hold the mirror's fetch lock.
    bare = make_sample_repo(tmp_path / "project").parent / "app.git"
    plain_git(tmp_path, "clone", "--quiet", "--bare", str(tmp_path / "project"), str(bare))
    mirror = Mirror(tmp_path / "home" / "room.git", str(bare), "main", git_timeout=1)
    mirror.fetch_baseline()
    plain_git(bare, "update-ref", "-d", "refs/heads/main")
    plain_git(bare, "pack-refs", "--all")
    os.mkfifo(bare / "refs" / "heads" / "main")
    outcome: list[BaseException | str] = []

    def fetch() -> None:
        try:
            outcome.append(mirror.fetch_baseline())
        except BaseException as exc:
            outcome.append(exc)

    asking = threading.Thread(target=fetch, daemon=True)
    asking.start()
    asking.join(30)
    if asking.is_alive():  # let the stuck git go, or the thread never ends
        with open(bare / "refs" / "heads" / "main", "w"):
            pass
    assert outcome and isinstance(outcome[0], GitTimeout), outcome


def test_a_fetch_that_started_after_a_job_asked_serves_that_job_too(
    mirror: Mirror, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mirror.fetch_baseline()  # the clone
    fetches = _counting_fetches(monkeypatch)
    asked = threading.Event()
    real_now = fetch_stamp.now

    def now() -> fetch_stamp.Moment | None:
        moment = real_now()
        if threading.current_thread().name == "waiting job":
            asked.set()
        return moment

    monkeypatch.setattr(fetch_stamp, "now", now)
    got: list[str] = []
    with mirror.fetch_lock():  # another job's fetch holds the lock
        waiting = threading.Thread(
            target=lambda: got.append(mirror.fetch_baseline()), name="waiting job"
        )
        waiting.start()
        assert asked.wait(10)
        newer = commit_file(project, "NOTES.md", "notes\n", "Add notes")
        assert mirror.fetch_baseline() == newer  # started after the waiting job asked
    waiting.join(10)
    assert got == [newer] and fetches == ["MainThread"]

    # A fetch that started before a call asked never serves it.
    newest = commit_file(project, "NOTES.md", "more notes\n", "More notes")
    assert mirror.fetch_baseline() == newest
    assert fetches == ["MainThread", "MainThread"]


def test_a_fetch_serves_no_one_unless_every_clock_says_it_started_later(
    mirror: Mirror, project: Path
) -> None:
    asked = fetch_stamp.now()
    assert asked is not None
    mirror.fetch_baseline()
    stamp = mirror.path / "cairn-fetched"
    recorded = json.loads(stamp.read_text())
    assert fetch_stamp.fetched_since(mirror.path, mirror.repo, "main", asked)
    # Another address, another branch, another boot or time namespace, a monotonic clock
    # offset (a restored snapshot, a time namespace) against the wall clock or the reverse,
    # a stamp dated ahead of now (no fetch started in the future), not a number at all.
    changes: list[dict[str, object]] = [
        {"repo": "elsewhere"},
        {"branch": "develop"},
        {"clock": "another boot/1"},
        {"wall": asked.wall - 1},
        {"monotonic": asked.monotonic - 1},
        {"monotonic": recorded["monotonic"] + 3600, "wall": recorded["wall"] + 3600},
        {"monotonic": float("inf"), "wall": float("inf")},
        {"monotonic": float("nan")},
        {"wall": "soon"},
    ]
    for changed in changes:
        stamp.write_text(json.dumps({**recorded, **changed}))
        assert not fetch_stamp.fetched_since(mirror.path, mirror.repo, "main", asked), changed


def test_a_stamp_dated_ahead_never_freezes_the_baseline(mirror: Mirror, project: Path) -> None:
    mirror.fetch_baseline()
    stamp = mirror.path / "cairn-fetched"
    recorded = json.loads(stamp.read_text())
    a_year = 365 * 24 * 3600
    ahead = {**recorded, "monotonic": recorded["monotonic"] + a_year}
    stamp.write_text(json.dumps({**ahead, "wall": recorded["wall"] + a_year}))
    for number in range(2):
        newer = commit_file(project, "NOTES.md", f"{number}\n", "Notes")
        assert mirror.fetch_baseline() == newer


def test_a_stamp_that_cannot_be_written_costs_the_fetch_nothing(
    mirror: Mirror, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mirror.fetch_baseline()

    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fetch_stamp.json, "dump", disk_full)
    newer = commit_file(project, "NOTES.md", "notes\n", "Add notes")
    assert mirror.fetch_baseline() == newer
    assert not (mirror.path / "cairn-fetched").exists()


def test_a_fetch_that_never_finished_leaves_no_stamp_to_serve_anyone(
    mirror: Mirror, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mirror.fetch_baseline()
    commit_file(project, "NOTES.md", "notes\n", "Add notes")  # so there is one to fetch
    asked = fetch_stamp.now()
    real = Mirror._fetch_base

    def killed(self: Mirror) -> None:
        real(self)  # the ref moved, then the runner died before stamping it
        raise KeyboardInterrupt

    monkeypatch.setattr(Mirror, "_fetch_base", killed)
    with pytest.raises(KeyboardInterrupt):
        mirror.fetch_baseline()
    assert not (mirror.path / "cairn-fetched").exists()
    assert not fetch_stamp.fetched_since(mirror.path, mirror.repo, "main", asked)


@pytest.mark.parametrize("planted", ["folder", "fifo", "garbage", "huge"])
def test_whatever_lies_at_the_stamp_a_fetch_is_made_and_nothing_hangs(
    mirror: Mirror, project: Path, planted: str
) -> None:
    mirror.fetch_baseline()
    stamp = mirror.path / "cairn-fetched"
    stamp.unlink()
    if planted == "folder":
        stamp.mkdir()
    elif planted == "fifo":
        os.mkfifo(stamp)
    else:
        stamp.write_text("{not json" if planted == "garbage" else " " * 10_000 + "{}")
    newer = commit_file(project, "NOTES.md", "notes\n", "Add notes")
    assert mirror.fetch_baseline() == newer
    assert mirror.fetch_baseline() == newer
    assert [p.name for p in mirror.path.iterdir() if p.name.startswith(".cairn")] == []


def test_fetch_baseline_from_a_bare_repository_by_file_url(tmp_path: Path, project: Path) -> None:
    bare = tmp_path / "server" / "app.git"
    plain_git(tmp_path, "clone", "--quiet", "--bare", str(project), str(bare))
    mirror = Mirror(tmp_path / "home" / "room.git", bare.as_uri(), "main")
    assert mirror.fetch_baseline() == plain_git(bare, "rev-parse", "main")


def test_fetch_baseline_of_a_missing_branch_says_so_without_paths(
    tmp_path: Path, project: Path
) -> None:
    mirror = Mirror(tmp_path / "home" / "room.git", str(project), "develop")
    with pytest.raises(WorkspaceError) as caught:
        mirror.fetch_baseline()
    message = str(caught.value)
    assert "'develop' does not exist in the room's repository" in message
    assert str(tmp_path) not in message


def test_an_unreachable_repository_is_a_plain_words_error(tmp_path: Path) -> None:
    mirror = Mirror(tmp_path / "home" / "room.git", str(tmp_path / "nowhere"), "main")
    with pytest.raises(WorkspaceError, match="could not copy the room's repository") as caught:
        mirror.fetch_baseline()
    assert str(tmp_path) not in str(caught.value)
    assert not mirror.path.exists()


def test_an_interrupted_clone_is_redone(mirror: Mirror, project: Path) -> None:
    leftover = mirror.path.with_name(mirror.path.name + ".partial")
    (leftover / "objects").mkdir(parents=True)
    (leftover / "half-written").write_text("x")
    assert mirror.fetch_baseline() == plain_git(project, "rev-parse", "main")
    assert not leftover.exists()


def test_a_foreign_folder_at_the_mirror_path_is_never_overwritten(mirror: Mirror) -> None:
    mirror.path.mkdir(parents=True)
    (mirror.path / "keep.txt").write_text("mine")
    with pytest.raises(WorkspaceError, match="not a git mirror"):
        mirror.fetch_baseline()
    assert (mirror.path / "keep.txt").read_text() == "mine"


def test_a_git_killed_while_writing_the_mirrors_shared_files_stops_no_later_fetch_or_deletion(
    mirror: Mirror, project: Path
) -> None:
    # A runner SIGKILLed while its git held these locks leaves them: every later fetch (the
    # base branch's ref) or ref deletion (packed-refs) on this host would fail on them.
    mirror.fetch_baseline()
    base_lock = mirror.path / f"{mirror.base_ref}.lock"
    packed_lock = mirror.path / "packed-refs.lock"
    a_minute_ago = time.time() - 60  # no live git holds one so long
    for lock in (base_lock, packed_lock):
        lock.write_text("left by a killed git\n")
        os.utime(lock, (a_minute_ago, a_minute_ago))
    newer = commit_file(project, "NOTES.md", "notes\n", "Add notes")
    assert mirror.fetch_baseline() == newer
    plain_git(mirror.path, "update-ref", "refs/cairn/checkpoints/job-1", newer)
    mirror.delete_ref("refs/cairn/checkpoints/job-1", newer, failure="could not delete")
    assert plain_git(mirror.path, "for-each-ref", "refs/cairn/") == ""
    assert not base_lock.exists() and not packed_lock.exists()


def _try_lock_elsewhere(lock_file: Path) -> int:
    probe = (
        "import fcntl, os, sys\n"
        "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
        "try:\n"
        "    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "except BlockingIOError:\n"
        "    sys.exit(3)\n"
    )
    return subprocess.run([sys.executable, "-c", probe, str(lock_file)], check=False).returncode


def test_the_lock_excludes_other_processes_and_is_reentrant(mirror: Mirror) -> None:
    with mirror.lock():
        with mirror.lock():  # re-entry must not deadlock
            assert _try_lock_elsewhere(mirror.lock_path) == 3
        assert _try_lock_elsewhere(mirror.lock_path) == 3
    assert _try_lock_elsewhere(mirror.lock_path) == 0


def test_two_mirror_objects_for_one_path_share_the_lock(mirror: Mirror) -> None:
    twin = Mirror(mirror.path, mirror.repo, mirror.base_branch)
    with mirror.lock(), twin.lock():  # one process, one flock: no self-deadlock
        assert _try_lock_elsewhere(mirror.lock_path) == 3


# --- checkout_changes: a read-only look at a person's checkout of the base branch ---------


def _snapshot(repo: Path) -> tuple[bytes, int]:
    index = repo / ".git" / "index"
    return index.read_bytes(), index.stat().st_mtime_ns


def test_a_clean_checkout_has_no_changes(project: Path) -> None:
    assert checkout_changes(str(project), "main") == []


def test_checkout_changes_sees_staged_unstaged_and_untracked_files(project: Path) -> None:
    (project / "README.md").write_text("edited, not staged\n")
    (project / "src" / "app.py").write_text("staged = True\n")
    plain_git(project, "add", "src/app.py")
    (project / "docs").mkdir()
    (project / "docs" / "draft.md").write_text("untracked\n")
    (project / "__pycache__").mkdir()
    (project / "__pycache__" / "app.pyc").write_bytes(b"ignored")
    assert checkout_changes(str(project), "main") == ["README.md", "docs/draft.md", "src/app.py"]


def test_checkout_changes_modifies_nothing_in_the_checkout(project: Path) -> None:
    (project / "notes.txt").write_text("untracked\n")
    (project / "README.md").write_text("edited\n")
    # A stale stat cache: a normal `git status` would rewrite the index to refresh it.
    os.utime(project / "src" / "app.py", ns=(1_900_000_000_000_000_000,) * 2)
    before = _snapshot(project)
    assert checkout_changes(str(project), "main") == ["README.md", "notes.txt"]
    assert _snapshot(project) == before
    assert plain_git(project, "stash", "list") == ""
    assert (project / "notes.txt").read_text() == "untracked\n"
    assert (project / "README.md").read_text() == "edited\n"


def test_checkout_changes_ignores_other_branches_bare_repos_and_urls(
    tmp_path: Path, project: Path
) -> None:
    (project / "notes.txt").write_text("untracked\n")
    assert checkout_changes(str(project), "develop") == []
    assert checkout_changes("https://example.com/team/app.git", "main") == []
    bare = tmp_path / "bare.git"
    plain_git(tmp_path, "clone", "--quiet", "--bare", str(project), str(bare))
    assert checkout_changes(str(bare), "main") == []


def test_checkout_changes_ignores_a_detached_head(tmp_path: Path) -> None:
    repo = make_sample_repo(tmp_path / "detached")
    plain_git(repo, "checkout", "--quiet", "--detach")
    (repo / "notes.txt").write_text("untracked\n")
    assert checkout_changes(str(repo), "main") == []


def test_checkout_changes_ignores_a_folder_inside_a_repository(project: Path) -> None:
    (project / "src" / "new.py").write_text("x = 1\n")
    assert checkout_changes(str(project / "src"), "main") == []


def test_no_git_in_the_mirror_or_its_workspaces_starts_a_gc_of_its_own(
    worktree: Worktree, mirror: Mirror
) -> None:
    # An agent's git runs without cairn's -c settings; the mirror's own config holds them.
    for where in (mirror.path, worktree.path):
        assert plain_git(where, "config", "gc.auto") == "0"
        assert plain_git(where, "config", "maintenance.auto") == "false"


def test_cairn_gc_turns_automatic_gc_off_in_a_mirror_cloned_before_it_was(
    worktree: Worktree, mirror: Mirror
) -> None:
    for key in ("gc.auto", "maintenance.auto"):
        plain_git(mirror.path, "config", "--unset", key)
    prune_mirror(mirror)
    assert plain_git(worktree.path, "config", "gc.auto") == "0"
    assert plain_git(worktree.path, "config", "maintenance.auto") == "false"
