"""The fingerprinted cache: reuse without install, immutable entries, quarantine, hardlinks."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import stat
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from cairn.deps import (
    DependencyCache,
    Finding,
    InstallError,
    NpmInstaller,
    OsvDirectory,
    Package,
    QuarantinedError,
    UvInstaller,
    add_dependency,
    bundled_advisories,
    read_inputs,
)
from cairn.deps import cache as cache_module
from cairn.deps import manifest as manifest_module
from cairn.deps import tree as tree_module
from cairn.deps.cache import TAMPERED
from cairn.next_action import Action, NextAction
from cairn.store import Store
from cairn.store import dependency_caches as ledger
from cairn.store.dependency_caches import CacheRecord, CacheStatus
from cairn.store.schema import dependency_caches
from cairn.testing.auditor import Advisory, FakeAuditor
from cairn.testing.installers import FakeInstaller, fake_project
from cairn.testing.repos import npm_project, python_project
from cairn.workspace.boundary import escaping_links

from .conftest import CountingRunner, snapshot, uv_path


def uv_shim(tmp_path: Path) -> tuple[Path, Path]:
    """A `uv` that logs every invocation, then runs the real one: proof of which processes ran."""
    log = tmp_path / "uv-invocations.log"
    shim = tmp_path / "uv-shim"
    shim.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec "{uv_path()}" "$@"\n')
    shim.chmod(0o755)
    return shim, log


def installs(log: Path) -> list[str]:
    lines = log.read_text().splitlines() if log.exists() else []
    return [line for line in lines if line != "--version"]


def prepared_six(tmp_path: Path, installer: UvInstaller, cache: DependencyCache):
    workspace = python_project(tmp_path / "job-1")
    add_dependency(installer, workspace, "six", "1.16.0")
    return workspace, cache.prepare(installer, read_inputs(workspace, installer))


def test_a_second_job_with_the_same_lockfile_installs_nothing(
    tmp_path: Path, cache: DependencyCache
) -> None:
    shim, log = uv_shim(tmp_path)
    first = UvInstaller(uv=shim, download_cache=tmp_path / "uv-cache", runner=CountingRunner())
    job_1, built = prepared_six(tmp_path, first, cache)
    assert any(line.startswith("sync") for line in installs(log))
    entry = snapshot(cache.entry_path(built.fingerprint))
    seen = len(installs(log))

    job_2 = tmp_path / "job-2"
    job_2.mkdir()
    for name in ("pyproject.toml", "uv.lock"):
        shutil.copyfile(job_1 / name, job_2 / name)
    second = UvInstaller(uv=shim, download_cache=tmp_path / "other-cache", runner=CountingRunner())
    reused = cache.prepare(second, read_inputs(job_2, second))
    assert len(cache.materialize(second, reused, job_2)) == 1

    assert second.runner.commands == [] and len(installs(log)) == seen  # no uv process at all
    assert not (tmp_path / "other-cache").exists()  # nothing downloaded
    assert (reused.id, reused.created_at, reused.content_id) == (
        built.id,
        built.created_at,
        built.content_id,
    )
    with cache.store.begin() as conn:
        [row] = ledger.list_entries(conn)
    assert row.status is CacheStatus.ready and row.updated_at >= built.updated_at
    assert snapshot(cache.entry_path(built.fingerprint)) == entry
    done = subprocess.run([str(job_2 / ".venv/bin/python"), "-c", "import six"], check=False)
    assert done.returncode == 0


def test_a_changed_lockfile_makes_a_new_entry_and_the_old_one_stays_byte_identical(
    tmp_path: Path, uv_installer: UvInstaller, cache: DependencyCache
) -> None:
    workspace, old = prepared_six(tmp_path, uv_installer, cache)
    before = snapshot(cache.entry_path(old.fingerprint))
    add_dependency(uv_installer, workspace, "iniconfig", "2.0.0")
    new = cache.prepare(uv_installer, read_inputs(workspace, uv_installer))
    assert new.fingerprint != old.fingerprint and new.package_count == 2
    assert snapshot(cache.entry_path(old.fingerprint)) == before
    assert len(cache.materialize(uv_installer, new, workspace)) == 2  # replaces the earlier copy
    with cache.store.begin() as conn:
        rows = ledger.list_entries(conn)
    assert [(r.fingerprint, r.status) for r in rows] == [
        (old.fingerprint, CacheStatus.ready),
        (new.fingerprint, CacheStatus.ready),
    ]


def test_a_modified_file_in_an_entry_is_detected_before_reuse_and_quarantined(
    tmp_path: Path, uv_installer: UvInstaller, cache: DependencyCache
) -> None:
    _workspace, record = prepared_six(tmp_path, uv_installer, cache)
    [six] = cache.entry_path(record.fingerprint).glob(".venv/lib/python*/site-packages/six.py")
    original = six.read_bytes()
    six.chmod(0o644)  # what a careless admin (or root) can always do
    six.write_bytes(original.replace(b"import", b"imporT", 1))  # same size, other content
    target = tmp_path / "job-2"
    target.mkdir()
    with pytest.raises(QuarantinedError, match="changed after it was built") as refused:
        cache.materialize(uv_installer, record, target)
    assert refused.value.next_actions == (NextAction(Action.prune_cache),)  # `cairn cache prune`
    assert not (target / ".venv").exists()
    with cache.store.begin() as conn:
        row = ledger.get(conn, record.id)
    assert row.status is CacheStatus.quarantined and row.diagnosis == TAMPERED
    with pytest.raises(QuarantinedError):  # refused, not silently rebuilt
        cache.prepare(uv_installer, read_inputs(tmp_path / "job-1", uv_installer))
    assert [r.fingerprint for r in cache.prune()] == [record.fingerprint]
    rebuilt = cache.prepare(uv_installer, read_inputs(tmp_path / "job-1", uv_installer))
    assert rebuilt.status is CacheStatus.ready and rebuilt.created_at > record.created_at


@pytest.mark.parametrize("ecosystem", ["pypi", "npm"])
def test_an_advisory_for_an_approved_version_quarantines_the_entry(
    ecosystem: str, tmp_path: Path, sqlite_store: Store, request: pytest.FixtureRequest
) -> None:
    cache = DependencyCache(
        sqlite_store, tmp_path / "deps", auditors=[OsvDirectory(bundled_advisories())]
    )
    if ecosystem == "pypi":
        installer = request.getfixturevalue("uv_installer")
        workspace = python_project(tmp_path / "job")
        name, version, advisory = "certifi", "2023.5.7", "GHSA-xqr8-7jwr-rhp7"
    else:
        installer = request.getfixturevalue("npm_installer")
        workspace = npm_project(tmp_path / "job")
        name, version, advisory = "minimist", "1.2.5", "GHSA-xvch-5gv4-984h"
    add_dependency(installer, workspace, name, version)
    with pytest.raises(QuarantinedError) as held:
        cache.prepare(installer, read_inputs(workspace, installer))
    assert name in str(held.value) and version in str(held.value) and advisory in str(held.value)
    [row] = cache.entries()
    assert row.status is CacheStatus.quarantined and row.diagnosis == str(held.value)
    assert row.audit is not None and row.audit["blocking"] == [advisory]
    with pytest.raises(QuarantinedError):
        cache.materialize(installer, row, workspace)
    assert not (workspace / installer.target).exists()


def test_a_new_advisory_blocks_reuse_of_a_ready_entry(tmp_path: Path, sqlite_store: Store) -> None:
    workspace = fake_project(tmp_path / "job", {"left-pad": "1.3.0"})
    installer = FakeInstaller()
    inputs = read_inputs(workspace, installer)
    assert DependencyCache(sqlite_store, tmp_path / "deps").prepare(installer, inputs)
    published = FakeAuditor([Advisory("npm", "left-pad", "1.3.0", id="TEST-1", severity="HIGH")])
    audited = DependencyCache(sqlite_store, tmp_path / "deps", auditors=[published])
    with pytest.raises(QuarantinedError, match=r"left-pad@1\.3\.0 has HIGH advisory TEST-1"):
        audited.prepare(installer, inputs)
    assert installer.prepared == 1


def test_materialized_files_are_hardlinks_or_copies_and_no_link_leads_into_the_cache(
    tmp_path: Path, uv_installer: UvInstaller, cache: DependencyCache, monkeypatch
) -> None:
    workspace, record = prepared_six(tmp_path, uv_installer, cache)
    cache.materialize(uv_installer, record, workspace)
    entry = cache.entry_path(record.fingerprint)
    [six] = workspace.glob(".venv/lib/python*/site-packages/six.py")
    assert six.stat().st_ino == (entry / six.relative_to(workspace)).stat().st_ino
    links = {
        str(p.relative_to(workspace)): os.readlink(p)
        for p in workspace.rglob("*")
        if p.is_symlink()
    }
    # The one link out: the venv's interpreter, a system path outside cache and workspace.
    assert [path for path, pointed in links.items() if os.path.isabs(pointed)] == [
        ".venv/bin/python"
    ]
    assert {links[".venv/bin/python3"], links[".venv/lib64"]} == {"python", "lib"}
    assert all(
        not kind.startswith("symlink:") or path.startswith(".venv/bin/python")
        for path, kind in escaping_links(workspace).items()
    )
    interpreter = os.path.realpath(workspace / ".venv/bin/python")
    assert not Path(interpreter).is_relative_to(cache.root)
    assert not Path(interpreter).is_relative_to(workspace)
    for path in workspace.rglob("*"):
        if path.is_symlink():
            assert not Path(os.path.realpath(path)).is_relative_to(cache.root)

    def no_hardlinks(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(tree_module.os, "link", no_hardlinks)
    elsewhere = tmp_path / "other-filesystem"
    elsewhere.mkdir()
    assert len(cache.materialize(uv_installer, record, elsewhere)) == 1
    [copied] = elsewhere.glob(".venv/lib/python*/site-packages/six.py")
    assert copied.stat().st_ino != six.stat().st_ino and copied.read_bytes() == six.read_bytes()
    done = subprocess.run([str(elsewhere / ".venv/bin/python"), "-c", "import six"], check=False)
    assert done.returncode == 0


@pytest.mark.parametrize("pointed", ["/etc", "../../../../outside", "../../inputs/package.json"])
def test_an_entry_whose_links_lead_out_is_refused(
    pointed: str, tmp_path: Path, cache: DependencyCache
) -> None:
    workspace = fake_project(tmp_path / "job", {"left-pad": "1.3.0"})
    installer = FakeInstaller(links={"escape": pointed})
    with pytest.raises(InstallError, match="link that leads outside"):
        cache.prepare(installer, read_inputs(workspace, installer))
    [row] = cache.entries()
    assert row.status is CacheStatus.failed
    assert not any((cache.root / ".staging").iterdir())


def test_a_workspace_folder_cairn_did_not_make_is_never_replaced(
    tmp_path: Path, cache: DependencyCache
) -> None:
    workspace = fake_project(tmp_path / "job", {"left-pad": "1.3.0"})
    installer = FakeInstaller()
    record = cache.prepare(installer, read_inputs(workspace, installer))
    (workspace / "node_modules").mkdir()
    (workspace / "node_modules" / "mine.js").write_text("keep")
    with pytest.raises(InstallError, match="already has its own node_modules"):
        cache.materialize(installer, record, workspace)
    assert (workspace / "node_modules" / "mine.js").read_text() == "keep"
    shutil.rmtree(workspace / "node_modules")
    os.symlink(tmp_path, workspace / "node_modules")
    with pytest.raises(InstallError, match="already has its own node_modules"):
        cache.materialize(installer, record, workspace)


def test_concurrent_preparations_of_one_fingerprint_build_once(
    tmp_path: Path, cache: DependencyCache
) -> None:
    workspace = fake_project(tmp_path / "job", {"left-pad": "1.3.0"})
    installer = FakeInstaller(delay=0.3)
    inputs = read_inputs(workspace, installer)
    results = []
    threads = [
        threading.Thread(target=lambda: results.append(cache.prepare(installer, inputs)))
        for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert installer.prepared == 1 and len({r.id for r in results}) == 1 and len(results) == 3


def test_prune_removes_what_cannot_be_used_and_spares_what_is_in_use(
    tmp_path: Path, cache: DependencyCache
) -> None:
    installer = FakeInstaller()
    ready = cache.prepare(
        installer, read_inputs(fake_project(tmp_path / "a", {"a": "1.0.0"}), installer)
    )
    other = cache.prepare(
        installer, read_inputs(fake_project(tmp_path / "b", {"b": "1.0.0"}), installer)
    )
    failing = FakeInstaller(links={"x": "/etc"})
    with pytest.raises(InstallError):
        cache.prepare(failing, read_inputs(fake_project(tmp_path / "c", {"c": "1.0.0"}), failing))
    with cache.store.begin() as conn:
        ledger.quarantine(conn, other.id, "held")
    (cache.root / ".staging" / f"{'f' * 64}-dead").mkdir()
    removed = cache.prune()
    assert sorted(r.status for r in removed) == [CacheStatus.failed, CacheStatus.quarantined]
    assert not cache.entry_path(other.fingerprint).exists()
    assert list((cache.root / ".staging").iterdir()) == []
    assert [r.id for r in cache.entries()] == [ready.id]

    with entry_in_use(cache, installer, tmp_path / "a"):
        assert cache.prune(everything=True) == []
    assert cache.prune(unused_for=timedelta(days=1)) == []
    assert [r.id for r in cache.prune(unused_for=timedelta(0))] == [ready.id]
    assert cache.entries() == [] and not cache.entry_path(ready.fingerprint).exists()


def test_npm_entries_materialize_with_their_bin_links_inside(
    tmp_path: Path, npm_installer: NpmInstaller, cache: DependencyCache
) -> None:
    workspace = npm_project(tmp_path / "job")
    add_dependency(npm_installer, workspace, "semver", "7.6.0")
    record = cache.prepare(npm_installer, read_inputs(workspace, npm_installer))
    assert len(cache.materialize(npm_installer, record, workspace)) == record.package_count
    link = workspace / "node_modules" / ".bin" / "semver"
    assert link.is_symlink() and not os.path.isabs(os.readlink(link))
    assert Path(os.path.realpath(link)).is_relative_to(workspace)
    assert not [p for p, kind in escaping_links(workspace).items() if kind.startswith("symlink")]
    done = subprocess.run(
        [str(link), "1.2.3", "-r", ">=1"], capture_output=True, text=True, check=False
    )
    assert done.stdout.strip() == "1.2.3"


@contextlib.contextmanager
def entry_in_use(cache: DependencyCache, installer: FakeInstaller, project: Path) -> Iterator[None]:
    """While inside, another thread is reusing the project's ready entry (its audit paused)."""
    auditing, done = threading.Event(), threading.Event()

    class PausedAuditor(FakeAuditor):
        def audit(self, ecosystem: str, packages: Sequence[Package]) -> list[Finding]:
            auditing.set()
            done.wait(timeout=30)
            return super().audit(ecosystem, packages)

    reusing = DependencyCache(cache.store, cache.root, auditors=[PausedAuditor()])
    thread = threading.Thread(
        target=reusing.prepare, args=(installer, read_inputs(project, installer))
    )
    thread.start()
    try:
        assert auditing.wait(timeout=30), "the reuse never reached its audit"
        yield
    finally:
        done.set()
        thread.join()


