"""Chaos: runners killed at random fault points, restarted, until every job is done.

A forge room gets the same treatment at the end: its jobs are delivered as pull requests on
a FakeForge, and each ends with exactly one pull request, merged, however often runners die.

Each seed gets its own home, store and repository. Jobs ask for a dependency, write their own
file, pass verification, and are delivered. A person decides whatever waits at a gate between
runner processes: odd jobs get their (real, tiny) package installed, even jobs are refused with
a reason that names the job. The outcome must match an unkilled run exactly.

What each agent was told is checked in the unkilled run, whose runner works in this process
(the `turns` fixture); the killed runs are checked on what they left: each job's public record,
the repository and the ledgers.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from cairn.agents.registry import load_agent_spec
from cairn.config import Config
from cairn.engine import Evidence, RunStatus
from cairn.forges import ForgeSettings
from cairn.forges.registry import SCOPE_KEY
from cairn.jobs import gates
from cairn.jobs.runner import Runner
from cairn.jobs.submit import submit_job
from cairn.jobs.view import job_detail
from cairn.sanitize import user_sanitizer
from cairn.stages import Stage, Status
from cairn.store import Store, decisions, identity, stage_runs
from cairn.store import jobs as job_ledger
from cairn.store.rooms import create_room
from cairn.testing.fake_forge import FakeForge
from cairn.testing.harness import Turns
from cairn.testing.repos import make_sample_repo

JOBS_PER_SEED = 7
SEEDS = ("alpha", "bravo", "charlie")
CHANCE = "0.04"
CAIRN = Path(sys.executable).parent / "cairn"


def _script(n: int) -> str:
    return f"""
steps:
  - write: {{path: jobs/job-{n}.txt, content: "work of job {n}\\n"}}
  - request_dependency: {{ecosystem: pypi, name: six, version: "1.16.0", reason: "job {n}"}}
  - append: {{path: jobs/job-{n}.txt, content: "after approval {n}\\n"}}
  - run: "test -s jobs/job-{n}.txt"
  - finish: {{summary: "job {n} wrote its file"}}
