"""Stops that are not the job's fault: a dirty checkout, a gate in the middle, a killed runner."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from subprocess import Popen

import pytest

from .conftest import OWNER, Cli, wait_for

pytestmark = pytest.mark.acceptance

WRITE_B = """
steps:
  - write: {path: b.txt, content: "from job 2\\n"}
  - finish: {summary: "Added b.txt"}
"""


def test_a_dirty_baseline_blocks_the_job_and_nothing_is_cleaned(cli: Cli) -> None:
    cli.room()
    readme = cli.repo / "README.md"
    edited = readme.read_bytes() + b"\nwork in progress, not committed\n"
    readme.write_bytes(edited)
    notes = cli.repo / "notes" / "todo.txt"
    notes.parent.mkdir()
    notes.write_bytes(b"untracked notes\n")
    index = (cli.repo / ".git" / "index").read_bytes()
    head = cli.git("rev-parse", "HEAD")

    job = cli.submit(WRITE_B)
    cli.work()

    blocked = cli.show(job)
    assert (blocked["status"], blocked["stage"]) == ("blocked", "preparing_baseline")
    diagnosis = blocked["diagnosis"]
    assert "README.md" in diagnosis and "notes/todo.txt" in diagnosis
    assert "commit or stash" in diagnosis.lower() and "cairn resume" in diagnosis
    assert blocked["baseline"] is None and blocked["effects"] == []
    assert not cli.workspace(job).exists(), "no workspace was made from a dirty baseline"
    # Nothing of the person's was touched: files, index, stash, HEAD.
    assert readme.read_bytes() == edited and notes.read_bytes() == b"untracked notes\n"
    assert (cli.repo / ".git" / "index").read_bytes() == index
    assert cli.git("stash", "list") == ""
    assert cli.git("rev-parse", "HEAD") == head

    cli.git("add", "--all")
    cli.git(*OWNER, "commit", "--quiet", "-m", "Finish the work in progress")
    owner_tip = cli.git("rev-parse", "main")
    cli("resume", str(job))
    cli.work()

    resumed = cli.show(job)
    assert (resumed["status"], resumed["stage"]) == ("waiting", "awaiting_review")
    assert resumed["baseline"] == owner_tip
    assert [(d["gate"], d["verdict"]) for d in resumed["decisions"]] == [
        ("run", "auto"),
        ("resume", "resumed"),
    ]
    baselines = [s["status"] for s in resumed["stages"] if s["name"] == "preparing_baseline"]
    assert baselines == ["failed", "accepted"]


PAUSING_JOB = """
steps:
  - append: {path: a.txt, content: "written before the pause\\n"}
  - request_dependency:
      ecosystem: pypi
      name: termcolor
      version: "2.4.0"
      reason: "colour output"
  - append: {path: a.txt, content: "written after the approval\\n"}
  - write: {path: a2.txt, content: "second file of job 1\\n"}
  - finish: {summary: "Job 1 wrote a.txt and a2.txt."}
