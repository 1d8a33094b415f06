"""`cairn audit head` and `cairn audit verify --head`: an anchor catches a cut tail."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing

import pytest

from .conftest import Cli

pytestmark = pytest.mark.acceptance

WRITE = 'steps:\n  - write: {path: w.txt, content: "w\\n"}\n  - finish: {summary: "added w"}\n'


def _sql(cli: Cli, statement: str, *params: object) -> list[tuple]:
    with closing(sqlite3.connect(cli.home / "cairn.db")) as db, db:
        return db.execute(statement, params).fetchall()


def test_verify_against_a_kept_head_fails_once_the_newest_decision_is_deleted(cli: Cli) -> None:
    cli.room()
    job = cli.submit(WRITE)
    cli.work()
    cli("reject", str(job), "--reason", "not now")
    rows = _sql(cli, "SELECT id, hash FROM decisions ORDER BY id")
    assert len(rows) == 2  # the policy's run approval and the rejection

    printed = cli("audit", "head").stdout.strip()
    assert printed == f"2 decisions, head {rows[-1][1]}"
    kept = cli.json("audit", "head")
    assert kept == {"count": 2, "head": rows[-1][1]}
    held = cli("audit", "verify", "--head", kept["head"])
    assert "intact: 2 decisions verified" in held.stdout and held.stderr == ""

    _sql(cli, "DELETE FROM decisions WHERE id = ?", rows[-1][0])
    alone = cli("audit", "verify")
    assert "intact: 1 decisions verified" in alone.stdout, "the chain alone cannot see the cut"

    cut = cli("audit", "verify", "--head", kept["head"], expect=1)
    assert cut.stdout == ""
    (line,) = cut.stderr.splitlines()
    assert "no longer holds head" in line and kept["head"] in line
    report = json.loads(cli("audit", "verify", "--head", kept["head"], "--json", expect=1).stdout)
    assert report == {"ok": False, "checked": 1, "broken_id": None, "head_in_chain": False}
    assert cli.json("audit", "head") == {"count": 1, "head": rows[0][1]}


def test_a_malformed_head_is_a_usage_error(cli: Cli) -> None:
    done = cli("audit", "verify", "--head", "not-a-hash", expect=2)
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: ") and "cairn audit head" in line


def test_a_broken_chain_has_no_head_to_keep(cli: Cli) -> None:
    cli.room()
    cli.submit(WRITE)
    cli.work()
    _sql(cli, "UPDATE decisions SET actor = 'someone else'")
    done = cli("audit", "head", expect=1)
    (line,) = done.stderr.splitlines()
    assert "is broken" in line and "cairn audit verify" in line and done.stdout == ""
