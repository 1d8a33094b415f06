"""`cairn runners`: which runner processes work on this store, and which are lost."""

from __future__ import annotations

from datetime import UTC, datetime

import typer

from cairn.cli.context import JSON_OPTION, console, print_json, session


def runners(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """List runners: host, pid, started, last heartbeat and the jobs each holds.

    A runner not heard from for a whole lease is `lost`: its jobs are claimable by any other.
    """
    from cairn.store.runners import list_runners

    with session(ctx).store() as store, store.begin() as conn:
        rows = list_runners(conn)
    if as_json:
        print_json(
            [
                {
                    "id": row.id,
                    "host": row.host,
                    "pid": row.pid,
                    "concurrency": row.concurrency,
                    "started_at": row.started_at.isoformat(),
                    "heartbeat_at": row.heartbeat_at.isoformat(),
                    "state": "lost" if row.lost else "alive",
                    "jobs": list(row.jobs),
                }
                for row in rows
            ]
        )
        return
    if not rows:
        console.print("no runners; `cairn work` starts one")
        return
    now = datetime.now(UTC)
    for row in rows:
        state = "lost" if row.lost else "alive"
        held = ", ".join(map(str, row.jobs)) or "none"
        if row.lost and row.jobs:
            held += " (claimable)"
        seen = max(0.0, (now - row.heartbeat_at).total_seconds())
        started = f"{row.started_at:%Y-%m-%d %H:%M:%S}"
        console.print(
            f"{row.host:<24} pid {row.pid:<7} {state:<5}  started {started}"
            f"  heartbeat {seen:.0f} s ago  x{row.concurrency}  jobs: {held}",
            markup=False,
            highlight=False,
        )
