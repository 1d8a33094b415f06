"""Through the CLI: a block whose cause lies in the repository, fixed by a commit, resumed."""

from __future__ import annotations

import pytest

from cairn.testing.repos import SAMPLE_FILES

from .conftest import OWNER, Cli

pytestmark = pytest.mark.acceptance

ASKS = """
steps:
  - write: {path: a.txt, content: "a\\n"}
  - request_dependency: {ecosystem: pypi, name: termcolor, version: "2.4.0", reason: "colour"}
  - finish: {summary: "added a"}
"""


def test_resume_takes_a_fresh_baseline_once_the_owner_commits_the_missing_file(cli: Cli) -> None:
    cli.git("rm", "-q", "pyproject.toml")
    cli.git(*OWNER, "commit", "-qm", "no project file yet")
    cli.room()
    job = cli.submit(ASKS)
    worked = cli.work()
    blocked = cli.show(job)
    assert (blocked["stage"], blocked["status"]) == ("running_agent", "blocked")
    assert "has no pyproject.toml" in blocked["diagnosis"]
    assert "has no pyproject.toml" in worked.stdout
    assert "not waiting at a gate" in cli("approve", str(job), expect=1).stderr

    (cli.repo / "pyproject.toml").write_text(SAMPLE_FILES["pyproject.toml"])
    cli.git("add", "pyproject.toml")
    cli.git(*OWNER, "commit", "-qm", "add the project file")
    resumed = cli("resume", str(job)).stdout
    assert "takes a fresh baseline of the base branch" in resumed
    shown = cli("show", str(job)).stdout
    assert "decision  resume resumed by admin: " in shown and "fresh baseline of main" in shown
    assert "diagnosis" not in shown, "the block's diagnosis went with the block"

    cli.work()
    asked = cli.show(job)
    assert (asked["stage"], asked["status"]) == ("awaiting_dependency_approval", "waiting")
    assert asked["baseline"] == cli.git("rev-parse", "main")
    assert asked["diagnosis"] is None
