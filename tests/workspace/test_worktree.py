"""A job's worktree: idempotent creation, content identity, and crash-safe commits."""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cairn.errors import WorkspaceError
from cairn.testing.repos import commit_file
from cairn.workspace import worktree as worktree_module
from cairn.workspace.mirror import Mirror
from cairn.workspace.worktree import Worktree

from .gitcli import plain_git


def _index(tree: Worktree) -> tuple[bytes, int]:
    index = Path(plain_git(tree.path, "rev-parse", "--path-format=absolute", "--git-path", "index"))
    return index.read_bytes(), index.stat().st_mtime_ns


def test_ensure_creates_the_worktree_on_the_jobs_branch(worktree: Worktree, baseline: str) -> None:
    assert worktree.is_valid()
    assert plain_git(worktree.path, "symbolic-ref", "HEAD") == "refs/heads/cairn/job-1"
    assert worktree.head() == baseline
    assert (worktree.path / "src" / "app.py").is_file()
    assert plain_git(worktree.path, "status", "--porcelain") == ""


def test_ensure_again_reuses_the_worktree_with_its_uncommitted_work(
    worktree: Worktree, baseline: str
) -> None:
    (worktree.path / "src" / "app.py").write_text("edited by the agent\n")
    (worktree.path / "NEW.md").write_text("untracked\n")
    worktree.ensure(baseline)
    worktree.ensure(baseline)
    assert (worktree.path / "src" / "app.py").read_text() == "edited by the agent\n"
    assert (worktree.path / "NEW.md").read_text() == "untracked\n"
    assert worktree.head() == baseline


def test_ensure_after_the_folder_vanished_restores_the_jobs_own_commits(
    worktree: Worktree, baseline: str
) -> None:
    (worktree.path / "NEW.md").write_text("work\n")
    committed = worktree.commit(baseline, "Add NEW.md")
    shutil.rmtree(worktree.path)
    worktree.ensure(baseline)
    assert worktree.head() == committed
    assert (worktree.path / "NEW.md").read_text() == "work\n"


def test_a_branch_of_the_jobs_name_in_the_repository_is_never_adopted(
    home: Path, project: Path
) -> None:
    plain_git(project, "switch", "--quiet", "-c", "cairn/job-1")
    commit_file(project, "foreign.txt", "someone else's\n", "Another installation's job 1")
    plain_git(project, "switch", "--quiet", "main")
    mirror = Mirror(home / "mirrors" / "room-1.git", str(project), "main")
    baseline = mirror.fetch_baseline()
    assert plain_git(mirror.path, "for-each-ref", "refs/heads/") == "", "no branch copied in"
    tree = Worktree(mirror, home / "workspaces" / "job-1", "cairn/job-1")
    tree.ensure(baseline)
    assert tree.head() == baseline
    assert not (tree.path / "foreign.txt").exists()


def test_a_kept_branch_that_does_not_build_on_the_baseline_is_refused(
    worktree: Worktree, mirror: Mirror, project: Path, baseline: str
) -> None:
    (worktree.path / "NEW.md").write_text("work\n")
    committed = worktree.commit(baseline, "Add NEW.md")
    shutil.rmtree(worktree.path)
    commit_file(project, "CHANGELOG.md", "- later\n", "Later on main")
    newer = mirror.fetch_baseline()
    with pytest.raises(WorkspaceError, match="does not build on the job's baseline"):
        worktree.ensure(newer)
    assert plain_git(mirror.path, "rev-parse", "refs/heads/cairn/job-1") == committed
    assert not worktree.path.exists()


def test_ensure_recovers_from_an_interrupted_checkout(
    home: Path, mirror: Mirror, baseline: str
) -> None:
    tree = Worktree(mirror, home / "workspaces" / "job-2", "cairn/job-2")
    half_made = tree.path.with_name("job-2.partial")
    half_made.mkdir(parents=True)
    (half_made / "README.md").write_text("half")
    tree.ensure(baseline)
    assert tree.is_valid()
    assert not half_made.exists()
    assert (tree.path / "README.md").read_text().startswith("# greeter")


