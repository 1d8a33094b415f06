"""`cairn demo`: one scripted job through every gate, on a throwaway repository and home."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from cairn.config import Config
from cairn.demo_agents import DemoAgent, script_agent
from cairn.deps import bundled_advisories
from cairn.errors import InvalidState, NotAllowed
from cairn.jobs import gates
from cairn.jobs.drive import ProgressCallback
from cairn.jobs.runner import Runner
from cairn.jobs.submit import submit_job
from cairn.jobs.view import JobDetail, job_detail
from cairn.next_action import Action, NextAction
from cairn.sanitize import user_sanitizer
from cairn.stages import Stage, Status
from cairn.store import Store, decisions, identity
from cairn.store.records import RequestStatus
from cairn.store.rooms import create_room
from cairn.testing.repos import make_sample_repo

Narrate = Callable[[str], None]
Explain = Callable[[str | None, tuple[NextAction, ...]], str | None]
"""A front end's words for a diagnosis and its next actions (the CLI's: next_steps)."""
REQUEST = "Add a greet(name) helper with a test, and mention it in the README."
MAX_DEPENDENCY_ASKS = 3


class DemoStopped(InvalidState):
    """The demo's job is not where the demo expects it; what happened is already narrated."""


def demo_script() -> str:
    """The YAML script the demo's agent replays."""
    return resources.files("cairn.testing").joinpath("demo_script.yaml").read_text()


def run_demo(
    workdir: Path,
    narrate: Narrate,
    explain: Explain,
    on_progress: ProgressCallback | None = None,
    agent: DemoAgent | None = None,
) -> JobDetail:
    """Run the demo in `workdir` (with the scripted agent unless `agent` says otherwise).

    Returns the finished job's detail record.
    """
    config = Config.from_env(home=workdir / "home")
    # Advisories: the configured ones, else the small real set that ships for demos and tests.
    config = config.model_copy(
        update={"user": "admin", "osv_dir": config.osv_dir or bundled_advisories()}
    )
    repo = make_sample_repo(workdir / "sample-repo")
    if agent is None:
        script = workdir / "agent.yaml"
        script.write_text(demo_script())
        agent = script_agent(script)
    store = Store.open(config.store_url, create=True)
    try:
        _set_up(store, repo)
        narrate(f"alice (a member of group default) asks {agent.label} for a change:")
        narrate(f"  “{REQUEST}”")
        with store.begin() as conn:
            job = submit_job(
                conn,
                room="sample",
                text=REQUEST,
                agent=agent.spec,
                actor="alice",
                sanitizer=user_sanitizer(config),
            )
        runner = Runner(store, config, on_progress=on_progress)
        _through_the_gates(store, runner, job.id, narrate, explain)
        return _report(store, job.id, repo, narrate)
    finally:
        store.close()


