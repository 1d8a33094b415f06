"""Host loss, for real: two runner hosts, each in a network namespace of its own, one store.

Host A and host B are `cairn work` processes with separate homes (mirrors, workspaces,
dependency caches), each in its own network namespace, reaching the one PostgreSQL store only
over their veth pair. Host A is SIGKILLed (a) in the middle of the agent stage, (b) after the
agent stage was accepted, (c) while waiting at `awaiting_review` with an approval already
given. Each time host B finishes the job with the tree an uninterrupted run gives, the room's
repository sees the job's branch pushed once and main moved once, and in (c) the approval given
before the loss is the one that counts.

Where namespaces cannot be made (not root, no iproute2) the test is skipped saying why, unless
CAIRN_REQUIRE_NETNS=1 (set in CI, which runs as root): then that is a failure.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from cairn.stages import Stage, Status
from cairn.store import Store
from cairn.store import checkpoints as checkpoint_ledger
from cairn.store.identity import get_group
from cairn.store.rooms import create_room, get_room
from cairn.testing.harness import Cairn, make_cairn

from .hosts import Host, expected_tree
from .netns import REQUIRE_NETNS, Forwarder, Namespace, namespace, unavailable

pytestmark = pytest.mark.postgres

RUNS = ".pytest_cache/runs.log"  # git-ignored in the sample repository: not in the content id
SCRIPT = f"""
steps:
  - write: {{path: out.txt, content: "one\\n"}}
  - append: {{path: out.txt, content: "two\\n"}}
  - run: "mkdir -p .pytest_cache && echo started >> {RUNS} && sleep 4"
  - append: {{path: out.txt, content: "three\\n"}}
  - write: {{path: notes/more.txt, content: "more\\n"}}
  - finish: {{summary: wrote out.txt and notes/more.txt}}
"""
QUICK = """
steps:
  - write: {path: out.txt, content: "one\\ntwo\\nthree\\n"}
  - write: {path: notes/more.txt, content: "more\\n"}
  - finish: {summary: wrote out.txt and notes/more.txt}