# What `git worktree add` has written when it is SIGKILLed, in the order it writes: its
# entry locked, the folder, the entry's back-link, the folder's `.git`, a placeholder HEAD
# and commondir, then the checkout (the lock goes last).
_ADD_WRITES = ("locked", "folder", "gitdir", ".git", "HEAD", "checkout")


@pytest.mark.parametrize("killed_after", _ADD_WRITES)
@pytest.mark.parametrize("branch_made", [False, True])
def test_ensure_recovers_from_a_worktree_add_killed_midway(
    home: Path, mirror: Mirror, baseline: str, killed_after: str, branch_made: bool
) -> None:
    tree = Worktree(mirror, home / "workspaces" / "job-3", "cairn/job-3")
    staging = tree.path.with_name("job-3.partial")
    if branch_made:  # `add -b` makes the branch before the worktree
        plain_git(mirror.path, "branch", "cairn/job-3", baseline)
    if killed_after == "checkout":
        plain_git(mirror.path, "worktree", "add", "--quiet", "--lock", str(staging), baseline)
        (mirror.path / "worktrees" / staging.name / "locked").write_text("initializing\n")
    else:
        entry = mirror.path / "worktrees" / staging.name
        entry.mkdir(parents=True)
        writes = _ADD_WRITES[: _ADD_WRITES.index(killed_after) + 1]
        (entry / "locked").write_text("initializing\n")
        if "folder" in writes:
            staging.mkdir(parents=True)
        if "gitdir" in writes:
            (entry / "gitdir").write_text(f"{staging}/.git\n")
        if ".git" in writes:
            (staging / ".git").write_text(f"gitdir: {entry}\n")
        if "HEAD" in writes:
            (entry / "HEAD").write_text("0" * 40 + "\n")
            (entry / "commondir").write_text("../..\n")

    tree.ensure(baseline)

    assert tree.is_valid()
    assert tree.head() == baseline
    assert (tree.path / "README.md").read_text().startswith("# greeter")
    assert not staging.exists()
    entries = [entry.name for entry in (mirror.path / "worktrees").iterdir()]
    assert entries == [staging.name], "the killed add's entry is gone; the new one took its name"


def test_a_worktree_locked_for_another_reason_stays_locked(
    home: Path, mirror: Mirror, baseline: str
) -> None:
    other = home / "workspaces" / "elsewhere"
    plain_git(mirror.path, "worktree", "add", "--quiet", "--lock", str(other), baseline)
    Worktree(mirror, home / "workspaces" / "job-4", "cairn/job-4").ensure(baseline)
    shutil.rmtree(other)
    assert mirror.unlock_interrupted_adds() is False
    plain_git(mirror.path, "worktree", "prune")
    assert (mirror.path / "worktrees" / "elsewhere" / "locked").exists()


def test_ensure_heals_a_crash_inside_the_final_move(
    worktree: Worktree, mirror: Mirror, baseline: str
) -> None:
    (worktree.path / "NEW.md").write_text("work\n")
    admin = Path(plain_git(worktree.path, "rev-parse", "--path-format=absolute", "--git-dir"))
    # Died after renaming the folder, before git rewrote its back-link: the next prune
    # (by any job's ensure) would forget this worktree.
    (admin / "gitdir").write_text(f"{worktree.path.with_name('job-1.partial')}/.git\n")
    worktree.ensure(baseline)
    plain_git(mirror.path, "worktree", "prune")
    assert worktree.is_valid()
    assert str(worktree.path) in plain_git(mirror.path, "worktree", "list")
    assert (worktree.path / "NEW.md").read_text() == "work\n"


def test_ensure_says_whether_it_made_a_worktree_that_holds_only_the_baseline(
    home: Path, mirror: Mirror, baseline: str
) -> None:
    tree = Worktree(mirror, home / "workspaces" / "job-5", "cairn/job-5")
    assert tree.ensure(baseline) is True
    assert tree.ensure(baseline) is False  # reused as it is
    (tree.path / "NEW.md").write_text("work\n")
    tree.commit(baseline, "Add NEW.md")
    shutil.rmtree(tree.path)
    assert tree.ensure(baseline) is False  # made again, on the job's own commits
    assert (tree.path / "NEW.md").is_file()


def test_tip_is_the_branch_head_and_its_tree(worktree: Worktree, baseline: str) -> None:
    assert worktree.tip() == (baseline, plain_git(worktree.path, "rev-parse", "HEAD^{tree}"))


