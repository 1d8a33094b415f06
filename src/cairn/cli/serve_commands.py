"""`cairn serve`: the HTTP API under Uvicorn (FastAPI is imported only when it runs)."""

from __future__ import annotations

import os

import typer

from cairn.cli.context import console, session

STOP_SECONDS = 30.0
"""How long a stopping server waits for its runners to hand their jobs back at a stage end."""


def serve(
    ctx: typer.Context,
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8765, "--port", min=1, max=65535, help="Port to listen on."),
    workers: int = typer.Option(
        0,
        "--workers",
        min=0,
        max=64,
        help="Also run this many runners in the server's process (as `cairn work` would), so "
        "one command serves a small team.",
    ),
) -> None:
    """Serve the HTTP API; every route but /api/health needs a user's token (`cairn user add`)."""
    import uvicorn

    from cairn.api import create_app
    from cairn.jobs.concurrency import RunnerProcess, connections_needed
    from cairn.jobs.runner import sigterm_interrupts
    from cairn.store import Store
    from cairn.web import ForgeApp

    s = session(ctx)
    # The API's requests share the pool with the runners' drives and lease renewals.
    store = Store.open(s.config.store_url, connections=connections_needed(workers) + 10)
    runners = RunnerProcess(store, s.config, concurrency=workers) if workers else None
    try:
        # The web pages' repository onboarding authorizes through this OAuth app, when one is set.
        app = create_app(s.config, store=store, forge_app=ForgeApp.from_environ(os.environ))
        if runners is not None:
            runners.start()
        also = f" and {workers} runner{'s' * (workers != 1)}" if workers else ""
        console.print(f"cairn API on http://{host}:{port}/api{also} (Ctrl-C stops)")
        # Uvicorn's access log would print request lines; tokens travel in headers, never in
        # them. It stops on SIGINT and SIGTERM alike, then raises the signal again: as
        # KeyboardInterrupt (SIGTERM too, within sigterm_interrupts), so the runners stop below.
        with sigterm_interrupts():
            uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
    except KeyboardInterrupt:
        pass  # the way a server is stopped: not an error
    finally:
        if runners is not None:
            console.print("stopping the runners; jobs in flight are handed back")
            runners.stop(STOP_SECONDS)
        store.close()
