"""Per-stage overhead of durable stage execution: cairn.engine against DBOS Transact.

Two scenarios, each on SQLite and on PostgreSQL, cairn and DBOS side by side in one run:

1. a workflow of N no-op stages, run from scratch;
2. the same workflow killed (SIGKILL) right after stage K was checkpointed, then resumed
   by a new process that reuses K stages and runs the rest.

Every measurement runs in its own child process (overhead_roles.py holds what each one
does) against a database made for it alone and removed afterwards. Only the work is timed;
interpreter start-up and imports are measured separately and reported beside it.

    .venv/bin/pip install -r benchmarks/requirements.txt
    .venv/bin/python benchmarks/engine_overhead.py --stages 1000 --kill-at 500
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

from overhead_roles import RESULT_PREFIX, noop_workflow

POSTGRES_SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432"
ROLES_SCRIPT = Path(__file__).with_name("overhead_roles.py")
CHILD_TIMEOUT_S = 300


# --- fresh databases, child processes -------------------------------------------------------


class ChildFailed(Exception):
    """A measurement's child process did not do what it was asked."""


class Databases:
    """A fresh database per measurement; every one is removed when it has been measured."""

    def __init__(self, postgres_server: str) -> None:
        self.postgres_server = postgres_server
        self.folder = Path(tempfile.mkdtemp(prefix="cairn-engine-overhead-"))
        self._admin: Any = None

    @property
    def admin(self) -> Any:
        import sqlalchemy as sa

        if self._admin is None:
            self._admin = sa.create_engine(
                f"{self.postgres_server}/postgres",
                isolation_level="AUTOCOMMIT",
                connect_args={"connect_timeout": 3},
            )
        return self._admin

    def postgres_version(self) -> str | None:
        """The server's version and commit durability, or None when it cannot be reached."""
        import sqlalchemy as sa

        try:
            with self.admin.connect() as conn:
                version = conn.execute(sa.text("SHOW server_version")).scalar_one()
                durability = conn.execute(sa.text("SHOW synchronous_commit")).scalar_one()
        except sa.exc.OperationalError:
            return None
        return f"PostgreSQL {version} (synchronous_commit={durability})"

    @contextmanager
    def fresh(self, backend: str, system: str) -> Iterator[str]:
        """The URL of an empty database of `backend` (cairn and DBOS both take it as it is)."""
        name = f"bench_{system}_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        if backend == "sqlite":
            path = self.folder / f"{name}.sqlite"
            try:
                yield f"sqlite:///{path}"
            finally:
                for leftover in self.folder.glob(f"{name}.sqlite*"):
                    leftover.unlink()
            return
        import sqlalchemy as sa

        with self.admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        try:
            yield f"{self.postgres_server}/{name}"
        finally:
            with self.admin.connect() as conn:
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
        if self._admin is not None:
            self._admin.dispose()