def test_a_relative_pointer_to_the_jobs_own_entry_is_still_its_worktree(
    worktree: Worktree, baseline: str
) -> None:
    admin = plain_git(worktree.path, "rev-parse", "--path-format=absolute", "--git-dir")
    (worktree.path / ".git").write_text(f"gitdir: {os.path.relpath(admin, worktree.path)}\n")
    assert worktree.is_valid()
    assert worktree.head() == baseline


def test_a_pointer_through_a_link_among_the_mirrors_entries_is_refused(
    worktree: Worktree, mirror: Mirror, tmp_path: Path
) -> None:
    admin = Path(plain_git(worktree.path, "rev-parse", "--path-format=absolute", "--git-dir"))
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(admin, elsewhere)
    link = mirror.path / "worktrees" / "linked"
    link.symlink_to(elsewhere)
    (worktree.path / ".git").write_text(f"gitdir: {link}\n")
    assert not worktree.is_valid()
    with pytest.raises(WorkspaceError, match="no longer points at cairn's copy"):
        worktree.content_id()


def test_ensure_refuses_a_foreign_folder(home: Path, mirror: Mirror, baseline: str) -> None:
    folder = home / "workspaces" / "job-3"
    folder.mkdir(parents=True)
    (folder / "precious.txt").write_text("someone's")
    with pytest.raises(WorkspaceError, match="not this job's worktree"):
        Worktree(mirror, folder, "cairn/job-3").ensure(baseline)
    assert (folder / "precious.txt").read_text() == "someone's"


def test_ensure_accepts_an_empty_folder(home: Path, mirror: Mirror, baseline: str) -> None:
    folder = home / "workspaces" / "job-4"
    folder.mkdir(parents=True)
    tree = Worktree(mirror, folder, "cairn/job-4")
    tree.ensure(baseline)
    assert tree.is_valid()
    assert (folder / "README.md").is_file()


def test_content_id_of_an_untouched_worktree_is_the_baseline_tree(
    worktree: Worktree, baseline: str
) -> None:
    assert worktree.content_id() == plain_git(worktree.path, "rev-parse", f"{baseline}^{{tree}}")


def test_content_id_includes_untracked_but_not_ignored_files(worktree: Worktree) -> None:
    before = worktree.content_id()
    (worktree.path / "__pycache__").mkdir()
    (worktree.path / "__pycache__" / "app.pyc").write_bytes(b"ignored")
    assert worktree.content_id() == before
    (worktree.path / "docs").mkdir()
    (worktree.path / "docs" / "guide.md").write_text("new\n")
    assert worktree.content_id() != before


def test_content_id_sees_an_equal_size_edit_with_the_same_mtime(worktree: Worktree) -> None:
    target = worktree.path / "data.txt"
    target.write_text("aaaa\n")
    plain_git(worktree.path, "add", "data.txt")  # the agent's own index now caches its stat
    first = worktree.content_id()
    stamp = target.stat().st_mtime_ns
    target.write_text("bbbb\n")
    os.utime(target, ns=(stamp, stamp))
    assert worktree.content_id() != first


def test_content_id_never_touches_the_worktrees_index(worktree: Worktree) -> None:
    (worktree.path / "README.md").write_text("changed\n")
    (worktree.path / "extra.txt").write_text("untracked\n")
    before = _index(worktree)
    worktree.content_id()
    assert _index(worktree) == before
    assert "?? extra.txt" in plain_git(worktree.path, "status", "--porcelain")


def test_changed_files_and_diffstat_compare_with_the_baseline(
    worktree: Worktree, baseline: str
) -> None:
    (worktree.path / "README.md").write_text("rewritten\n")
    (worktree.path / "src" / "extra.py").write_text("x = 1\n")
    (worktree.path / "tests" / "test_app.py").unlink()
    assert worktree.changed_files(baseline) == ["README.md", "src/extra.py", "tests/test_app.py"]
    stat = worktree.diffstat(baseline)
    assert "README.md" in stat.text
    assert stat.text.rstrip().endswith("3 files changed, 2 insertions(+), 10 deletions(-)")
    assert "\0" not in stat.text
    assert stat.counted == {"README.md", "src/extra.py", "tests/test_app.py"}


