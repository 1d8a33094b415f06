"""Root of cairn's tests: the fixtures come from cairn's own pytest plugin, cairn.testing.plugin.

That plugin (installed with cairn, entry point `pytest11: cairn`) gives every test folder
`store_url` / `store` (parametrized "sqlite" and "postgres"), `sqlite_url`, `postgres_url`,
`empty_store_url`, `postgres_admin`, `cairn` (an installation), `sample_repo`,
`fake_installer`, `fake_auditor` and `package_downloads`; see its docstring.

PostgreSQL must listen on 127.0.0.1:5432 with trust auth. When it does not, the "postgres"
variants are skipped, unless CAIRN_REQUIRE_POSTGRES=1 (CI), where they fail instead.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session", autouse=True)
def shared_package_downloads(package_downloads: Path) -> Path:
    """Every test, also one that runs the CLI, shares the session's download cache."""
    return package_downloads
