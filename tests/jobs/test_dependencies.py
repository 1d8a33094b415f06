"""Dependencies in whole jobs: real uv and npm against the registries, with small packages.

An approved exact version is recorded in the job's declarations and lockfile, built once into
a read-only cache entry, hardlinked into the workspace, and used by the agent's next step; a
job whose lockfile is already cached installs nothing. These run on SQLite only: the ledger
of cache entries is covered on both backends in tests/deps.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time
from pathlib import Path

import pytest
from tests.deps.conftest import require_npm, snapshot

from cairn.deps import DependencyCache, bundled_advisories, spares
from cairn.deps.cache import TAMPERED
from cairn.deps.uv import find_uv
from cairn.jobs import gates
from cairn.stages import Stage, Status
from cairn.store.dependency_caches import CacheStatus
from cairn.testing.harness import Cairn, Turns
from cairn.testing.repos import commit_file

pytestmark = pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)


def python_package_job(name: str, version: str, module: str, extra: str = "") -> str:
    """A script: write a file, ask for `name==version`, import `module`, write its version."""
    return f"""
steps:
  - write: {{path: notes.txt, content: "before the dependency\\n"}}
  - request_dependency: {{ecosystem: pypi, name: {name}, version: "{version}", reason: "needed"}}
  - run: "python -c 'import {module}; print({module}.__version__)' > imported.txt"
{extra}  - finish: {{summary: "used {name}"}}
"""


SIX_THEN_IMPORT = python_package_job("six", "1.16.0", "six")
WRITE_ONLY = """
steps:
  - write: {path: b.txt, content: "from job B\\n"}
  - finish: {summary: "job B done"}
"""
INSTALL_COMMANDS = ("add", "sync", "venv", "ci", "install")


def _uv_logged(cairn: Cairn) -> Path:
    """Point the installation at a uv that logs every command before running the real one."""
    log = cairn.tmp / "uv-commands.log"
    wrapper = cairn.tmp / "uv-logged"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{log}"\nexec "{find_uv()}" "$@"\n')
    wrapper.chmod(0o755)
    log.write_text("")
    cairn.config = cairn.config.model_copy(update={"uv_command": wrapper})
    return log


def _installs(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if line.split()[0] in INSTALL_COMMANDS]


def _cache(cairn: Cairn) -> DependencyCache:
    return DependencyCache(cairn.store, cairn.config.deps_dir)


def _deliver(cairn: Cairn, job_id: int) -> None:
    """Approve whatever the job waits at until it is delivered."""
    for _ in range(4):
        cairn.work()
        job = cairn.job(job_id)
        if job.status is Status.completed:
            return
        assert job.status is Status.waiting, cairn.detail(job_id)["diagnosis"]
        cairn.approve(job_id)
    raise AssertionError(f"job {job_id} was not delivered")


def _spare_linked_ahead(cairn: Cairn) -> int:
    """Wait for the one spare the runner links ahead after materializing; its folder's inode."""
    deadline = time.monotonic() + 60
    while not spares.held(_cache(cairn).root):
        assert time.monotonic() < deadline, "no spare was linked ahead"
        time.sleep(0.05)
    [spare] = spares.held(_cache(cairn).root)
    return spare.stat().st_ino


def _evidence(cairn: Cairn, job_id: int, stage: Stage) -> dict:
    runs = [s for s in cairn.detail(job_id)["stages"] if s["name"] == stage.value]
    return runs[-1]["evidence"]


def test_an_approved_python_package_is_installed_and_the_agents_next_step_imports_it(
    cairn: Cairn,
    turns: Turns,
) -> None:
    job = cairn.submit(SIX_THEN_IMPORT)
    cairn.work()
    assert cairn.job(job.id).stage is Stage.awaiting_dependency_approval
    _deliver(cairn, job.id)

    # The next step imported it inside the sandbox, and the change pins it for the repository.
    assert cairn.git("show", "main:imported.txt") == "1.16.0"
    assert '"six==1.16.0"' in cairn.git("show", "main:pyproject.toml")
    assert 'name = "six"' in cairn.git("show", "main:uv.lock")
    delivered = cairn.git("ls-tree", "-r", "--name-only", "main").split()
    assert not [p for p in delivered if p.startswith((".venv", "node_modules"))]
    assert "six==1.16.0 was approved and installed" in " ".join(turns.notes(job.id))
    [entry] = _cache(cairn).entries()
    assert entry.status is CacheStatus.ready and entry.ecosystem == "pypi"