def test_commit_records_the_content_and_leaves_a_clean_status(
    worktree: Worktree, baseline: str
) -> None:
    (worktree.path / "README.md").write_text("rewritten\n")
    (worktree.path / "NEW.md").write_text("untracked\n")
    content = worktree.content_id()
    sha = worktree.commit(baseline, "Rewrite the README\n\nBy job 1.")
    assert plain_git(worktree.path, "rev-parse", f"{sha}^{{tree}}") == content
    assert plain_git(worktree.path, "rev-parse", f"{sha}^") == baseline
    assert plain_git(worktree.path, "log", "-1", "--format=%an <%ae>|%s", sha) == (
        "cairn <cairn@localhost>|Rewrite the README"
    )
    assert plain_git(worktree.path, "status", "--porcelain") == ""


@pytest.mark.parametrize("split_index", [False, True])
def test_a_commit_makes_the_index_it_measured_the_worktrees_own(
    worktree: Worktree,
    baseline: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    split_index: bool,
) -> None:
    if split_index:  # a user's config asking for an index in two files
        (tmp_path / "gitconfig").write_text("[core]\n\tsplitIndex = true\n")
        monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    started: list[str] = []
    real_run_git = worktree_module.run_git

    def run_git(*args: str, **kwargs: Any) -> str:
        started.extend(a for a in args if a in ("reset", "read-tree", "update-index"))
        return real_run_git(*args, **kwargs)

    monkeypatch.setattr(worktree_module, "run_git", run_git)
    (worktree.path / "README.md").write_text("rewritten\n")
    (worktree.path / "NEW.md").write_text("untracked\n")
    (worktree.path / "tests" / "test_app.py").unlink()
    sha = worktree.commit(baseline, "Rewrite")
    assert started == ["read-tree"], "measured once, and no reset after the commit"
    monkeypatch.undo()
    assert plain_git(worktree.path, "status", "--porcelain") == ""
    assert plain_git(worktree.path, "diff", "--cached", "--name-only", sha) == ""
    assert plain_git(worktree.path, "ls-files") == plain_git(
        worktree.path, "ls-tree", "-r", "--name-only", sha
    )
    # With every file's stat data: git trusts the index without hashing the files again.
    assert "mtime: 0:0" not in plain_git(worktree.path, "ls-files", "--debug")
    # One file, whatever the user's config, and nothing left beside it in the git folder.
    admin = _git_path(worktree, "index").parent
    assert not list(admin.glob("sharedindex.*")) and not list(admin.glob("cairn-index-*"))
    assert not (admin / "index.lock").exists()


def test_an_index_another_git_holds_is_left_to_that_git(worktree: Worktree, baseline: str) -> None:
    (worktree.path / "NEW.md").write_text("work\n")
    lock = _git_path(worktree, "index.lock")
    lock.write_text("a running git's\n")
    before = _index(worktree)
    with pytest.raises(WorkspaceError, match="could not refresh the index"):
        worktree.commit(baseline, "Add NEW.md")
    assert lock.read_text() == "a running git's\n" and _index(worktree) == before
    lock.unlink()
    assert worktree.commit(baseline, "Add NEW.md") == worktree.head()  # the index catches up
    assert plain_git(worktree.path, "status", "--porcelain") == ""


def test_a_commit_of_a_tree_measured_elsewhere_is_not_given_this_measurements_index(
    worktree: Worktree, baseline: str
) -> None:
    (worktree.path / "NEW.md").write_text("first\n")
    worktree.content_id()  # this object's measurement, then the workspace changes
    (worktree.path / "NEW.md").write_text("second\n")
    other = Worktree(worktree.mirror, worktree.path, worktree.branch)
    sha = worktree.commit(baseline, "Add NEW.md", tree=other.content_id())
    assert plain_git(worktree.path, "show", f"{sha}:NEW.md") == "second"
    assert plain_git(worktree.path, "status", "--porcelain") == ""


