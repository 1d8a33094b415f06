"""`cairn cache`: list, verify and prune this host's dependency cache."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from cairn.cli.context import JSON_OPTION, Session, command_group, console, print_json, session
from cairn.cli.next_steps import with_next
from cairn.errors import UsageError
from cairn.next_action import Action, NextAction, from_data, to_data

if TYPE_CHECKING:
    from cairn.store.dependency_caches import CacheRecord

cache_app = command_group(
    "Inspect and tidy the dependency cache (read-only entries, one per fingerprint)."
)


def cache_root(s: Session) -> Path:
    """Where this home keeps its dependency cache entries."""
    return s.config.deps_dir


@cache_app.command("list")
def list_entries(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """List this host's entries: fingerprint, ecosystem, status, packages and size."""
    from cairn.deps.cache import DependencyCache

    s = session(ctx)
    with s.store() as store:
        rows = [entry_row(r) for r in DependencyCache(store, cache_root(s)).entries()]
    if as_json:
        print_json(rows)
        return
    if not rows:
        console.print("the dependency cache is empty")
    for row in rows:
        console.print(_line(row))


@cache_app.command("verify")
def verify(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """Recompute every ready entry's content identity; quarantine those that changed."""
    from cairn.deps.cache import DependencyCache
    from cairn.store.dependency_caches import CacheStatus

    s = session(ctx)
    with s.store() as store:
        cache = DependencyCache(store, cache_root(s))
        before = {r.id: r.status for r in cache.entries()}
        after = cache.verify_all()
    changed = [
        r
        for r in after
        if before.get(r.id) is CacheStatus.ready and r.status is CacheStatus.quarantined
    ]
    if as_json:
        print_json([entry_row(r) | {"changed": r in changed} for r in after])
    else:
        ready = sum(1 for r in after if r.status is CacheStatus.ready)
        console.print(f"{ready} ready entries match their recorded content")
        for record in changed:
            why = with_next(record.diagnosis or "", _next(record))
            console.print(f"quarantined {record.fingerprint[:12]}: {why}")
    if changed:
        raise typer.Exit(1)


@cache_app.command("prune")
def prune(
    ctx: typer.Context,
    everything: bool = typer.Option(
        False, "--all", help="Also remove ready entries (the next job prepares them again)."
    ),
    unused_days: int | None = typer.Option(
        None,
        "--unused-days",
        max=36_500,  # a bound keeps `now - days` a date: no cache is a century old
        help="Also remove ready entries unused for this many days.",
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Remove failed, quarantined and abandoned entries (entries in use are kept)."""
    from cairn.deps.cache import DependencyCache

    if unused_days is not None and unused_days < 0:
        raise UsageError("--unused-days must be zero or more, for example --unused-days 30")
    unused = timedelta(days=unused_days) if unused_days is not None else None
    s = session(ctx)
    with s.store() as store:
        removed = DependencyCache(store, cache_root(s)).prune(
            everything=everything, unused_for=unused
        )
    if as_json:
        print_json([entry_row(r) for r in removed])
        return
    freed = sum(r.size_bytes or 0 for r in removed)
    console.print(f"removed {len(removed)} entries, {_size(freed)} freed")


def entry_row(record: CacheRecord) -> dict[str, Any]:
    """One entry as `cache list --json` prints it."""
    return {
        "fingerprint": record.fingerprint,
        "ecosystem": record.ecosystem,
        "status": record.status.value,
        "package_count": record.package_count,
        "size_bytes": record.size_bytes,
        "diagnosis": record.diagnosis,
        "next": to_data(_next(record)),
        "created_at": record.created_at.isoformat(),
        "last_used_at": record.updated_at.isoformat(),
    }


def _next(record: CacheRecord) -> tuple[NextAction, ...]:
    """What to do about an entry: a quarantined one is never used again, only pruned."""
    from cairn.store.dependency_caches import CacheStatus

    quarantined = record.status is CacheStatus.quarantined
    return (NextAction(Action.prune_cache),) if quarantined else ()


def _line(row: dict[str, Any]) -> str:
    count = row["package_count"] if row["package_count"] is not None else "-"
    text = (
        f"{row['fingerprint'][:12]}  {row['ecosystem']:<5} {row['status']:<11} "
        f"{count:>5} packages  {_size(row['size_bytes'] or 0):>9}"
    )
    if not row["diagnosis"]:
        return text
    return f"{text}  {with_next(row['diagnosis'], from_data(row['next']))}"


def _size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"
