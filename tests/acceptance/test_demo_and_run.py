"""`cairn demo` (what `make demo` runs) and `cairn run` in the foreground."""

from __future__ import annotations

import pytest

from .conftest import Cli
from .paths import path_without

pytestmark = pytest.mark.acceptance

STAGES_TO_REVIEW = [
    "preparing_baseline",
    "preparing_workspace",
    "preparing_dependencies",
    "running_agent",
    "verifying",
    "summarizing",
    "awaiting_review",
]


def test_demo_delivers_its_job_and_leaves_nothing_behind(fresh_cli: Cli) -> None:
    scratch = fresh_cli.tmp / "scratch"
    scratch.mkdir()
    done = fresh_cli("demo", env={"TMPDIR": str(scratch)})
    out = done.stdout
    assert "awaiting_dependency_approval" in out and "termcolor==2.4.0" in out
    assert "Delivered." in out
    assert "effect push: done" in out and "effect merge: done" in out
    assert "Decision chain: 3 decisions, intact." in out
    assert out.rstrip().endswith("the job went from request to merged change.")
    assert list(scratch.iterdir()) == [], "the demo removed its temporary folder"
    assert not fresh_cli.home.exists(), "the demo keeps out of the user's cairn home"


def test_demo_narrates_a_blocked_job_and_exits_non_zero(fresh_cli: Cli) -> None:
    scratch = fresh_cli.tmp / "scratch"
    scratch.mkdir()
    # A machine without bubblewrap: the job's commands cannot run sandboxed, so it blocks.
    path = path_without(fresh_cli.tmp / "bin", fresh_cli.env["PATH"], "bwrap")
    done = fresh_cli("demo", expect=1, env={"TMPDIR": str(scratch), "PATH": path})
    out = done.stdout
    where = "The demo expected job 1 at awaiting_review (waiting), but it is at running_agent"
    assert f"{where} (blocked)." in out, out
    diagnosis = next(line for line in out.splitlines() if line.startswith("  diagnosis: "))
    assert "bubblewrap is not installed" in diagnosis and "install bubblewrap" in diagnosis
    assert done.stderr.splitlines() == [
        "error: the demo stopped: job 1 is blocked at running_agent; fix what the diagnosis "
        "above says, then run `cairn demo` again (its home is thrown away, so there is no job "
        "to resume)"
    ]
    assert "Demo finished" not in out and "integration gate" not in out
    assert list(scratch.iterdir()) == [], "the demo removed its temporary folder"


def test_run_prints_each_stage_and_what_to_do_at_the_gate(cli: Cli) -> None:
    cli.room(verify="python -m pytest -q")
    script = cli.script(
        'steps:\n  - write: {path: src/two.py, content: "TWO = 2\\n"}\n'
        '  - finish: {summary: "Added src/two.py"}\n'
    )
    done = cli("run", "sample", "Add two.py", "--agent", f"script:{script}")
    lines = done.stdout.splitlines()
    assert lines[0] == "job 1 submitted"
    entered = [line.split()[3] for line in lines[1:-1]]
    assert entered == STAGES_TO_REVIEW, done.stdout
    assert lines[-2].endswith("awaiting_review (waiting)")
    assert "`cairn approve 1`" in lines[-1] and "`cairn reject 1 --reason ...`" in lines[-1]
    assert cli.show(1)["stage"] == "awaiting_review"
    assert cli.git("for-each-ref", "refs/heads/cairn") == "", "nothing delivered before review"

    asks = cli.script(
        "steps:\n  - request_dependency: "
        '{ecosystem: pypi, name: termcolor, version: "2.4.0", reason: "colour"}\n'
    )
    done = cli("run", "sample", "Pad things", "--agent", f"script:{asks}")
    assert done.stdout.splitlines()[-2].endswith("awaiting_dependency_approval (waiting)")
    assert "`cairn approve 2`" in done.stdout.splitlines()[-1]