def built_and_used(
    tmp_path: Path, cache: DependencyCache
) -> tuple[FakeInstaller, CacheRecord, Path]:
    """A ready entry of two packages, materialized once; (installer, record, one file in it)."""
    installer = FakeInstaller()
    workspace = fake_project(tmp_path / "job-1", {"left-pad": "1.3.0", "is-number": "7.0.0"})
    record = cache.prepare(installer, read_inputs(workspace, installer))
    assert len(cache.materialize(installer, record, workspace)) == 2
    entry = cache.entry_path(record.fingerprint)
    return installer, record, entry / "node_modules" / "left-pad" / "index.js"


def used_again(
    tmp_path: Path, cache: DependencyCache, installer: FakeInstaller, record: CacheRecord
) -> Path:
    """Materialize the entry into a new job's workspace (both packages); that workspace."""
    target = tmp_path / "job-2"
    target.mkdir()
    assert len(cache.materialize(installer, record, target)) == 2
    return target


def write_in_place(index: Path) -> os.stat_result:
    """Change a read-only file of an entry in place, same size, mode restored; its old stat."""
    before = index.stat()
    index.chmod(0o644)
    index.write_bytes(index.read_bytes().replace(b"1.3.0", b"6.6.6"))
    index.chmod(stat.S_IMODE(before.st_mode))
    return before


