"""cairn.testing is a kit for others: an outside project's tests get its fixtures from the plugin.

The outside test file lives in `tmp_path`, away from cairn's tests/ and its conftest.py files,
and runs in a pytest of its own, so only the installed `pytest11` entry point can give it
`cairn`, `store`, `sample_repo`, `fake_installer` and `fake_auditor`.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from cairn.store import Store, database, identity
from cairn.testing.stores import copy_sqlite_store

OUTSIDE_TEST = """
import pytest

from cairn.deps import DependencyCache, QuarantinedError, read_inputs
from cairn.stages import Stage
from cairn.testing.auditor import Advisory
from cairn.testing.installers import fake_project

WRITE = "steps:\\n  - write: {path: b.txt, content: hi}\\n  - finish: {summary: added b}\\n"


def test_a_scripted_job_reaches_review(cairn):
    job = cairn.submit(WRITE)
    cairn.work()
    assert cairn.job(job.id).stage is Stage.awaiting_review
    assert (cairn.workspace(job.id) / "b.txt").read_text() == "hi"


def test_the_fakes_quarantine_an_advised_version(store, tmp_path, fake_installer, fake_auditor):
    fake_auditor.advisories.append(Advisory("npm", "left-pad", "1.3.0", id="MINE-1"))
    cache = DependencyCache(store, tmp_path / "deps", auditors=[fake_auditor])
    project = fake_project(tmp_path / "p", {"left-pad": "1.3.0"})
    with pytest.raises(QuarantinedError, match="MINE-1"):
        cache.prepare(fake_installer, read_inputs(project, fake_installer))


def test_the_sample_repo_is_a_git_repository(sample_repo):
    assert (sample_repo / ".git").is_dir() and (sample_repo / "src" / "app.py").is_file()
"""


def test_an_outside_project_gets_the_plugins_fixtures(tmp_path: Path) -> None:
    (tmp_path / "test_my_setup.py").write_text(OUTSIDE_TEST)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "CAIRN_"))}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "not postgres"],
        cwd=tmp_path,
        env=env | {"HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout, done.stdout


def test_each_sqlite_url_is_a_private_store_at_the_newest_migration_of_its_own(
    sqlite_url: str, sqlite_template: Path, tmp_path: Path
) -> None:
    # sqlite_url copies one migrated template; a copy must be what `cairn init` would make.
    path = database.sqlite_path(sqlite_url)
    assert path is not None and path.parent == tmp_path
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    store = Store.open(sqlite_url)
    try:
        assert database.current_revision(store.engine) == database.head_revision()
        with store.begin() as conn:
            identity.add_user(conn, "only-in-this-copy")
    finally:
        store.close()
    other = copy_sqlite_store(sqlite_template, tmp_path / "other.db")
    again = Store.open(other)
    try:
        with again.begin() as conn:
            assert identity.find_user(conn, "only-in-this-copy") is None, "the template changed"
    finally:
        again.close()


def test_a_fake_servers_loop_never_waits_on_a_connection_that_left_the_queue() -> None:
    # Between the server's select and its accept a client may give up (a runner killed
    # mid-request): its connection leaves the queue, and a blocking accept would wait for the
    # next client, so `shutdown` (every fake's close) would never return.
    import threading
    from http.server import BaseHTTPRequestHandler

    from cairn.testing.loopback import LoopbackServer

    server = LoopbackServer(None, BaseHTTPRequestHandler)
    try:
        looking = threading.Thread(target=server._handle_request_noblock, daemon=True)
        looking.start()  # as serve_forever does once select said a client was there
        looking.join(timeout=30)
        assert not looking.is_alive()
    finally:
        server.server_close()
