"""Spares: an entry's layout linked ahead, moved into the next workspace only while intact."""

from __future__ import annotations

import os
import secrets
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from cairn.deps import DependencyCache, QuarantinedError, read_inputs, spares
from cairn.deps import manifest as manifest_module
from cairn.deps import tree as tree_module
from cairn.deps.cache import MARKER
from cairn.store import dependency_caches as ledger
from cairn.store.dependency_caches import CacheRecord, CacheStatus
from cairn.testing.installers import FakeInstaller, fake_project

from .test_cache import (
    built_and_used,
    linked_package,
    only_status,
    refused_next_time,
    write_in_place,
)


def spare_of(
    cache: DependencyCache, workspace: Path, installer: FakeInstaller, record: CacheRecord
) -> Path:
    """Link a spare of the entry ahead; the spare's folder."""
    assert cache.link_ahead(installer, record, workspace)
    [spare] = spares.held(cache.root)
    assert spare.name == "node_modules" and spare.is_dir()
    return spare


def new_workspace(tmp_path: Path, name: str) -> Path:
    workspace = tmp_path / name
    workspace.mkdir()
    return workspace


def test_the_next_materialization_takes_the_spare_by_a_rename(
    tmp_path: Path, cache: DependencyCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    installer, record, index = built_and_used(tmp_path, cache)
    spare = spare_of(cache, tmp_path / "job-1", installer, record)
    folder_inode = spare.stat().st_ino

    def fails(*args: object, **kwargs: object) -> None:
        raise AssertionError("a spare is moved in, not hashed")

    monkeypatch.setattr(tree_module, "file_sha256", fails)
    workspace = new_workspace(tmp_path, "job-2")
    assert len(cache.materialize(installer, record, workspace)) == 2
    moved = workspace / "node_modules"
    assert moved.stat().st_ino == folder_inode, "the spare's own folder: moved, not linked"
    assert (moved / "left-pad" / "index.js").stat().st_ino == index.stat().st_ino
    assert (moved / MARKER).read_text().strip() == record.fingerprint
    assert spares.held(cache.root) == [] and not spare.parent.exists()

    monkeypatch.undo()  # with no spare left, the next one is linked as usual
    third = new_workspace(tmp_path, "job-3")
    assert len(cache.materialize(installer, record, third)) == 2
    assert (third / "node_modules" / "left-pad" / "index.js").stat().st_ino == index.stat().st_ino


def test_a_name_added_to_a_spare_keeps_it_out_of_every_workspace(
    tmp_path: Path, cache: DependencyCache
) -> None:
    installer, record, _index = built_and_used(tmp_path, cache)
    spare = spare_of(cache, tmp_path / "job-1", installer, record)
    spare_inode = spare.stat().st_ino
    (spare / "left-pad" / "sitecustomize.js").write_text("planted\n")

    workspace = new_workspace(tmp_path, "job-2")
    assert len(cache.materialize(installer, record, workspace)) == 2
    linked = workspace / "node_modules"
    assert not (linked / "left-pad" / "sitecustomize.js").exists()
    assert linked.stat().st_ino != spare_inode, "linked afresh"
    assert not spare.parent.exists(), "the spare is removed"
    assert only_status(cache) is CacheStatus.ready, "the entry itself is fine"


def test_a_spare_of_an_entry_changed_since_is_refused_and_the_entry_quarantined(
    tmp_path: Path, cache: DependencyCache
) -> None:
    installer, record, index = built_and_used(tmp_path, cache)
    spare = spare_of(cache, tmp_path / "job-1", installer, record)
    write_in_place(index)  # the spare's file is the same inode: it changed too
    refused_next_time(tmp_path, cache, installer, record)
    assert not spare.parent.exists()


def test_a_quarantined_entry_is_never_materialized_from_its_spare(
    tmp_path: Path, cache: DependencyCache
) -> None:
    installer, record, _index = built_and_used(tmp_path, cache)
    spare_of(cache, tmp_path / "job-1", installer, record)
    with cache.store.begin() as conn:
        ledger.quarantine(conn, record.id, "an advisory arrived")
    workspace = new_workspace(tmp_path, "job-2")
    with pytest.raises(QuarantinedError, match="an advisory arrived"):
        cache.materialize(installer, record, workspace)
    assert not (workspace / "node_modules").exists()


def test_a_process_keeps_a_few_spares_for_the_entries_it_used_last(
    tmp_path: Path, cache: DependencyCache
) -> None:
    installer = FakeInstaller()
    made = []
    for n in range(spares.KEEP + 1):
        workspace = fake_project(tmp_path / f"job-{n}", {f"package-{n}": "1.0.0"})
        record = cache.prepare(installer, read_inputs(workspace, installer))
        assert cache.link_ahead(installer, record, workspace)
        assert cache.link_ahead(installer, record, workspace), "one spare an entry"
        made.append(spares.held(cache.root)[-1])
    assert spares.held(cache.root) == made[1:]
    assert not made[0].exists()


HOLD_A_SPARE = """
import sys, time
from pathlib import Path
from cairn.deps import DependencyCache, spares
from cairn.store import Store
from cairn.testing.installers import FakeInstaller
store_url, root, near = sys.argv[1:]
cache = DependencyCache(Store.open(store_url), Path(root))
[record] = cache.entries()
assert cache.link_ahead(FakeInstaller(), record, Path(near))
[spare] = spares.held(Path(root))
print(spare, flush=True)
time.sleep(120)
"""
"""Another runner: it links a spare of the one entry, then lives on, holding it."""


def dead_owner(cache: DependencyCache) -> Path:
    """What a process that died leaves: a folder under .spares that nobody holds locked."""
    folder = cache.root / spares.SPARES / secrets.token_hex(8)
    (folder / "1234abcd" / "node_modules" / "left-pad").mkdir(parents=True)
    return folder


def test_the_spares_of_processes_that_are_gone_are_swept_and_live_ones_kept(
    tmp_path: Path, cache: DependencyCache
) -> None:
    installer, record, _index = built_and_used(tmp_path, cache)
    early = dead_owner(cache)
    mine = spare_of(cache, tmp_path / "job-1", installer, record)
    assert not early.exists(), "swept when this process first linked a spare"

    store_url = f"sqlite:///{tmp_path}/cairn.db"  # the `sqlite_store` the cache is on
    argv = [sys.executable, "-c", HOLD_A_SPARE, store_url, str(cache.root), str(tmp_path)]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) as live:
        try:
            assert live.stdout is not None
            theirs = Path(live.stdout.readline().strip())
            assert theirs.is_dir() and theirs != mine
            late = dead_owner(cache)
            cache.prune()
            assert not late.exists()
            assert theirs.is_dir(), "another runner's spares stay while it runs"
            assert spares.held(cache.root) == [mine] and mine.is_dir(), "and so do this one's"
        finally:
            live.kill()
    cache.prune()
    assert not theirs.exists()