def test_an_approved_npm_package_is_installed_and_the_agents_next_step_requires_it(
    cairn: Cairn,
) -> None:
    require_npm()
    manifest = {"name": "greeter-web", "version": "1.0.0", "private": True}
    commit_file(cairn.repo, "package.json", json.dumps(manifest) + "\n", "Add package.json")
    job = cairn.submit("""
steps:
  - request_dependency: {ecosystem: npm, name: is-number, version: "7.0.0", reason: "checks"}
  - run: "node -p 'require(\\"is-number\\")(5)' > n.txt"
  - finish: {summary: "used is-number"}
""")
    cairn.work()
    cairn.approve(job.id)
    _deliver(cairn, job.id)
    assert cairn.git("show", "main:n.txt") == "true"
    assert json.loads(cairn.git("show", "main:package.json"))["dependencies"] == {
        "is-number": "7.0.0"
    }
    assert '"node_modules/is-number"' in cairn.git("show", "main:package-lock.json")


def test_a_second_job_with_the_same_lockfile_installs_nothing_and_a_changed_one_gets_a_new_entry(
    cairn: Cairn,
) -> None:
    log = _uv_logged(cairn)
    first = cairn.submit(SIX_THEN_IMPORT)
    _deliver(cairn, first.id)
    assert _installs(log), "the first job built the entry"
    [entry] = _cache(cairn).entries()
    built = snapshot(_cache(cairn).entry_path(entry.fingerprint))
    spare = _spare_linked_ahead(cairn)

    log.write_text("")
    second = cairn.submit(WRITE_ONLY)
    _deliver(cairn, second.id)
    assert _installs(log) == [], "a fingerprint hit runs no package manager"
    venv = cairn.workspace(second.id) / ".venv"
    assert venv.stat().st_ino == spare, "the runner's spare was moved in"
    evidence = _evidence(cairn, second.id, Stage.preparing_dependencies)
    assert evidence["dependency_sets"]["value"] == 1
    assert evidence["packages_materialized"]["value"] == entry.package_count > 0
    assert [(e.id, e.status) for e in _cache(cairn).entries()] == [(entry.id, CacheStatus.ready)]
    assert (venv / ".cairn-dependencies").read_text().strip() == entry.fingerprint

    third = cairn.submit(python_package_job("tomli-w", "1.1.0", "tomli_w"))
    _deliver(cairn, third.id)
    entries = _cache(cairn).entries()
    assert len(entries) == 2 and entries[0].id == entry.id
    assert entries[1].fingerprint != entry.fingerprint
    assert snapshot(_cache(cairn).entry_path(entry.fingerprint)) == built


def test_the_agent_cannot_change_its_materialized_dependencies(cairn: Cairn) -> None:
    """Read-only in the sandbox: the files are hardlinks of the one shared cache entry."""
    change = '  - run: "echo changed >> .venv/lib/python3*/site-packages/six.py"\n'
    job = cairn.submit(python_package_job("six", "1.16.0", "six", extra=change))
    cairn.work()
    cairn.approve(job.id)
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["status"] == "failed" and "exited with code" in detail["diagnosis"]
    [entry] = _cache(cairn).entries()
    _cache(cairn).verify(entry)  # raises if the entry changed
    assert entry.status is CacheStatus.ready