def only_status(cache: DependencyCache) -> CacheStatus:
    [row] = cache.entries()
    return row.status


def refused_next_time(
    tmp_path: Path, cache: DependencyCache, installer: FakeInstaller, record: CacheRecord
) -> None:
    """The next materialization is refused, leaves nothing behind and quarantines the entry."""
    target = tmp_path / "job-next"
    target.mkdir()
    with pytest.raises(QuarantinedError, match="changed after it was built"):
        cache.materialize(installer, record, target)
    assert not (target / "node_modules").exists()
    assert only_status(cache) is CacheStatus.quarantined


def linked_package(tmp_path: Path, cache: DependencyCache) -> tuple[FakeInstaller, CacheRecord]:
    """A ready entry of one package and a relative link to it, `node_modules/bin-link`."""
    installer = FakeInstaller(links={"bin-link": "left-pad/index.js"})
    workspace = fake_project(tmp_path / "job-1", {"left-pad": "1.3.0"})
    return installer, cache.prepare(installer, read_inputs(workspace, installer))


def test_a_hit_hashes_no_content_and_links_the_recorded_inodes(
    tmp_path: Path, cache: DependencyCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    installer, record = linked_package(tmp_path, cache)
    entry = cache.entry_path(record.fingerprint)
    manifest = entry / manifest_module.MANIFEST
    assert hashlib.sha256(manifest.read_bytes()).hexdigest() == record.content_id
    assert stat.S_IMODE(manifest.stat().st_mode) & 0o222 == 0

    def no_hashing(path: str) -> bytes:
        raise AssertionError("a hit must not hash content")

    monkeypatch.setattr(tree_module, "file_sha256", no_hashing)
    for job in ("job-2", "job-3"):
        target = tmp_path / job
        target.mkdir()
        assert len(cache.materialize(installer, record, target)) == 1
        index = Path("node_modules/left-pad/index.js")
        assert (target / index).stat().st_ino == (entry / index).stat().st_ino
        assert os.readlink(target / "node_modules" / "bin-link") == "left-pad/index.js"
        marker = target / "node_modules" / cache_module.MARKER
        assert marker.read_text().strip() == record.fingerprint


def test_a_same_size_write_in_place_is_caught_by_the_next_materialize(
    tmp_path: Path, cache: DependencyCache
) -> None:
    installer, record, index = built_and_used(tmp_path, cache)
    before = write_in_place(index)
    after = index.stat()
    assert (after.st_size, after.st_ino, after.st_mode) == (
        before.st_size,
        before.st_ino,
        before.st_mode,
    )
    refused_next_time(tmp_path, cache, installer, record)


def test_a_file_replaced_by_rename_is_caught_even_with_its_times_restored(
    tmp_path: Path, cache: DependencyCache
) -> None:
    installer, record, index = built_and_used(tmp_path, cache)
    before, folder = index.stat(), index.parent.stat()
    index.parent.chmod(0o755)
    swap = index.parent / "swap"
    swap.write_bytes(index.read_bytes().replace(b"1.3.0", b"6.6.6"))
    swap.chmod(stat.S_IMODE(before.st_mode))
    os.utime(swap, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.rename(swap, index)
    index.parent.chmod(stat.S_IMODE(folder.st_mode))
    os.utime(index.parent, ns=(folder.st_atime_ns, folder.st_mtime_ns))
    after = index.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_mode) == (
        before.st_size,
        before.st_mtime_ns,
        before.st_mode,
    )
    assert after.st_ino != before.st_ino  # only the inode tells
    refused_next_time(tmp_path, cache, installer, record)


def test_a_file_added_to_an_entry_folder_is_caught(tmp_path: Path, cache: DependencyCache) -> None:
    installer, record, index = built_and_used(tmp_path, cache)
    mode = stat.S_IMODE(index.parent.stat().st_mode)
    index.parent.chmod(0o755)
    (index.parent / "extra.pth").write_text("import os\n")  # what a .pth in site-packages does
    index.parent.chmod(mode)
    refused_next_time(tmp_path, cache, installer, record)


def test_a_rewritten_manifest_is_refused(tmp_path: Path, cache: DependencyCache) -> None:
    installer = FakeInstaller()
    workspace = fake_project(tmp_path / "job-1", {"left-pad": "1.3.0"})
    record = cache.prepare(installer, read_inputs(workspace, installer))
    entry = cache.entry_path(record.fingerprint)
    manifest = entry / manifest_module.MANIFEST
    data = manifest.read_bytes()
    tree = data.split(b"\0")[1]
    entry.chmod(0o755)
    manifest.chmod(0o644)
    manifest.write_bytes(data.replace(tree, b"0" * len(tree)))
    refused_next_time(tmp_path, cache, installer, record)


def test_a_touched_but_unchanged_file_is_hashed_in_full_and_used(
    tmp_path: Path, cache: DependencyCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    installer, record, index = built_and_used(tmp_path, cache)
    before = index.stat()
    os.utime(index, ns=(before.st_atime_ns, before.st_mtime_ns + 10**9))
    hashed = []
    real_sha256 = tree_module.file_sha256
    monkeypatch.setattr(tree_module, "file_sha256", lambda p: hashed.append(p) or real_sha256(p))
    target = used_again(tmp_path, cache, installer, record)
    assert str(index) in hashed  # the fallback hashed the content, which had not changed
    assert (target / "node_modules/left-pad/index.js").stat().st_ino == before.st_ino
    assert only_status(cache) is CacheStatus.ready


def test_cache_verify_catches_a_write_that_restores_the_mtime(
    tmp_path: Path, cache: DependencyCache
) -> None:
    """The documented gap: the per-use check cannot see this write, the full hash does."""
    installer, record, index = built_and_used(tmp_path, cache)
    before = write_in_place(index)
    os.utime(index, ns=(before.st_atime_ns, before.st_mtime_ns))
    used_again(tmp_path, cache, installer, record)  # size, inode, mtime as recorded
    with pytest.raises(QuarantinedError, match="changed after it was built"):
        cache.verify(record)
    assert only_status(cache) is CacheStatus.quarantined


def test_use_is_written_to_the_ledger_at_most_once_a_minute(
    tmp_path: Path, cache: DependencyCache
) -> None:
    installer, record, _index = built_and_used(tmp_path, cache)
    with cache.store.begin() as conn:
        used = ledger.get(conn, record.id).updated_at
    for job, minutes_ago in (("job-2", 0), ("job-3", 2)):
        if minutes_ago:
            with cache.store.begin() as conn:
                earlier = used - timedelta(minutes=minutes_ago)
                conn.execute(
                    sa.update(dependency_caches)
                    .where(dependency_caches.c.id == record.id)
                    .values(updated_at=earlier)
                )
        (tmp_path / job).mkdir()
        cache.materialize(installer, record, tmp_path / job)
        with cache.store.begin() as conn:
            now = ledger.get(conn, record.id).updated_at
        assert (now == used) if not minutes_ago else (now > used)


def test_recording_waits_out_the_timestamp_tick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slept: list[float] = []
    monkeypatch.setattr(manifest_module.time, "sleep", slept.append)
    now = time.time_ns()

    def record_written_at(name: str, mtime_ns: int) -> None:
        file = tmp_path / name / "file"
        file.parent.mkdir()
        file.write_text("x")
        os.utime(file, ns=(mtime_ns, mtime_ns))
        manifest_module.record_manifest(file.parent)

    record_written_at("old", now - 10 * 10**9)  # written long ago: nothing to wait for
    assert slept == []
    # Nanosecond timestamps: a jiffy or two. Stamped a little ahead, so that a busy machine's
    # pause between stamping and recording cannot make the tick already over.
    record_written_at("ns", time.time_ns() + 5 * 10**6)
    assert 0 < slept[-1] <= 0.04
    # Whole seconds (FAT, HFS+): a tick of up to 2 s, far longer than a jiffy. The mtime is
    # taken now, not at the start: on a busy machine a second may already have gone by.
    second = time.time_ns() // 10**9 * 10**9
    record_written_at("s", second)
    assert 0.02 < slept[-1] <= 2
