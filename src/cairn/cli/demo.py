"""The `cairn demo` command."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

import typer

from cairn.cli.context import console
from cairn.errors import UsageError


def demo(
    keep: bool = typer.Option(False, "--keep", help="Keep the temporary folder afterwards."),
    agent: str = typer.Option(
        "script",
        "--agent",
        help="script (default), or openai: the openai adapter against a scripted OpenAI "
        "server on 127.0.0.1, or a real endpoint when OPENAI_BASE_URL is set.",
    ),
    model: str | None = typer.Option(
        None, "--model", help="With --agent openai: the model (default: OPENAI_MODEL)."
    ),
) -> None:
    """Run a job through a dependency gate, review and delivery on a sample repository."""
    from cairn.cli.next_steps import diagnosis
    from cairn.cli.progress import StagePrinter
    from cairn.demo import REQUEST, demo_script, run_demo
    from cairn.demo_agents import DEMO_AGENTS, DEMO_KEY, DEMO_KEY_ENV, openai_agent

    if agent not in DEMO_AGENTS:
        raise UsageError(f"cairn demo --agent is one of {', '.join(DEMO_AGENTS)}")
    if model is not None and agent != "openai":
        raise UsageError("--model goes with --agent openai")
    # The demo's agent and verify command call `python`; make that the interpreter running cairn.
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    if agent == "openai":
        # The scripted server takes any key; its own variable keeps a real OPENAI_API_KEY from
        # ever being sent to it.
        os.environ.setdefault(DEMO_KEY_ENV, DEMO_KEY)
    folder = tempfile.mkdtemp(prefix="cairn-demo-")
    try:
        with (
            openai_agent(REQUEST, demo_script(), os.environ, model)
            if agent == "openai"
            else contextlib.nullcontext()
        ) as chosen:
            run_demo(Path(folder), console.print, diagnosis, StagePrinter(), agent=chosen)
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
    console.print("Demo finished: the job went from request to merged change.", style="green")