"""


def _install(home: Path, tmp: Path, downloads: Path) -> tuple[Store, Config, Path]:
    config = Config(home=home, lease_seconds=0.6, package_downloads=downloads)
    repo = make_sample_repo(tmp / "repo")
    subprocess.run(["git", "config", "core.logAllRefUpdates", "always"], cwd=repo, check=True)
    store = Store.open(config.store_url, create=True)
    with store.begin() as conn:
        group = identity.add_group(conn, "default", {"run_approval": "auto"})
        for name, role in (("admin", "admin"), ("alice", "member")):
            identity.set_membership(conn, group.id, identity.add_user(conn, name).id, role)
        create_room(
            conn,
            name="chaos",
            group_id=group.id,
            repo=str(repo),
            base_branch="main",
            verify_command="test -d jobs",
            scope={"unsandboxed_commands": True},
        )
    for n in range(1, JOBS_PER_SEED + 1):
        script = tmp / f"job-{n}.yaml"
        script.write_text(_script(n))
        with store.begin() as conn:
            submit_job(
                conn,
                room="chaos",
                text=f"job {n}",
                agent=load_agent_spec(f"script:{script}"),
                actor="alice",
                sanitizer=user_sanitizer(config),
            )
    return store, config, repo


def _approve_waiting(store: Store) -> None:
    with store.begin() as conn:
        waiting = [j for j in job_ledger.list_jobs(conn) if j.status is Status.waiting]
    for job in waiting:
        with store.begin() as conn:
            if job.stage is Stage.awaiting_dependency_approval and job.id % 2 == 0:
                gates.reject(conn, job.id, "admin", _refusal(job.id))
            else:
                gates.approve(conn, job.id, "admin")


def _refusal(job_id: int) -> str:
    return f"not for job {job_id}"


def _all_ended(store: Store) -> bool:
    with store.begin() as conn:
        return all(j.status.is_terminal for j in job_ledger.list_jobs(conn))


def _run_killed(store: Store, home: Path, seed: str) -> int:
    """Run `cairn work` processes under random crash faults until every job ended."""
    kills = 0
    for restart in range(300):
        env = os.environ | {
            "CAIRN_HOME": str(home),
            "CAIRN_LEASE_SECONDS": "0.6",
            "CAIRN_FAULTS": f"crash:random:{CHANCE}:{seed}-{restart}",
        }
        env.pop("CAIRN_DATABASE_URL", None)
        done = subprocess.run(
            [str(CAIRN), "work", "--until-idle"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode in (0, 137), done.stderr
        kills += done.returncode == 137
        _approve_waiting(store)
        if _all_ended(store):
            return kills
    pytest.fail(f"seed {seed}: jobs were still open after 300 runner processes")


def _run_unkilled(store: Store, config: Config) -> None:
    while not _all_ended(store):
        Runner(store, config).work(until_idle=True)
        _approve_waiting(store)


def _reflog_count(repo: Path, ref: str) -> int:
    out = subprocess.run(
        ["git", "reflog", "show", "--format=%H", ref],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return len(out.split())


@pytest.mark.parametrize("seed", SEEDS)
def test_killed_runners_finish_every_job_exactly_once(
    tmp_path: Path, seed: str, package_downloads: Path, turns: Turns
) -> None:
    calm = _install(tmp_path / "calm-home", tmp_path / "calm", package_downloads)
    calm_store, calm_config, _ = calm
    _run_unkilled(calm_store, calm_config)
    _assert_each_job_heard_its_own_decision(turns)
    store, _, repo = _install(tmp_path / "home", tmp_path / "chaos", package_downloads)
    try:
        kills = _run_killed(store, tmp_path / "home", seed)
        ours = store.installation_id  # read before the transactions below hold the store
        with calm_store.begin() as calm, store.begin() as conn:
            expected = [(j.id, j.status, j.stage) for j in job_ledger.list_jobs(calm)]
            got = [(j.id, j.status, j.stage) for j in job_ledger.list_jobs(conn)]
            assert got == expected and {s for _, s, _ in got} == {Status.completed}
            _assert_ledgers_hold(conn)
            branches = {j.id: j.branch_in(ours) for j in job_ledger.list_jobs(conn)}
        assert kills > 0, "the seed never crashed a runner; the test proved nothing"
        assert _reflog_count(repo, "refs/heads/main") == 1 + JOBS_PER_SEED  # one merge each
        for n in range(1, JOBS_PER_SEED + 1):
            assert _reflog_count(repo, f"refs/heads/{branches[n]}") == 1  # one push each
            text = subprocess.run(
                ["git", "show", f"main:jobs/job-{n}.txt"],
                cwd=repo,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            assert text == f"work of job {n}\nafter approval {n}\n"
    finally:
        store.close()
        calm_store.close()


def _assert_each_job_heard_its_own_decision(turns: Turns) -> None:
    """In the unkilled run, what cairn told each agent: its own decision, nobody else's."""
    for n in range(1, JOBS_PER_SEED + 1):
        seen = " ".join(turns.notes(n))
        if n % 2:
            assert "six==1.16.0 was approved and installed" in seen, "it heard its own decision"
        else:
            assert f"rejected: {_refusal(n)}" in seen, "the job heard its own decision"
        others = [_refusal(m) for m in range(1, JOBS_PER_SEED + 1) if m != n]
        assert not any(other in seen for other in others), "a job saw another job's context"


def _assert_ledgers_hold(conn: sa.Connection) -> None:
    """In the killed run, each job's public record holds its own decision and nobody else's."""
    for job in job_ledger.list_jobs(conn):
        detail = job_detail(conn, job.id)
        (asked,) = detail.dependency_requests
        (decided,) = [d for d in detail.decisions if d.gate == "dependency"]
        # The agent resumed after the decision: through the install when it was approved.
        stages = [e.stage for e in detail.events]
        gate = len(stages) - stages[::-1].index("awaiting_dependency_approval")
        after = [e.stage for e in detail.events[gate:] if e.status == "running"]
        if job.id % 2:
            assert (asked.status, decided.verdict) == ("approved", "approved")
            assert "running_agent" in after[after.index("installing_dependency") :], after
        else:
            assert (asked.status, decided.reason) == ("rejected", _refusal(job.id))
            assert "running_agent" in after and "installing_dependency" not in stages, stages
        shown = detail.model_dump_json()
        others = [_refusal(n) for n in range(1, JOBS_PER_SEED + 1) if n != job.id]
        assert not any(other in shown for other in others), "a job saw another job's context"
        for run in stage_runs.for_job(conn, job.id):
            if run.status is RunStatus.accepted:
                assert run.evidence is not None and run.content_id
                held = Evidence.from_data(run.evidence)
                assert held.shortfalls([]) == [], f"{run.stage} accepted with short evidence"
    assert decisions.verify_chain(conn).ok