"""
RESULT = {"out.txt": "one\ntwo\nthree\n", "notes/more.txt": "more\n"}
WAIT = 60.0


@pytest.fixture(scope="module")
def can_make_namespaces() -> None:
    why = unavailable()
    if why is None:
        return
    if os.environ.get(REQUIRE_NETNS) == "1":
        pytest.fail(f"{REQUIRE_NETNS}=1 but {why}", pytrace=False)
    pytest.skip(why)


@pytest.fixture
def pg_store(postgres_url: str) -> Iterator[Store]:
    opened = Store.open(postgres_url, create=True)
    yield opened
    opened.close()


@pytest.fixture
def cairn(pg_store: Store, tmp_path: Path, package_downloads: Path) -> Cairn:
    made = make_cairn(pg_store, tmp_path, package_downloads=package_downloads)
    with pg_store.begin() as conn:
        group = get_group(conn, get_room(conn, "sample").group_id)
        # A verify command slow enough to lose host A while it runs, after the agent stage.
        create_room(
            conn, name="slow", group_id=group.id, repo=str(made.repo), base_branch="main",
            verify_command="sleep 4",
        )  # fmt: skip
    return made


@pytest.fixture
def hosts(can_make_namespaces: None, cairn: Cairn, tmp_path: Path) -> Iterator[tuple[Host, Host]]:
    url = cairn.store.engine.url
    target = (url.host or "127.0.0.1", url.port or 5432)
    with namespace("a") as ns_a, namespace("b") as ns_b:
        forwarders = [Forwarder(ns.gateway, target) for ns in (ns_a, ns_b)]
        try:
            yield tuple(  # type: ignore[misc]
                Host(tmp_path / f"host-{name}", _over(url, ns, fwd), ns.prefix)
                for name, ns, fwd in zip("ab", (ns_a, ns_b), forwarders, strict=True)
            )
            relayed = [forwarder.relayed for forwarder in forwarders]
            assert all(relayed), f"a host never reached the store over its veth: {relayed}"
        finally:
            for forwarder in forwarders:
                forwarder.close()


def _over(url: sa.URL, ns: Namespace, forwarder: Forwarder) -> str:
    """The store's URL as a host in `ns` reaches it: over its veth, through the forwarder."""
    return url.set(host=ns.gateway, port=forwarder.port).render_as_string(hide_password=False)


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[[Host], subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []

    def run(host: Host) -> subprocess.Popen[bytes]:
        started.append(host.start(tmp_path / f"runner-{len(started)}.log"))
        return started[-1]

    yield run
    for process in started:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {WAIT:g} s waiting for {what}")
        time.sleep(0.05)


def _workspace(host: Host, job_id: int) -> Path | None:
    found = [p for p in (host.home / "workspaces").glob(f"*/job-{job_id}") if p.is_dir()]
    return found[0] if found else None


def _runs(host: Host, job_id: int) -> str:
    workspace = _workspace(host, job_id)
    log = workspace / RUNS if workspace else None
    return log.read_text() if log and log.exists() else ""


def _lose(process: subprocess.Popen[bytes]) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    assert process.wait(timeout=30) == -signal.SIGKILL


def _finish_on(host: Host, cairn: Cairn, job_id: int) -> None:
    """Host B works until the job ends, approving at review as a person would."""
    while not cairn.job(job_id).status.is_terminal:
        if cairn.job(job_id).status is Status.waiting:
            cairn.approve(job_id)
        assert host.work().returncode == 0


def _remote_moves(cairn: Cairn, ref: str) -> int:
    done = subprocess.run(
        ["git", "reflog", "show", "--format=%H", ref], cwd=cairn.repo, capture_output=True,
        text=True,
    )  # fmt: skip
    return len(done.stdout.split()) if done.returncode == 0 else 0


def _assert_finished_once(cairn: Cairn, job_id: int, main_moves: int) -> dict[str, object]:
    done = cairn.detail(job_id)
    assert done["status"] == "completed", done["diagnosis"]
    assert [(e["kind"], e["status"]) for e in done["effects"]] == [
        ("push", "done"),
        ("merge", "done"),
    ]
    job = cairn.job(job_id)
    assert job.baseline is not None
    assert job.result_fingerprint == expected_tree(cairn.repo, job.baseline, RESULT)
    assert cairn.git("show", "main:out.txt") == "one\ntwo\nthree"
    # Counted on the remote: the job's branch was pushed once, main moved once.
    assert _remote_moves(cairn, f"refs/heads/{cairn.branch(job_id)}") == 1
    assert _remote_moves(cairn, "refs/heads/main") == main_moves + 1
    return done


def test_host_a_lost_in_the_middle_of_the_agent_stage(
    hosts: tuple[Host, Host], cairn: Cairn, start: Callable[[Host], subprocess.Popen[bytes]]
) -> None:
    a, b = hosts
    main_moves = _remote_moves(cairn, "refs/heads/main")
    job = cairn.submit(SCRIPT).id
    runner = start(a)
    _wait_for(lambda: _runs(a, job) == "started\n", "host A's agent to be inside its `run` step")
    _lose(runner)

    _finish_on(b, cairn, job)

    done = _assert_finished_once(cairn, job, main_moves)
    agent_runs = [s["status"] for s in done["stages"] if s["name"] == "running_agent"]  # type: ignore[attr-defined]
    assert agent_runs == ["abandoned", "accepted"], "host B redid the agent stage host A lost"
    # Host B's workspace was made afresh: its context started over with it, so the lines
    # host A appended before it was lost were written once, by host B.
    assert _runs(b, job) == "started\n"


def test_host_a_lost_after_the_agent_stage_was_accepted(
    hosts: tuple[Host, Host], cairn: Cairn, start: Callable[[Host], subprocess.Popen[bytes]]
) -> None:
    a, b = hosts
    main_moves = _remote_moves(cairn, "refs/heads/main")
    job = cairn.submit(QUICK, room="slow").id
    runner = start(a)

    def verifying_after_checkpoint() -> bool:
        with cairn.store.begin() as conn:
            saved = checkpoint_ledger.latest(conn, job)
        return saved is not None and cairn.job(job).stage is Stage.verifying

    _wait_for(verifying_after_checkpoint, "host A to verify the agent's checkpointed result")
    _lose(runner)

    _finish_on(b, cairn, job)

    done = _assert_finished_once(cairn, job, main_moves)
    agent_runs = [s["status"] for s in done["stages"] if s["name"] == "running_agent"]  # type: ignore[attr-defined]
    assert agent_runs == ["accepted"], "host B went on from the checkpoint, not from scratch"


def test_host_a_lost_at_review_after_the_approval(
    hosts: tuple[Host, Host], cairn: Cairn, start: Callable[[Host], subprocess.Popen[bytes]]
) -> None:
    a, b = hosts
    main_moves = _remote_moves(cairn, "refs/heads/main")
    job = cairn.submit(QUICK).id
    runner = start(a)
    _wait_for(lambda: cairn.job(job).stage is Stage.awaiting_review, "host A to reach review")
    os.killpg(runner.pid, signal.SIGSTOP)  # host A hangs, then is lost for good
    approval = cairn.approve(job)
    assert approval.status is Status.queued
    _lose(runner)

    assert b.work().returncode == 0

    done = _assert_finished_once(cairn, job, main_moves)
    integration = [d for d in done["decisions"] if d["gate"] == "integration"]  # type: ignore[attr-defined]
    assert [(d["verdict"], d["actor"]) for d in integration] == [("approved", "admin")]