def run_child(role: str, url: str, stages: int, kill_at: int = 0) -> dict[str, Any]:
    """Run one measurement in a new interpreter; a --kill-at child must die by SIGKILL."""
    spawned = time.time()
    command = [sys.executable, str(ROLES_SCRIPT), role, url, str(stages), str(kill_at)]
    command.append(repr(spawned))
    done = subprocess.run(command, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    if kill_at:
        if done.returncode != -signal.SIGKILL:
            raise ChildFailed(f"{role} should have been killed at {kill_at}: {tail(done)}")
        return {}
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if done.returncode != 0 or not lines:
        raise ChildFailed(f"{role} failed (exit {done.returncode}): {tail(done)}")
    return dict(json.loads(lines[-1].removeprefix(RESULT_PREFIX)))


def tail(done: subprocess.CompletedProcess[str]) -> str:
    text = (done.stderr or done.stdout).strip().splitlines()
    return " | ".join(text[-3:]) or "no output"


def measure(db: Databases, backend: str, system: str, args: argparse.Namespace) -> dict[str, Any]:
    """One system on one backend: N stages from scratch, then kill at K and resume."""
    figures: dict[str, Any] = {}
    try:
        with db.fresh(backend, system) as url:
            figures["fresh"] = run_child(f"{system}-run", url, args.stages)
        with db.fresh(backend, system) as url:
            run_child(f"{system}-run", url, args.stages, kill_at=args.kill_at)
            figures["resume"] = run_child(f"{system}-resume", url, args.stages)
        if system == "cairn":
            with db.fresh(backend, system) as url:
                figures["intent_first"] = run_child("cairn-intent-run", url, args.stages)
    except (ChildFailed, subprocess.TimeoutExpired) as failed:
        figures["error"] = str(failed)
    return figures


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the repeats (counts too: they must not differ)."""
    if any("error" in run for run in runs):
        return {"error": next(run["error"] for run in runs if "error" in run)}
    merged: dict[str, Any] = {}
    for scenario in runs[0]:
        keys = runs[0][scenario].keys()
        merged[scenario] = {k: statistics.median(r[scenario][k] for r in runs) for k in keys}
    return merged


def engine_alone(stages: int) -> tuple[float, float]:
    """cairn's engine with no database (MemoryLedger), and its recipe identities alone."""
    from cairn.engine import Engine, MemoryLedger, Upstream, recipe_id
    from cairn.engine.identity import UpstreamContents

    workflow = noop_workflow(stages)
    started = time.perf_counter()
    Engine.starting(MemoryLedger()).drive(workflow, None)
    drive_s = time.perf_counter() - started
    started, upstream = time.perf_counter(), UpstreamContents()
    for stage in workflow.stages:
        recipe_id(stage.name, {}, upstream=upstream, settings={}, tools={})
        upstream.add(stage.name, stage.run(None, Upstream(stage.name, {})).content_id)
    return drive_s, time.perf_counter() - started


# --- the report ----------------------------------------------------------------------------


def ms_per_stage(seconds: float, stages: int) -> str:
    return f"{1000 * seconds / stages:.3f}"


def table(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> list[str]:
    """One row per backend and scenario: seconds, ms per stage, cairn / DBOS."""
    head = ("backend", "scenario", "cairn s", "DBOS s", "cairn ms/st", "DBOS ms/st", "cairn/DBOS")
    rows = [head]
    scenarios = {
        "fresh": f"{args.stages} no-op stages",
        "resume": f"resume after kill at {args.kill_at}",
    }
    for backend, systems in results.items():
        for scenario, label in scenarios.items():
            cairn = systems["cairn"].get(scenario, {}).get("work_s")
            dbos = systems["dbos"].get(scenario, {}).get("work_s")
            rows.append(
                (
                    backend,
                    label,
                    f"{cairn:.3f}" if cairn is not None else "n/a",
                    f"{dbos:.3f}" if dbos is not None else "n/a",
                    ms_per_stage(cairn, args.stages) if cairn is not None else "n/a",
                    ms_per_stage(dbos, args.stages) if dbos is not None else "n/a",
                    f"{cairn / dbos:.2f}" if cairn is not None and dbos is not None else "n/a",
                )
            )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return [
        "  ".join(
            cell.ljust(w) if i < 2 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]


def legend(args: argparse.Namespace) -> list[str]:
    k, rest = args.kill_at, args.stages - args.kill_at
    return [
        f"ms/st = seconds / {args.stages}, for resume too ({k} stages reused + {rest} run).",
        "Timed, from scratch: cairn Engine.starting(StoreLedger).drive(); DBOS the workflow call.",
        "cairn's no-op stages are declared effect-free: each is one fenced write, recipe and",
        "acceptance together, as each DBOS step is one write of its output.",
        "Timed, resume (a new process, after the SIGKILL): cairn Store.open + claim + snapshot +",
        "drive; DBOS DBOS() + launch() + the recovered workflow's body (replay + run).",
    ]


def details(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> list[str]:
    """Where each resume's time went, what it reused, and what start-up cost (not counted)."""
    lines = []
    for backend, systems in results.items():
        for system, figures in systems.items():
            name = {"cairn": "cairn", "dbos": "DBOS"}[system]
            if "error" in figures:
                lines.append(f"{name} could not run on {backend}: {figures['error']}")
                continue
            fresh, resume = figures["fresh"], figures["resume"]
            if system == "cairn":
                lines.append(
                    f"{backend} cairn resume: open store + claim {resume['open_s']:.3f} s, "
                    f"snapshot + drive {resume['body_s']:.3f} s; "
                    f"reused {resume['reused']:.0f}, ran {resume['ran']:.0f}"
                )
                reuse_ms = 1000 * resume["reuse_s"] / max(resume["reused"], 1)
                lines.append(
                    f"{backend} cairn reuse: snapshot + {resume['reused']:.0f} reuse decisions + "
                    f"their one mark {resume['reuse_s']:.3f} s, {reuse_ms:.3f} ms per reused stage"
                )
                intent = figures["intent_first"]["work_s"]
                lines.append(
                    f"{backend} cairn from scratch, stages not effect-free (recipe first, then "
                    f"acceptance): {intent:.3f} s, {ms_per_stage(intent, args.stages)} ms/stage"
                )
            else:
                lines.append(
                    f"{backend} DBOS resume: DBOS() + launch {resume['open_s']:.3f} s, "
                    f"replay + run {resume['body_s']:.3f} s; replayed {resume['reused']:.0f}, "
                    f"ran {resume['ran']:.0f}; not counted: recovery dispatch wait "
                    f"{resume['dispatch_s']:.3f} s (launch to recorded result "
                    f"{resume['wall_s']:.3f} s)"
                )
            lines.append(
                f"{backend} {name} start-up, not counted (fresh / resume process): interpreter "
                f"{fresh['startup_s']:.3f} / {resume['startup_s']:.3f} s, imports "
                f"{fresh['import_s']:.3f} / {resume['import_s']:.3f} s"
            )
    return lines


def header(args: argparse.Namespace, postgres: str | None) -> list[str]:
    import sqlite3

    return [
        f"engine overhead: cairn {metadata.version('cairn')} vs DBOS Transact "
        f"{metadata.version('dbos')}; {args.stages} stages, kill at {args.kill_at}, "
        f"median of {args.repeat} run(s); Python {sys.version.split()[0]}, "
        f"{os.cpu_count()} cores",
        f"SQLite {sqlite3.sqlite_version} (temporary files); "
        f"{postgres or 'PostgreSQL unreachable'}",
    ]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Per-stage overhead of durable stages: cairn.engine vs DBOS Transact."
    )
    parser.add_argument("--stages", type=int, default=1000, help="stages per workflow")
    parser.add_argument("--kill-at", type=int, default=500, help="kill after this stage")
    parser.add_argument("--backends", default="sqlite,postgres", help="sqlite,postgres")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (medians)")
    parser.add_argument("--postgres-server", default=POSTGRES_SERVER, help="trust auth")
    args = parser.parse_args(argv)
    args.backends = [name.strip() for name in args.backends.split(",") if name.strip()]
    if not 0 < args.kill_at < args.stages:
        parser.error("--kill-at must lie between 1 and --stages - 1")
    if not args.backends or set(args.backends) - {"sqlite", "postgres"}:
        parser.error("--backends takes sqlite, postgres or both, comma-separated")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def stop_on_sigterm(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds through the finally blocks that drop databases


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    db = Databases(args.postgres_server)
    began = time.perf_counter()
    try:
        postgres = db.postgres_version()
        backends = [b for b in args.backends if b == "sqlite" or postgres is not None]
        runs: dict[str, dict[str, list[dict[str, Any]]]] = {
            backend: {"cairn": [], "dbos": []} for backend in backends
        }
        for repeat in range(args.repeat):
            for backend in backends:
                # Alternate who goes first, so neither always runs on a warmer machine.
                for system in ("cairn", "dbos")[:: 1 if repeat % 2 == 0 else -1]:
                    print(
                        f"measuring {system} on {backend} ({repeat + 1}/{args.repeat})",
                        file=sys.stderr,
                    )
                    runs[backend][system].append(measure(db, backend, system, args))
        alone_s, recipes_s = engine_alone(args.stages)
    finally:
        db.close()
    results = {b: {s: median_of(r) for s, r in systems.items()} for b, systems in runs.items()}
    lines = header(args, postgres)
    if "postgres" in args.backends and postgres is None:
        lines.append(f"PostgreSQL at {args.postgres_server} is unreachable: measured SQLite only")
    lines += ["", *table(results, args), *legend(args), "", *details(results, args)]
    lines.append(
        f"cairn engine without a database (MemoryLedger), {args.stages} stages: {alone_s:.3f} s, "
        f"of which recipe identities {recipes_s:.3f} s"
    )
    lines.append(f"total benchmark time {time.perf_counter() - began:.1f} s")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
