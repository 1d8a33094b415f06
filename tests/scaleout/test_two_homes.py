"""Two runner hosts (two homes) sharing one PostgreSQL store: a job moves between them whole.

Each host is a real `cairn work` process with a home of its own; crash points (`CAIRN_FAULTS`)
make host A die where a SIGKILL would. Host B then finishes the job with the tree an
uninterrupted run gives, and every push and merge happens once.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from cairn.config import Config
from cairn.jobs.checkpoints import host_of
from cairn.jobs.runner import Runner
from cairn.stages import Status
from cairn.store import Store, checkpoints, stage_runs, workspace_hosts
from cairn.store import dependency_requests as dependency_ledger
from cairn.store.schema import checkpoints as checkpoint_table
from cairn.testing.harness import Cairn, make_cairn

from .hosts import Host, expected_tree

pytestmark = pytest.mark.postgres

SCRIPT = """
steps:
  - write: {path: out.txt, content: "one\\n"}
  - append: {path: out.txt, content: "two\\n"}
  - write: {path: notes/more.txt, content: "more\\n"}
  - finish: {summary: wrote out.txt and notes/more.txt}
"""
RESULT = {"out.txt": "one\ntwo\n", "notes/more.txt": "more\n"}


@pytest.fixture
def pg_store(postgres_url: str) -> Iterator[Store]:
    opened = Store.open(postgres_url, create=True)
    yield opened
    opened.close()


@pytest.fixture
def cairn(pg_store: Store, tmp_path: Path, package_downloads: Path) -> Cairn:
    return make_cairn(pg_store, tmp_path, package_downloads=package_downloads)


def _hosts(cairn: Cairn, tmp: Path) -> tuple[Host, Host]:
    url = cairn.store.engine.url.render_as_string(hide_password=False)
    return Host(tmp / "host-a", url), Host(tmp / "host-b", url)


def _assert_delivered_once(cairn: Cairn, job_id: int, commits_before: int) -> None:
    done = cairn.detail(job_id)
    assert done["status"] == "completed", done["diagnosis"]
    assert [(e["kind"], e["status"]) for e in done["effects"]] == [
        ("push", "done"),
        ("merge", "done"),
    ]
    job = cairn.job(job_id)
    assert job.baseline is not None
    assert job.result_fingerprint == expected_tree(cairn.repo, job.baseline, RESULT)
    assert cairn.git("show", "main:out.txt") == "one\ntwo"
    assert cairn.git("show", "main:notes/more.txt") == "more"
    # The job's one commit, fast-forwarded onto main once: nothing delivered twice.
    assert int(cairn.git("rev-list", "--count", "main")) == commits_before + 1
    assert len(cairn.git("reflog", "show", "main").splitlines()) == commits_before + 1
    branch = cairn.branch(job_id)
    assert cairn.git("rev-list", "--count", f"main..{branch}") == "0"


def test_an_approval_given_on_host_a_is_delivered_by_host_b(cairn: Cairn, tmp_path: Path) -> None:
    """The issue's bug: B used to end the job 'a second unchanged result; nothing delivered'."""
    a, b = _hosts(cairn, tmp_path)
    job = cairn.submit(SCRIPT)
    before = int(cairn.git("rev-list", "--count", "main"))
    a.work()
    assert cairn.job(job.id).stage.value == "awaiting_review"
    job_baseline = cairn.job(job.id).baseline
    cairn.approve(job.id)

    b.work()

    _assert_delivered_once(cairn, job.id, before)
    detail = cairn.detail(job.id)
    agent_runs = [s["status"] for s in detail["stages"] if s["name"] == "running_agent"]
    assert agent_runs == ["accepted"], "host B reused the agent's result; it did not redo it"
    with cairn.store.begin() as conn:
        saved = checkpoints.for_job(conn, job.id)
        holder = workspace_hosts.holder(conn, job.id)
    assert holder == host_of(Config(home=b.home)), "host B holds the workspace now"
    assert [(c.stage, c.host) for c in saved] == [
        ("running_agent", host_of(Config(home=a.home))),
        ("summarizing", host_of(Config(home=a.home))),
    ]
    # Each holds what its stage accepted: the agent's result (uncommitted, so on a commit of
    # its own on top of the baseline), then the summary's commit of that same tree.
    with cairn.store.begin() as conn:
        runs = {r.stage: r for r in stage_runs.for_job(conn, job.id) if r.status == "accepted"}
    agent, summary = saved
    result = cairn.job(job.id).result_fingerprint
    assert agent.tree == runs["running_agent"].content_id == result
    assert agent.head == job_baseline and agent.commit != agent.head
    assert summary.head == summary.commit == runs["summarizing"].content_id
    assert summary.tree == result == cairn.git("rev-parse", f"{summary.commit}^{{tree}}")
    assert (b.home / "workspaces").is_dir(), "host B rebuilt the workspace in its own home"
    # The ref that held the checkpoint's commit while B rebuilt from it is gone again.
    mirror = Config(home=b.home).mirror_path(cairn.store.installation_id, job.room_id)
    refs = subprocess.run(["git", "for-each-ref", "refs/cairn/"], cwd=mirror, capture_output=True)
    assert refs.returncode == 0 and refs.stdout == b""


