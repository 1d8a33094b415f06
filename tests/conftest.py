"""Root of cairn's tests: the fixtures come from cairn's own pytest plugin, cairn.testing.plugin.

That plugin (installed with cairn, entry point `pytest11: cairn`) gives every test folder
`store_url` / `store` (parametrized "sqlite" and "postgres"), `sqlite_url`, `postgres_url`,
`empty_store_url`, `postgres_admin`, `cairn` (an installation), `sample_repo`,
`fake_installer`, `fake_auditor` and `package_downloads`; see its docstring.

PostgreSQL must listen on 127.0.0.1:5432 with trust auth. When it does not, the "postgres"
variants are skipped, unless CAIRN_REQUIRE_POSTGRES=1 (CI), where they fail instead.

`make test` runs the suite on pytest-xdist workers: every session-scoped fixture is built once
per worker (in that worker's own tmp_path_factory folder), and PostgreSQL databases are named
by process, so no two workers share a file, a database or an environment variable.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Let the cairn processes the tests start be stopped with Ctrl-C, as a person's would.

    A shell that starts pytest in the background (`cmd &`, nohup, some CI wrappers) hands it
    SIGINT ignored, and every child inherits that, so the tests that press Ctrl-C on a runner
    would wait for nothing. A handler of our own is reset to the default in each child.
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session", autouse=True)
def shared_package_downloads(package_downloads: Path) -> Path:
    """Every test, also one that runs the CLI, shares the session's download cache."""
    return package_downloads
