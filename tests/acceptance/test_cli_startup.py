"""The CLI answers at once: a command imports only what it needs (no timing, only imports).

`benchmarks/cli_startup.py` measures the time; this checks the cause that keeps it low, so a
heavy import creeping back onto the path of `--help` or `jobs` fails here, on any machine.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .conftest import Cli

pytestmark = pytest.mark.acceptance

# Runs the real entry point in a fresh interpreter, then reports which modules it loaded.
PROBE = """
import json, sys
sys.argv = ["cairn", *json.loads(sys.argv[1])]
from cairn.cli import main
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""
HEAVY_FOR_HELP = (
    "sqlalchemy",
    "alembic",
    "pydantic",
    "pydantic_settings",
    "rich",
    "yaml",
    "psycopg",
)


def loaded(args: list[str], env: dict[str, str]) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


def roots(modules: set[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


def test_help_imports_no_store_no_models_and_no_rich(cli: Cli) -> None:
    heavy = roots(loaded(["--help"], cli.env)) & set(HEAVY_FOR_HELP)
    assert heavy == set(), f"`cairn --help` imported {sorted(heavy)}"


@pytest.mark.parametrize("args", [["jobs", "--help"], ["room"]])
def test_a_commands_help_opens_no_store(cli: Cli, args: list[str]) -> None:
    # Typer itself loads pydantic (its type adapters) once it builds a command's context.
    heavy = roots(loaded(args, cli.env)) & (set(HEAVY_FOR_HELP) - {"pydantic"})
    assert heavy == set(), f"`cairn {' '.join(args)}` imported {sorted(heavy)}"


def test_listing_jobs_opens_the_store_without_alembic_or_the_runner(cli: Cli) -> None:
    modules = loaded(["jobs"], cli.env)
    assert "sqlalchemy" in modules, "the probe really listed jobs"
    assert "alembic" not in roots(modules)
    assert not {
        m for m in modules if m.startswith(("cairn.jobs.runner", "cairn.deps", "cairn.agents"))
    }