@pytest.mark.parametrize(
    "point",
    [
        "crash:after_accept:running_agent",
        "crash:before_accept:verifying",
        "crash:after_start:summarizing",
        "crash:after_intent:push",
    ],
)
def test_host_a_dies_at_a_named_point_and_host_b_finishes(
    cairn: Cairn, tmp_path: Path, point: str
) -> None:
    a, b = _hosts(cairn, tmp_path)
    job = cairn.submit(SCRIPT)
    before = int(cairn.git("rev-list", "--count", "main"))
    crashed = a.work(point).returncode
    if cairn.job(job.id).status is Status.waiting:
        cairn.approve(job.id)
        crashed = a.work(point).returncode
    assert crashed == 137, f"{point} never fired"
    while not cairn.job(job.id).status.is_terminal:
        if cairn.job(job.id).status is Status.waiting:
            cairn.approve(job.id)
        assert b.work().returncode == 0
    _assert_delivered_once(cairn, job.id, before)


PAUSING = """
steps:
  - append: {path: a.txt, content: "written before the pause\\n"}
  - request_dependency:
      ecosystem: pypi
      name: termcolor
      version: "2.4.0"
      reason: "colour output"
  - append: {path: a.txt, content: "written after the decision\\n"}
  - finish: {summary: "wrote a.txt"}
"""


def test_a_turn_paused_at_the_dependency_gate_goes_on_from_there_on_another_host(
    cairn: Cairn, tmp_path: Path
) -> None:
    job = cairn.submit(PAUSING)
    cairn.work()  # host A: the harness's own home
    assert cairn.job(job.id).stage.value == "awaiting_dependency_approval"
    with cairn.store.begin() as conn:
        (paused,) = checkpoints.for_job(conn, job.id)
    assert paused.stage == "running_agent" and paused.context_state is not None
    cairn.reject(job.id, "not this one")

    host_b = cairn.config.model_copy(update={"home": tmp_path / "host-b"})
    Runner(cairn.store, host_b).work(until_idle=True)

    assert cairn.job(job.id).stage.value == "awaiting_review", cairn.job(job.id).diagnosis
    rebuilt = host_b.workspace_path(cairn.store.installation_id, job.id)
    # The context went on from the pause and the workspace from its checkpoint: each line once.
    assert (rebuilt / "a.txt").read_text() == (
        "written before the pause\nwritten after the decision\n"
    )
    with cairn.store.begin() as conn:
        asked = [(d.name, d.status.value) for d in dependency_ledger.for_job(conn, job.id)]
    assert asked == [("termcolor", "rejected")], "the agent did not ask a second time"


def test_a_checkpoint_a_crash_missed_is_taken_when_its_stage_is_reused(
    cairn: Cairn, tmp_path: Path
) -> None:
    """Host A dies between accepting the summary and checkpointing it, resumes, is lost at
    review: host B still delivers the approved commit, without summarizing again."""
    a, b = _hosts(cairn, tmp_path)
    job = cairn.submit(SCRIPT)
    before = int(cairn.git("rev-list", "--count", "main"))
    assert a.work("crash:after_accept:summarizing").returncode == 137
    with cairn.store.begin() as conn:
        assert [c.stage for c in checkpoints.for_job(conn, job.id)] == ["running_agent"]
    a.work()
    assert cairn.job(job.id).stage.value == "awaiting_review"
    with cairn.store.begin() as conn:
        assert [c.stage for c in checkpoints.for_job(conn, job.id)] == [
            "running_agent",
            "summarizing",
        ]
    cairn.approve(job.id)

    b.work()

    _assert_delivered_once(cairn, job.id, before)
    summaries = [s for s in cairn.detail(job.id)["stages"] if s["name"] == "summarizing"]
    assert [s["status"] for s in summaries] == ["accepted"], "the approved summary stood"


def test_a_checkpoint_that_does_not_rebuild_its_tree_is_refused_loudly(
    cairn: Cairn, tmp_path: Path
) -> None:
    job = cairn.submit(SCRIPT)
    cairn.work()  # host A, to review
    cairn.approve(job.id)
    with cairn.store.begin() as conn:
        latest = checkpoints.latest(conn, job.id)
        assert latest is not None
        # The summary's commit holds another tree than the one the checkpoint names.
        conn.execute(
            sa.update(checkpoint_table)
            .where(checkpoint_table.c.id == latest.id)
            .values(tree=cairn.git("rev-parse", "main^{tree}"))
        )
    host_b = cairn.config.model_copy(update={"home": tmp_path / "host-b"})
    Runner(cairn.store, host_b).work(until_idle=True)

    refused = cairn.detail(job.id)
    assert (refused["status"], refused["stage"]) == ("blocked", "awaiting_review")
    assert "checkpoint does not hold the tree it names" in refused["diagnosis"]
    assert refused["effects"] == [], "nothing was pushed from a workspace that might differ"
    assert str(tmp_path) not in refused["diagnosis"]