def test_an_index_that_cannot_be_replaced_is_a_plain_words_error(
    worktree: Worktree, baseline: str
) -> None:
    (worktree.path / "NEW.md").write_text("work\n")
    index = _git_path(worktree, "index")
    index.unlink()
    index.mkdir()  # what an agent outside any sandbox could leave there
    with pytest.raises(WorkspaceError, match="could not refresh the index"):
        worktree.commit(baseline, "Add NEW.md")
    assert not _git_path(worktree, "index.lock").exists()


def test_a_measurement_index_goes_with_the_worktree_object(
    worktree: Worktree, baseline: str
) -> None:
    admin = _git_path(worktree, "index").parent
    measuring = Worktree(worktree.mirror, worktree.path, worktree.branch)
    measuring.content_id()
    assert len(list(admin.glob("cairn-index-*"))) == 1
    del measuring
    gc.collect()
    assert not list(admin.glob("cairn-index-*"))


def test_a_commit_written_before_and_pruned_since_is_written_again(
    worktree: Worktree, baseline: str
) -> None:
    # A user's gc.pruneExpire=now lets `cairn gc` prune a commit no ref names yet.
    (worktree.path / "NEW.md").write_text("work\n")
    early = worktree.commit_object(worktree.content_id(), baseline, "Add NEW.md")
    plain_git(worktree.mirror.path, "-c", "gc.pruneExpire=now", "gc", "--quiet")
    assert subprocess.run(["git", "cat-file", "-e", early], cwd=worktree.mirror.path).returncode
    sha = worktree.commit(baseline, "Add NEW.md")  # the same id again, within one second
    assert worktree.head() == sha
    assert plain_git(worktree.path, "show", f"{sha}:NEW.md") == "work"


def test_commit_is_idempotent(worktree: Worktree, baseline: str) -> None:
    (worktree.path / "NEW.md").write_text("work\n")
    first = worktree.commit(baseline, "Add NEW.md")
    assert worktree.commit(baseline, "Add NEW.md") == first
    assert plain_git(worktree.path, "rev-list", "--count", f"{baseline}..HEAD") == "1"


def test_commit_after_a_crash_before_the_index_caught_up(worktree: Worktree, baseline: str) -> None:
    (worktree.path / "NEW.md").write_text("work\n")
    first = worktree.commit(baseline, "Add NEW.md")
    plain_git(worktree.path, "read-tree", baseline)  # as if we died right after update-ref
    assert worktree.commit(baseline, "Add NEW.md") == first
    assert plain_git(worktree.path, "status", "--porcelain") == ""


def test_a_later_commit_builds_on_the_earlier_one(worktree: Worktree, baseline: str) -> None:
    (worktree.path / "NEW.md").write_text("one\n")
    first = worktree.commit(baseline, "One")
    (worktree.path / "NEW.md").write_text("two\n")
    second = worktree.commit(baseline, "Two")
    assert second != first
    assert plain_git(worktree.path, "rev-parse", f"{second}^") == first


def test_commit_without_changes_is_refused(worktree: Worktree, baseline: str) -> None:
    with pytest.raises(WorkspaceError, match="no changes to commit"):
        worktree.commit(baseline, "Nothing")
    assert worktree.head() == baseline


def _git_path(tree: Worktree, name: str) -> Path:
    return Path(plain_git(tree.path, "rev-parse", "--path-format=absolute", "--git-path", name))


def _plant(lock: Path, age: float) -> None:
    lock.write_text("a git's lock\n")
    then = time.time() - age
    os.utime(lock, (then, then))


def test_locks_older_than_the_limit_are_cleared_and_younger_ones_awaited(
    worktree: Worktree, baseline: str
) -> None:
    old = [_git_path(worktree, "index.lock"), _git_path(worktree, "refs/heads/cairn/job-1.lock")]
    ageing = _git_path(worktree, "ORIG_HEAD.lock")
    finishing = _git_path(worktree, "HEAD.lock")
    for lock in old:
        _plant(lock, age=3600)
    _plant(ageing, age=29.5)  # a lock of a git killed a moment before its lease ran out
    _plant(finishing, age=1)  # a git of a runner that is still stopping holds it...
    threading.Timer(0.3, finishing.unlink).start()  # ...and lets go
    started = time.monotonic()
    cleared = worktree.clear_stale_locks(older_than=30)
    assert sorted(cleared) == ["ORIG_HEAD.lock", "index.lock", "job-1.lock"]
    assert time.monotonic() - started >= 0.3, "the younger locks were waited for"
    assert not any(lock.exists() for lock in [*old, ageing, finishing])
    (worktree.path / "NEW.md").write_text("work\n")
    assert worktree.commit(baseline, "Add NEW.md") != baseline, "git works there again"


