"""Scale-out tests drive the real `cairn` CLI, as the acceptance tests do, on both backends.

Fixtures from tests/acceptance (`cli`, `background`) plus `pg_cli`: the same installation with
its store on a fresh PostgreSQL database (`CAIRN_DATABASE_URL`) and its home for workspaces.
"""

from __future__ import annotations

import pytest

from acceptance.conftest import (  # noqa: F401 (fixtures, found by pytest under these names)
    CALL_TIMEOUT,
    Cli,
    background,
    cli,
    template_home,
)

INIT = ("init", "--run-approval", "auto", "--auto-kinds", "interactive,scheduled")


@pytest.fixture
def pg_cli(fresh_cli_home: Cli, postgres_url: str) -> Cli:
    """An installation like `cli` (group default, admin, alice), its store on PostgreSQL."""
    fresh_cli_home.env["CAIRN_DATABASE_URL"] = postgres_url
    fresh_cli_home(*INIT)
    fresh_cli_home("user", "add", "alice")
    return fresh_cli_home


@pytest.fixture
def fresh_cli_home(cli: Cli) -> Cli:  # noqa: F811 (the fixture imported above)
    """`cli` with its SQLite store set aside, so that `pg_cli` starts from nothing."""
    for leftover in cli.home.glob("cairn.db*"):
        leftover.unlink()
    return cli
