"""The `cairn demo` command."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import typer

from cairn.cli.context import console


def demo(
    keep: bool = typer.Option(False, "--keep", help="Keep the temporary folder afterwards."),
) -> None:
    """Run a scripted job through a dependency gate, review and delivery on a sample repository."""
    from cairn.cli.next_steps import diagnosis
    from cairn.cli.progress import StagePrinter
    from cairn.demo import run_demo

    # The demo's agent and verify command call `python`; make that the interpreter running cairn.
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    folder = tempfile.mkdtemp(prefix="cairn-demo-")
    try:
        run_demo(Path(folder), console.print, diagnosis, StagePrinter())
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
    console.print("Demo finished: the job went from request to merged change.", style="green")
