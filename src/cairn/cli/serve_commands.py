"""`cairn serve`: the HTTP API under Uvicorn (FastAPI is imported only when it runs)."""

from __future__ import annotations

import os

import typer

from cairn.cli.context import console, session


def serve(
    ctx: typer.Context,
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8765, "--port", min=1, max=65535, help="Port to listen on."),
) -> None:
    """Serve the HTTP API; every route but /api/health needs a user's token (`cairn user add`)."""
    import uvicorn

    from cairn.api import create_app
    from cairn.web import ForgeApp

    s = session(ctx)
    # The web pages' repository onboarding authorizes through this OAuth app, when one is set.
    app = create_app(s.config, forge_app=ForgeApp.from_environ(os.environ))
    console.print(f"cairn API on http://{host}:{port}/api (Ctrl-C stops)")
    # Uvicorn's access log would print request lines; tokens travel in headers, never in them.
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