def _through_the_gates(
    store: Store, runner: Runner, job_id: int, narrate: Narrate, explain: Explain
) -> None:
    """Run gate, dependency gate, integration gate: each decided by admin, narrated."""
    # Submit already put the job at the run gate: nothing runs before the first decision.
    _expect(store, job_id, Stage.awaiting_run_approval, narrate, explain)
    narrate(
        "Group default's policy is run_approval=admin: nothing runs until an admin other than "
        "the requester approves. alice, a member, can see the job but not decide it:"
    )
    narrate("  " + _refusal(store, job_id, "alice"))
    _decide(store, job_id, narrate, "admin approves the run; the runner prepares and starts:")
    runner.work(until_idle=True)
    # The scripted agent asks for one package; a real model may ask for none, or for more
    # (each ask waits for a person).
    for _ in range(MAX_DEPENDENCY_ASKS):
        with store.begin() as conn:
            detail = job_detail(conn, job_id)
        pending = [d for d in detail.dependency_requests if d.status is RequestStatus.pending]
        if detail.stage is not Stage.awaiting_dependency_approval or not pending:
            break
        ask = pending[0]
        _decide(
            store,
            job_id,
            narrate,
            f"The agent asked for {ask.ecosystem} {ask.name}=={ask.version}. admin approves "
            "exactly that version; cairn adds it to pyproject.toml and uv.lock from a temporary "
            "copy, installs wheels only (no build hooks), audits the resolved set against OSV "
            "advisories, caches it read-only under its fingerprint, and hardlinks it into the "
            "job's workspace:",
        )
        runner.work(until_idle=True)
    detail = _expect(store, job_id, Stage.awaiting_review, narrate, explain)
    narrate(
        "The job waits at the integration gate. "
        "The room feed still shows only the request and the stage:"
    )
    narrate("  " + detail.feed.replace("\n", "\n  "))
    narrate("The reviewer reads the summary:")
    summary = detail.review.summary if detail.review else ""
    narrate("  " + summary.replace("\n", "\n  "))
    _decide(store, job_id, narrate, "admin approves the result; the runner pushes and merges it:")
    runner.work(until_idle=True)
    _expect(store, job_id, Stage.completed, narrate, explain)


def _expect(
    store: Store, job_id: int, stage: Stage, narrate: Narrate, explain: Explain
) -> JobDetail:
    """The job's detail if it reached `stage`; else narrate where it is instead, and stop."""
    with store.begin() as conn:
        detail = job_detail(conn, job_id)
    wanted = Status.completed if stage is Stage.completed else Status.waiting
    if (detail.stage, detail.status) == (stage, wanted):
        return detail
    narrate(
        f"The demo expected job {job_id} at {stage} ({wanted}), "
        f"but it is at {detail.stage} ({detail.status})."
    )
    # The diagnosis is stored bounded and masked; it says what went wrong and what to do.
    narrate(f"  diagnosis: {explain(detail.diagnosis, detail.next) or 'none recorded'}")
    raise DemoStopped(
        f"the demo stopped: job {job_id} is {detail.status} at {detail.stage}; "
        "fix what the diagnosis above says",
        next_actions=[NextAction(Action.demo)],
    )


def _set_up(store: Store, repo: Path) -> None:
    with store.begin() as conn:
        group = identity.add_group(conn, "default")  # the strict default policy
        for name, role in (("admin", "admin"), ("alice", "member")):
            user = identity.add_user(conn, name)
            identity.set_membership(conn, group.id, user.id, role)
        create_room(
            conn,
            name="sample",
            group_id=group.id,
            repo=str(repo),
            base_branch="main",
            verify_command="python -m pytest -q",
        )


def _decide(store: Store, job_id: int, narrate: Narrate, what: str) -> None:
    narrate(what)
    with store.begin() as conn:
        gates.approve(conn, job_id, "admin")


def _refusal(store: Store, job_id: int, actor: str) -> str:
    """What the run gate says to the requester who tries to approve their own run."""
    try:
        with store.begin() as conn:
            gates.approve(conn, job_id, actor)
    except NotAllowed as exc:
        return f"refused: {exc}"
    raise AssertionError("the run gate let a requester approve their own run")


def _report(store: Store, job_id: int, repo: Path, narrate: Narrate) -> JobDetail:
    with store.begin() as conn:
        detail = job_detail(conn, job_id)
        chain = decisions.verify_chain(conn)
    narrate(f"Job {job_id} is {detail.status}. The feed now shows the final result:")
    narrate("  " + detail.feed.replace("\n", "\n  "))
    for effect in detail.effects:
        narrate(f"effect {effect.kind}: {effect.status}")
    log = subprocess.run(
        ["git", "log", "--oneline", "-3", "main"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    narrate("The sample repository's main branch now reads:")
    narrate("  " + log.replace("\n", "\n  "))
    narrate(f"Decision chain: {chain.checked} decisions, {'intact' if chain.ok else 'BROKEN'}.")
    return detail
