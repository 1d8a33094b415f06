"""Verifying the decision chain: what `cairn audit verify` and `GET /api/audit/verify` report."""

from __future__ import annotations

import re
from typing import Any

import sqlalchemy as sa

from cairn.errors import UsageError
from cairn.store import decisions
from cairn.store.decisions import ChainReport

HEAD_PATTERN = re.compile(r"[0-9a-f]{64}")


def parse_head(head: str | None) -> str | None:
    """A head kept from `cairn audit head`, normalized; a UsageError for anything else."""
    if head is None:
        return None
    anchor = head.strip().lower()
    if not HEAD_PATTERN.fullmatch(anchor):
        raise UsageError("the head is the 64-character hash that `cairn audit head` printed")
    return anchor


def verify(conn: sa.Connection, head: str | None) -> tuple[ChainReport, str | None]:
    """Walk the chain (against `head` when one is given); the report and the anchor used."""
    anchor = parse_head(head)
    return decisions.verify_chain(conn, anchor), anchor


def report_data(report: ChainReport, anchor: str | None) -> dict[str, Any]:
    """The JSON form `cairn audit verify --json` prints: `head_in_chain` only with an anchor."""
    shown: dict[str, Any] = {
        "ok": report.ok,
        "checked": report.checked,
        "broken_id": report.broken_id,
    }
    return shown if anchor is None else shown | {"head_in_chain": report.head_in_chain}