"""


def test_a_job_paused_at_the_dependency_gate_resumes_its_own_context(cli: Cli) -> None:
    """Job 1 waits for a person while job 2 runs and is delivered; job 1 then goes on alone."""
    cli.room()
    one = cli.submit(PAUSING_JOB, "Job 1: needs termcolor")
    two = cli.submit(WRITE_B, "Job 2: add b.txt")
    cli.work()

    paused = cli.show(one)
    assert (paused["status"], paused["stage"]) == ("waiting", "awaiting_dependency_approval")
    assert [
        (d["ecosystem"], d["name"], d["version"], d["status"])
        for d in paused["dependency_requests"]
    ] == [("pypi", "termcolor", "2.4.0", "pending")]
    assert paused["review"] is None and paused["result_fingerprint"] is None
    assert paused["feed"] == "Job 1: needs termcolor\n\n[awaiting_dependency_approval]"
    assert (cli.workspace(one) / "a.txt").read_text() == "written before the pause\n"
    assert cli.show(two)["stage"] == "awaiting_review", "job 2 did not wait behind job 1"

    cli("approve", str(two))
    cli.work()
    assert cli.show(two)["status"] == "completed"
    assert cli.git("show", "main:b.txt") == "from job 2"
    assert cli.show(one)["stage"] == "awaiting_dependency_approval", "job 1 still waits"

    cli("approve", str(one), "--reason", "exact pin reviewed")
    cli.work()
    reviewed = cli.show(one)
    assert (reviewed["status"], reviewed["stage"]) == ("waiting", "awaiting_review")
    assert reviewed["dependency_requests"][0]["status"] == "approved"
    agent_runs = [s["status"] for s in reviewed["stages"] if s["name"] == "running_agent"]
    assert agent_runs == ["paused", "accepted"], "one turn paused, the resumed turn accepted"
    assert reviewed["usage"]["agent_runs"] == 2
    summary = reviewed["review"]["summary"]
    assert "a.txt" in summary and "a2.txt" in summary and "b.txt" not in summary

    cli("approve", str(one))
    cli.work()
    done = cli.show(one)
    assert done["status"] == "completed" and done["diagnosis"] is None
    # Each step ran exactly once: the appends before and after the pause are not repeated.
    assert cli.git("show", "main:a.txt") == "written before the pause\nwritten after the approval"
    assert cli.git("show", "main:a2.txt") == "second file of job 1"
    assert cli.git("show", "main:b.txt") == "from job 2"
    assert (cli.repo / "a2.txt").exists() and (cli.repo / "b.txt").exists()
    branch_one, branch_two = cli.branch(one), cli.branch(two)
    job_one_files = cli.git("ls-tree", "-r", "--name-only", branch_one).split()
    assert {"a.txt", "a2.txt"} <= set(job_one_files) and "b.txt" not in job_one_files
    assert cli.git("show", f"{branch_two}:b.txt") == "from job 2"
    parents = cli.git("rev-list", "--parents", "-n", "1", "main").split()
    assert parents[1:] == [cli.git("rev-parse", branch_two), cli.git("rev-parse", branch_one)]


FIRST = "First appended line (before the runner was killed)."
SECOND = "Second appended line (after the runner was killed)."


def test_a_killed_runner_is_taken_over_without_repeating_any_edit_or_effect(
    cli: Cli, background: Callable[..., Popen[bytes]]
) -> None:
    cli.room()
    # Counts how often the command ran, in a git-ignored file: commands cannot write outside
    # the workspace, and an ignored file leaves the workspace's content identity unchanged.
    runs_name = ".pytest_cache/sleep-runs.log"
    script = f"""
steps:
  - write: {{path: a.txt, content: "a\\n"}}
  - append: {{path: README.md, content: "\\n{FIRST}\\n"}}
  - run: "mkdir -p .pytest_cache && echo started >> {runs_name} && sleep 3"
  - append: {{path: README.md, content: "\\n{SECOND}\\n"}}
  - finish: {{summary: "Added a.txt and two lines to the README."}}
"""
    reflog_before = cli.git("reflog", "show", "main").splitlines()
    job = cli.submit(script, "Two README lines")

    runner = background("work")
    wait_for(
        lambda: (
            (cli.workspace(job) / runs_name).exists()
            and FIRST in (cli.workspace(job) / "README.md").read_text()
        ),
        timeout=20,
        what="the agent to be inside its `run` step",
    )
    os.killpg(runner.pid, signal.SIGKILL)
    runner.wait(timeout=10)

    cli.work()  # waits out the dead runner's lease, then takes the job over
    reviewed = cli.show(job)
    assert reviewed["stage"] == "awaiting_review", reviewed["diagnosis"]
    agent_runs = [s["status"] for s in reviewed["stages"] if s["name"] == "running_agent"]
    assert agent_runs == ["abandoned", "accepted"]
    runs = (cli.workspace(job) / runs_name).read_text()
    assert runs == "started\nstarted\n", "the interrupted command ran again, once"
    cli("approve", str(job))
    cli.work()

    done = cli.show(job)
    assert (done["status"], done["stage"]) == ("completed", "completed")
    assert [(e["kind"], e["status"]) for e in done["effects"]] == [
        ("push", "done"),
        ("merge", "done"),
    ]
    on_main = cli.git("show", "main:README.md")
    assert on_main.count(FIRST) == 1 and on_main.count(SECOND) == 1
    assert on_main.index(FIRST) < on_main.index(SECOND)
    assert cli.git("show", "main:a.txt") == "a"
    assert len(cli.git("reflog", "show", "main").splitlines()) == len(reflog_before) + 1
    assert cli.git("rev-list", "--count", "main") == "2"


SLOW_JOB = """
steps:
  - write: {path: a.txt, content: "a\\n"}
  - run: >-
      mkdir -p .pytest_cache && if [ -e .pytest_cache/runs.log ];
      then echo again >> .pytest_cache/runs.log;
      else echo started >> .pytest_cache/runs.log && sleep 30; fi
  - finish: {summary: "Added a.txt."}