def test_a_killed_branch_creation_does_not_stop_the_workspace_being_made(
    home: Path, mirror: Mirror, baseline: str
) -> None:
    # `worktree add -b` first makes the branch; a runner SIGKILLed there leaves its lock.
    tree = Worktree(mirror, home / "workspaces" / "job-6", "cairn/job-6")
    lock = mirror.path / "refs" / "heads" / "cairn" / "job-6.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    _plant(lock, age=3600)
    assert tree.clear_stale_locks(older_than=30) == ["job-6.lock"]
    assert tree.ensure(baseline) is True
    assert tree.head() == baseline


def test_a_worktree_pointing_at_another_jobs_entry_clears_none_of_its_locks(
    home: Path, mirror: Mirror, worktree: Worktree, baseline: str
) -> None:
    other = Worktree(mirror, home / "workspaces" / "job-2", "cairn/job-2")
    other.ensure(baseline)
    theirs = _git_path(other, "index.lock")
    _plant(theirs, age=3600)
    # What an agent with write access to its .git could do: name the other job's entry.
    (worktree.path / ".git").write_text((other.path / ".git").read_text())
    assert worktree.clear_stale_locks(older_than=30) == [] and theirs.exists()


def test_an_entry_whose_commondir_is_another_repository_is_not_valid(
    worktree: Worktree, project: Path
) -> None:
    entry = _git_path(worktree, "commondir").parent
    (entry / "commondir").write_text(f"{project / '.git'}\n")
    assert not worktree.is_valid()


def test_fetches_never_see_a_worktree_being_added(
    home: Path, mirror: Mirror, project: Path, baseline: str
) -> None:
    # `worktree add` writes a HEAD of zeros first; a fetch reading every worktree's HEAD in that
    # moment fails with "bad object". Jobs of one host fetch while others make workspaces.
    adding_done = threading.Event()
    failures: list[str] = []

    def fetch_while_adding() -> None:
        number = 0
        while not adding_done.is_set():
            number += 1
            commit_file(project, "FETCHED.md", f"{number}\n", f"Fetch {number}")
            try:
                mirror.fetch_baseline()
            except WorkspaceError as exc:
                failures.append(f"{exc}: {getattr(exc, 'detail', '')}")

    fetcher = threading.Thread(target=fetch_while_adding)
    fetcher.start()
    try:
        for number in range(40):
            tree = Worktree(mirror, home / "workspaces" / f"job-{number}", f"cairn/job-{number}")
            tree.ensure(baseline)
            tree.remove()
    finally:
        adding_done.set()
        fetcher.join()
    assert failures == []


def test_measurements_of_processes_gone_are_dropped_and_live_ones_kept(
    worktree: Worktree, baseline: str
) -> None:
    admin = _git_path(worktree, "index").parent
    worktree.content_id()
    [own] = admin.glob("cairn-index-*")
    gone = _a_pid_gone()
    # A killed runner's index and git's lock on it, and one named before indexes carried a
    # process id; then another live process's (a runner stopping gracefully, still driving).
    dead = [f"cairn-index-{gone}-0dead", f"cairn-index-{gone}-0dead.lock", "cairn-index-0old"]
    live = admin / f"cairn-index-{os.getppid()}-1live"
    for name in [*dead, live.name]:
        _plant(admin / name, age=1)
    assert sorted(worktree.drop_dead_measurements()) == sorted(dead)
    assert sorted(admin.glob("cairn-index-*")) == sorted([own, live])
    assert _git_path(worktree, "index").exists(), "the worktree's own index stays"
    (worktree.path / "NEW.md").write_text("work\n")
    assert worktree.commit(baseline, "Add NEW.md") != baseline, "its own measurement still works"


def _a_pid_gone() -> int:
    """The id of a process that has ended (and been reaped)."""
    ended = subprocess.Popen(["true"])
    ended.wait()
    return ended.pid