# A forge room: the same chaos, delivered as pull requests over real HTTP.

FORGE_REPO = "acme/app"
FORGE_JOBS = 5
FORGE_SEEDS = ("delta", "echo")
FORGE_CHANCE = "0.08"


def _forge_install(home: Path, tmp: Path, forge: FakeForge) -> Store:
    config = Config(home=home, lease_seconds=0.6)
    settings = ForgeSettings.parse(forge.kind, FORGE_REPO, url=forge.url, token_env="FORGE_TOKEN")
    store = Store.open(config.store_url, create=True)
    with store.begin() as conn:
        group = identity.add_group(conn, "default", {"run_approval": "auto"})
        for name, role in (("admin", "admin"), ("alice", "member")):
            identity.set_membership(conn, group.id, identity.add_user(conn, name).id, role)
        create_room(
            conn,
            name="forge",
            group_id=group.id,
            repo=settings.git_url,
            base_branch="main",
            verify_command="test -d jobs",
            scope={
                "unsandboxed_commands": True,
                SCOPE_KEY: settings.to_scope(),
                "delivery": "pull_request_and_merge",
            },
        )
    for n in range(1, FORGE_JOBS + 1):
        script = tmp / f"job-{n}.yaml"
        script.write_text(
            "steps:\n"
            f'  - write: {{path: jobs/job-{n}.txt, content: "work of job {n}\\n"}}\n'
            f'  - finish: {{summary: "job {n} wrote its file"}}\n'
        )
        with store.begin() as conn:
            submit_job(
                conn,
                room="forge",
                text=f"job {n}",
                agent=load_agent_spec(f"script:{script}"),
                actor="alice",
                sanitizer=user_sanitizer(config),
            )
    return store


def _decide_or_resume(store: Store) -> None:
    """Approve what waits for review; resume what a lost forge answer blocked."""
    with store.begin() as conn:
        open_jobs = [j for j in job_ledger.list_jobs(conn) if not j.status.is_terminal]
    for job in open_jobs:
        with store.begin() as conn:
            if job.status is Status.waiting:
                gates.approve(conn, job.id, "admin")
            elif job.status is Status.blocked:
                gates.resume(conn, job.id, "admin")


@pytest.mark.parametrize("seed", FORGE_SEEDS)
def test_killed_runners_leave_exactly_one_pull_request_per_job(
    tmp_path: Path, seed: str, fake_forge: FakeForge
) -> None:
    home = tmp_path / "home"
    store = _forge_install(home, tmp_path, fake_forge)
    # Two answers lost after the forge opened the pull request, on top of the random kills.
    fake_forge.fail_after("POST", r"/pulls$", times=2)
    assert fake_forge.test_token is not None
    kills = 0
    try:
        for restart in range(300):
            env = os.environ | {
                "CAIRN_HOME": str(home),
                "CAIRN_LEASE_SECONDS": "0.6",
                "CAIRN_FAULTS": f"crash:random:{FORGE_CHANCE}:{seed}-{restart}",
                "FORGE_TOKEN": fake_forge.test_token,
            }
            env.pop("CAIRN_DATABASE_URL", None)
            done = subprocess.run(
                [str(CAIRN), "work", "--until-idle"],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode in (0, 137), done.stderr
            kills += done.returncode == 137
            _decide_or_resume(store)
            if _all_ended(store):
                break
        else:
            pytest.fail(f"seed {seed}: jobs were still open after 300 runner processes")
        ours = store.installation_id
        with store.begin() as conn:
            jobs = job_ledger.list_jobs(conn)
            assert {j.status for j in jobs} == {Status.completed}
            branches = {j.branch_in(ours) for j in jobs}
        assert kills > 0, "the seed never crashed a runner; the test proved nothing"
        pulls = fake_forge.pulls(FORGE_REPO)
        assert sorted(p.head for p in pulls) == sorted(branches), "exactly one PR per job"
        assert {p.state for p in pulls} == {"merged"}
        opens = [c for c in fake_forge.calls if c.method == "POST" and c.path.endswith("/pulls")]
        assert len(opens) == FORGE_JOBS, "no open was ever repeated"
        assert sum(c.dropped for c in opens) == 2, "two answers were lost on the way"
        for n in range(1, FORGE_JOBS + 1):
            text = subprocess.run(
                ["git", "show", f"main:jobs/job-{n}.txt"],
                cwd=fake_forge.world.repo_path(FORGE_REPO),
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            assert text == f"work of job {n}\n"
    finally:
        store.close()
