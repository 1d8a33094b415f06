"""A whole cairn installation in a temporary folder, driven the way a runner and people drive it.

`make_cairn` sets up a store with group `default`, its people and room `sample` over a sample
repository; the returned `Cairn` submits script jobs, runs a runner until idle and decides
gates. Everything goes through cairn's public job functions, as the CLI does.

`recording_turns` records every turn a script agent is handed (`Turns`), so a test checks what
an agent was told at the agent interface, not in the agent's saved state.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cairn.agents import ScriptAgent
from cairn.agents.base import Outcome, Turn
from cairn.agents.registry import load_agent_spec
from cairn.config import Config
from cairn.jobs import gates
from cairn.jobs.policy import change_policy
from cairn.jobs.reply import reply
from cairn.jobs.runner import Runner
from cairn.jobs.submit import submit_job
from cairn.jobs.view import job_detail
from cairn.sanitize import user_sanitizer
from cairn.store import Store, identity
from cairn.store import jobs as job_ledger
from cairn.store.records import Job
from cairn.store.rooms import create_room
from cairn.testing.repos import make_sample_repo

PEOPLE: Mapping[str, str] = {"admin": "admin", "bob": "admin", "alice": "member"}
"""The people of group `default` and their roles."""
AUTO_RUNS: Mapping[str, Any] = {
    "run_approval": "auto",
    "auto_approve_kinds": ["interactive", "scheduled"],
}
"""A policy under which runs need no person at the run gate (dependencies still do)."""


@dataclass
class Cairn:
    """One installation: group default with admins `admin` and `bob` and member `alice`."""

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
        """The job as the ledger holds it now."""
        with self.store.begin() as conn:
            return job_ledger.get_job(conn, job_id)

    def detail(self, job_id: int) -> dict[str, Any]:
        """The job's detail view in its JSON form (what `cairn show --json` builds on)."""
        with self.store.begin() as conn:
            return job_detail(conn, job_id).model_dump(mode="json")

    def approve(self, job_id: int, actor: str = "admin") -> Job:
        """Approve the gate the job waits at, as `actor`."""
        with self.store.begin() as conn:
            return gates.approve(conn, job_id, actor)

    def reject(self, job_id: int, reason: str, actor: str = "admin") -> Job:
        """Reject the gate the job waits at, as `actor`, giving `reason`."""
        with self.store.begin() as conn:
            return gates.reject(conn, job_id, actor, reason)

    def reply(self, job_id: int, message: str, actor: str = "admin", *, fresh: bool = False) -> Job:
        """Ask for changes to the job waiting at review, as `actor` (`cairn reply`)."""
        with self.store.begin() as conn:
            return reply(
                conn, job_id, actor, message, fresh=fresh, sanitizer=user_sanitizer(self.config)
            )

    def set_policy(self, **changes: Any) -> None:
        """Change group default's policy as its admin `admin`: validated, and a decision."""
        with self.store.begin() as conn:
            change_policy(conn, "default", "admin", changes)

    def git(self, *args: str) -> str:
        """Run plain git in the room's repository and return what it printed."""
        done = subprocess.run(
            ["git", *args], cwd=self.repo, capture_output=True, text=True, check=True
        )
        return done.stdout.strip()


def make_cairn(
    store: Store,
    tmp: Path,
    *,
    policy: Mapping[str, Any] | None = AUTO_RUNS,
    people: Mapping[str, str] = PEOPLE,
    package_downloads: Path | None = None,
) -> Cairn:
    """Set up `store` as one installation under `tmp` (policy None: cairn's strict default)."""
    config = Config(home=tmp / "home", lease_seconds=2, package_downloads=package_downloads)
    repo = make_sample_repo(tmp / "repo")
    with store.begin() as conn:
        group = identity.add_group(conn, "default", dict(policy) if policy is not None else None)
        for name, role in people.items():
            identity.set_membership(conn, group.id, identity.add_user(conn, name).id, role)
        create_room(conn, name="sample", group_id=group.id, repo=str(repo), base_branch="main")
    return Cairn(store=store, config=config, repo=repo, tmp=tmp)


@dataclass
class Turns:
    """The turns script agents were handed, in order, as cairn handed them."""

    given: list[Turn] = field(default_factory=list)

    def of(self, job_id: int) -> list[Turn]:
        """The turns of one job."""
        return [turn for turn in self.given if turn.job_id == job_id]

    def notes(self, job_id: int) -> list[str]:
        """Everything cairn told the job's agent, in order: notes, then a reviewer's follow-ups."""
        return [note for turn in self.of(job_id) for note in (*turn.notes, *turn.follow_ups)]

    def fresh_openings(self, job_id: int) -> list[str]:
        """The fresh openings (`cairn reply --fresh`) the job's turns were handed, in order."""
        return [turn.fresh_opening for turn in self.of(job_id) if turn.fresh_opening]

    def first_context(self, job_id: int) -> dict[str, Any] | None:
        """The context the job's first turn started from (None: a fresh one)."""
        return self.of(job_id)[0].state


@contextmanager
def recording_turns() -> Iterator[Turns]:
    """Record every turn a `ScriptAgent` of this process is handed, until the block ends."""
    recorded = Turns()
    real = ScriptAgent.run_turn

    def run_turn(self: ScriptAgent, turn: Turn) -> Outcome:
        recorded.given.append(turn)
        return real(self, turn)

    # Patched on the class: the runner builds its agents itself, out of the test's reach.
    ScriptAgent.run_turn = run_turn  # type: ignore[method-assign]
    try:
        yield recorded
    finally:
        ScriptAgent.run_turn = real  # type: ignore[method-assign]