def test_a_package_with_an_advisory_is_quarantined_and_blocks_the_job(cairn: Cairn) -> None:
    cairn.config = cairn.config.model_copy(update={"osv_dir": bundled_advisories()})
    job = cairn.submit(python_package_job("certifi", "2023.5.7", "certifi"))
    cairn.work()
    cairn.approve(job.id)
    cairn.work()
    detail = cairn.detail(job.id)
    assert (detail["status"], detail["stage"]) == ("blocked", "installing_dependency")
    assert "certifi==2023.5.7" in detail["diagnosis"]
    assert "GHSA-xqr8-7jwr-rhp7" in detail["diagnosis"]
    workspace = cairn.workspace(job.id)
    assert "certifi" not in (workspace / "pyproject.toml").read_text(), "workspace untouched"
    assert not (workspace / ".venv").exists() and not (workspace / "uv.lock").exists()
    [entry] = _cache(cairn).entries()
    assert entry.status is CacheStatus.quarantined


def test_a_file_changed_in_a_cache_entry_blocks_the_next_job_until_pruned(cairn: Cairn) -> None:
    first = cairn.submit(SIX_THEN_IMPORT)
    _deliver(cairn, first.id)
    [entry] = _cache(cairn).entries()
    [six] = _cache(cairn).entry_path(entry.fingerprint).glob(".venv/lib/*/site-packages/six.py")
    six.chmod(six.stat().st_mode | stat.S_IWUSR)
    with six.open("a") as handle:
        handle.write("# changed behind cairn's back\n")
    six.chmod(stat.S_IMODE(six.stat().st_mode) & ~0o222)

    second = cairn.submit(WRITE_ONLY)
    cairn.work()
    detail = cairn.detail(second.id)
    assert (detail["status"], detail["stage"]) == ("blocked", "preparing_dependencies")
    assert TAMPERED[:80] in detail["diagnosis"]
    assert not (cairn.workspace(second.id) / ".venv").exists()
    assert _cache(cairn).entries()[0].status is CacheStatus.quarantined

    _cache(cairn).prune()
    with cairn.store.begin() as conn:
        gates.resume(conn, second.id, "alice")
    _deliver(cairn, second.id)
    assert [e.status for e in _cache(cairn).entries()] == [CacheStatus.ready]
    assert "behind cairn's back" not in six.read_text(), "built afresh"


def test_job_a_waits_for_approval_while_job_b_runs_then_resumes_in_its_own_context(
    cairn: Cairn,
    turns: Turns,
) -> None:
    a = cairn.submit(SIX_THEN_IMPORT)
    b = cairn.submit(WRITE_ONLY)
    cairn.work()
    assert (cairn.job(a.id).stage, cairn.job(a.id).status) == (
        Stage.awaiting_dependency_approval,
        Status.waiting,
    )
    assert cairn.job(b.id).stage is Stage.awaiting_review, "B ran while A waited"

    cairn.approve(a.id)
    cairn.work()
    assert cairn.job(a.id).stage is Stage.awaiting_review
    workspace = cairn.workspace(a.id)
    assert (workspace / "imported.txt").read_text() == "1.16.0\n"
    assert (workspace / "notes.txt").read_text() == "before the dependency\n", "not redone"
    assert any("six==1.16.0 was approved" in n for n in turns.notes(a.id))
    assert not turns.notes(b.id), "B never heard A's decision"
    assert not (cairn.workspace(b.id) / ".venv").exists()


def test_materialized_dependencies_are_hardlinks_inside_the_workspace(cairn: Cairn) -> None:
    job = cairn.submit(SIX_THEN_IMPORT)
    cairn.work()
    cairn.approve(job.id)
    cairn.work()
    venv = cairn.workspace(job.id) / ".venv"
    [entry] = _cache(cairn).entries()
    cached = _cache(cairn).entry_path(entry.fingerprint) / ".venv"
    for path in venv.rglob("*"):
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            target = os.readlink(path)
            assert not target.startswith(str(cairn.config.home)), f"{path} links into cairn's home"
        elif stat.S_ISREG(info.st_mode) and path.name != ".cairn-dependencies":
            twin = cached / path.relative_to(venv)
            assert info.st_ino == twin.stat().st_ino, f"{path} is not a hardlink of the entry"
            assert not info.st_mode & 0o222, f"{path} is writable"
    status = subprocess.run(
        ["git", "status", "--porcelain", "--", ".venv"], cwd=venv.parent, capture_output=True,
        text=True, check=True,
    ).stdout  # fmt: skip
    assert status == "", "materialized dependencies are never part of the job's change"