"""


def _inside_its_command(cli: Cli, job: int) -> Callable[[], bool]:
    return lambda: (cli.workspace(job) / ".pytest_cache" / "runs.log").exists()


@pytest.mark.parametrize(
    ("stop", "code"),
    [
        pytest.param(signal.SIGTERM, 143, id="sigterm"),
        pytest.param(signal.SIGINT, 130, id="sigint"),
    ],
)
def test_a_stopped_runner_hands_its_job_back_at_once(
    cli: Cli, background: Callable[..., Popen[bytes]], stop: signal.Signals, code: int
) -> None:
    # A lease far longer than the test: only a released lease lets the next runner in.
    cli.env["CAIRN_LEASE_SECONDS"] = "3600"
    cli.room()
    job = cli.submit(SLOW_JOB)
    runner = background("work")
    wait_for(
        _inside_its_command(cli, job), timeout=20, what="the agent to be inside its `run` step"
    )
    os.kill(runner.pid, stop)  # the runner alone, as a service manager or a terminal would
    assert runner.wait(timeout=20) == code

    handed_back = cli.show(job)
    assert handed_back["status"] == "queued", handed_back
    log = (cli.tmp / "background-0.log").read_text()
    assert "stopped; any job it held was handed back and resumes from its last stage" in log

    cli.work()  # claims the job now, not an hour from now
    assert cli.show(job)["stage"] == "awaiting_review"
    runs = (cli.workspace(job) / ".pytest_cache" / "runs.log").read_text()
    assert runs == "started\nagain\n", "the stopped command ran again, once"


def test_ctrl_c_in_run_prints_the_command_that_continues_the_job(
    cli: Cli, background: Callable[..., Popen[bytes]]
) -> None:
    cli.env["CAIRN_LEASE_SECONDS"] = "3600"
    cli.room()
    script = cli.script(SLOW_JOB)
    running = background("run", "sample", "Add a.txt", "--agent", f"script:{script}")
    wait_for(_inside_its_command(cli, 1), timeout=20, what="the agent to be inside its `run` step")
    os.kill(running.pid, signal.SIGINT)
    assert running.wait(timeout=20) == 130

    log = (cli.tmp / "background-0.log").read_text()
    assert log.splitlines()[-1] == (
        "stopped; job 1 is at running_agent: `cairn work --until-idle` continues it from there"
    )
    cli("work", "--until-idle")
    assert cli.show(1)["stage"] == "awaiting_review"


def test_an_idle_runner_says_once_that_it_waits(
    cli: Cli, background: Callable[..., Popen[bytes]]
) -> None:
    cli.room()
    log = cli.tmp / "background-0.log"
    waiting = "waiting for a job to run (Ctrl-C stops)"
    runner = background("work")
    wait_for(lambda: waiting in log.read_text(), timeout=20, what="the runner to say it waits")
    job = cli.submit(WRITE_B)  # the runner polls meanwhile, silently
    wait_for(
        lambda: log.read_text().count(waiting) == 2, timeout=30, what="the runner to wait again"
    )
    assert cli.show(job)["stage"] == "awaiting_review"
    os.kill(runner.pid, signal.SIGTERM)
    assert runner.wait(timeout=20) == 143
    assert log.read_text().count(waiting) == 2, "once before the job, once after it"
