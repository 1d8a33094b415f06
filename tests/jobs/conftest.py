"""A cairn installation in a temporary folder: store (both backends), users, a room, runners."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cairn.agents.registry import load_agent_spec
from cairn.config import Config
from cairn.jobs import gates
from cairn.jobs.runner import Runner
from cairn.jobs.submit import submit_job
from cairn.jobs.view import job_detail
from cairn.sanitize import user_sanitizer
from cairn.store import Store, identity
from cairn.store import jobs as job_ledger
from cairn.store.records import Job
from cairn.store.rooms import create_room
from cairn.testing.repos import make_sample_repo


@dataclass
class Cairn:
    """One installation: group default with admin `admin`, admin `bob`, member `alice`."""

    store: Store
    config: Config
    repo: Path
    tmp: Path
    scripts: int = 0

    def submit(self, steps_yaml: str, text: str = "Change something", **options: Any) -> Job:
        """Submit a script job to room `sample` (as alice unless `actor=` says otherwise)."""
        self.scripts += 1
        script = self.tmp / f"script-{self.scripts}.yaml"
        script.write_text(steps_yaml)
        actor = options.pop("actor", "alice")
        with self.store.begin() as conn:
            return submit_job(
                conn,
                room=options.pop("room", "sample"),
                text=text,
                agent=load_agent_spec(f"script:{script}"),
                actor=actor,
                sanitizer=user_sanitizer(self.config),
                **options,
            )

    def work(self, job_id: int | None = None) -> list[Job]:
        """Run a fresh runner until nothing is queued or in flight."""
        return Runner(self.store, self.config).work(until_idle=True, job_id=job_id)

    def workspace(self, job_id: int) -> Path:
        """Where the job's worktree lives in this installation."""
        return self.config.workspace_path(self.store.installation_id, job_id)

    def branch(self, job_id: int) -> str:
        """The job's own branch in this installation (the name is the installation's too)."""
        return self.job(job_id).branch_in(self.store.installation_id)

    def job(self, job_id: int) -> Job:
        with self.store.begin() as conn:
            return job_ledger.get_job(conn, job_id)

    def detail(self, job_id: int) -> dict[str, Any]:
        """The job's detail view in its JSON form (what `cairn show --json` builds on)."""
        with self.store.begin() as conn:
            return job_detail(conn, job_id).model_dump(mode="json")

    def approve(self, job_id: int, actor: str = "admin") -> Job:
        with self.store.begin() as conn:
            return gates.approve(conn, job_id, actor)

    def reject(self, job_id: int, reason: str, actor: str = "admin") -> Job:
        with self.store.begin() as conn:
            return gates.reject(conn, job_id, actor, reason)

    def set_policy(self, **policy: str) -> None:
        import sqlalchemy as sa

        from cairn.store.schema import groups

        with self.store.begin() as conn:
            conn.execute(sa.update(groups).where(groups.c.name == "default").values(policy=policy))

    def git(self, *args: str) -> str:
        done = subprocess.run(
            ["git", *args], cwd=self.repo, capture_output=True, text=True, check=True
        )
        return done.stdout.strip()


@pytest.fixture
def cairn(store: Store, tmp_path: Path, package_downloads: Path) -> Iterator[Cairn]:
    config = Config(home=tmp_path / "home", lease_seconds=2, package_downloads=package_downloads)
    repo = make_sample_repo(tmp_path / "repo")
    with store.begin() as conn:
        # Runs are approved by policy here; tests/authority covers the run gate with people.
        policy = {"run_approval": "auto", "auto_approve_kinds": ["interactive", "scheduled"]}
        group = identity.add_group(conn, "default", policy)
        for name, role in (("admin", "admin"), ("bob", "admin"), ("alice", "member")):
            user = identity.add_user(conn, name)
            identity.set_membership(conn, group.id, user.id, role)
        create_room(conn, name="sample", group_id=group.id, repo=str(repo), base_branch="main")
    yield Cairn(store=store, config=config, repo=repo, tmp=tmp_path)