def test_a_folder_whose_times_were_put_back_is_still_caught(
    tmp_path: Path, cache: DependencyCache
) -> None:
    installer, record, _index = built_and_used(tmp_path, cache)
    spare = spare_of(cache, tmp_path / "job-1", installer, record)
    folder = spare / "left-pad"
    times = folder.stat()
    (folder / "planted.js").write_text("planted\n")
    os.utime(folder, ns=(times.st_atime_ns, times.st_mtime_ns))
    assert folder.stat().st_mtime_ns == times.st_mtime_ns

    workspace = new_workspace(tmp_path, "job-2")
    assert len(cache.materialize(installer, record, workspace)) == 2
    assert not (workspace / "node_modules" / "left-pad" / "planted.js").exists()
    assert only_status(cache) is CacheStatus.ready


def test_a_name_added_to_the_entry_after_its_spare_was_made_quarantines_it(
    tmp_path: Path, cache: DependencyCache
) -> None:
    installer, record, index = built_and_used(tmp_path, cache)
    spare_of(cache, tmp_path / "job-1", installer, record)
    mode = stat.S_IMODE(index.parent.stat().st_mode)
    index.parent.chmod(0o755)
    (index.parent / "extra.pth").write_text("import os\n")
    index.parent.chmod(mode)
    refused_next_time(tmp_path, cache, installer, record)


def test_a_link_changed_while_a_spare_is_recorded_is_refused(
    tmp_path: Path, cache: DependencyCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    installer, record = linked_package(tmp_path, cache)
    settle = manifest_module.settle

    def swap_the_link(mtimes: list[int]) -> None:
        [link] = cache.root.glob(f"{spares.SPARES}/*/*/node_modules/bin-link")
        link.unlink()
        link.symlink_to("/etc/shadow")
        settle(mtimes)

    monkeypatch.setattr(manifest_module, "settle", swap_the_link)
    assert not cache.link_ahead(installer, record, tmp_path / "job-1")
    assert spares.held(cache.root) == []
    assert list(cache.root.glob(f"{spares.SPARES}/*/*")) == [], "nothing is left of it"


def test_no_spare_is_linked_for_a_workspace_on_another_file_system(
    tmp_path: Path, cache: DependencyCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    installer, record, _index = built_and_used(tmp_path, cache)
    real_stat = os.stat
    elsewhere = tmp_path / "job-1"

    def other_device(path, *args, **kwargs):
        found = real_stat(path, *args, **kwargs)
        if Path(path) == elsewhere:
            fields = list(found)
            fields[2] = found.st_dev + 1  # st_dev
            return os.stat_result(fields)
        return found

    monkeypatch.setattr(os, "stat", other_device)
    assert not cache.link_ahead(installer, record, elsewhere)
    assert spares.held(cache.root) == []
