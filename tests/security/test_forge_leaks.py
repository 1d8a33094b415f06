"""The leak property on the forge paths: a forge token and CAIRN_SECRET_KEY go nowhere.

For generated GitHub and GitLab tokens and secret keys, a forge room (token from the runner's
environment, or stored encrypted in the store) runs two jobs through the real runner against a
FakeForge over real HTTP: one is published for review and rejected (its pull request closed
with the reason), one approved (its pull request marked ready). Afterwards no piece of either
secret is in any table of the store, in what `cairn show` gives, in the runner's log, on the
forge (pull request bodies, comments, what was pushed), or in the environment the agent's
sandboxed command saw, which it wrote into its result and so onto the forge.
"""

from __future__ import annotations

import itertools
import logging
import subprocess
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pydantic import SecretStr

from cairn.agents.registry import load_agent_spec
from cairn.config import Config
from cairn.forges import ForgeSettings
from cairn.forges.registry import SCOPE_KEY
from cairn.jobs import gates
from cairn.jobs.runner import Runner
from cairn.jobs.submit import submit_job
from cairn.jobs.view import job_detail, with_pull_request
from cairn.sanitize import user_sanitizer
from cairn.stages import Stage
from cairn.store import Store, identity, schema
from cairn.store.credentials import CredentialCipher, set_credential
from cairn.store.rooms import create_room
from cairn.testing.fake_forge import FakeForge
from cairn.testing.fake_forge_state import READ, WRITE, Token

from .leaks import ALNUM, TOKENS, Planted, assert_no_leak

REPO = "acme/app"
SCRIPT = """
steps:
  - write: {path: src/hello.py, content: "def hello():\\n    return 'hello'\\n"}
  - run: "env > seen-env.txt"
  - finish: {summary: "Added hello()."}
"""
_RUNS = itertools.count()
AUTO_RUNS = {"run_approval": "auto", "auto_approve_kinds": ["interactive", "scheduled"]}


def _token(kind: str) -> st.SearchStrategy[tuple[str, str]]:
    return TOKENS["github" if kind == "github" else "gitlab"]


def _dump_store(store: Store) -> list[str]:
    """Every value of every row of every table, as text."""
    with store.begin() as conn:
        return [
            repr(tuple(row))
            for table in schema.metadata.sorted_tables
            for row in conn.execute(sa.select(table))
        ]


def _install(home: Path, forge: FakeForge, key: str, token: str, stored: bool) -> Store:
    config = Config(home=home, secret_key=SecretStr(key))
    source = {"credential": "forge"} if stored else {"token_env": "FORGE_TOKEN"}
    room = ForgeSettings.parse(forge.kind, REPO, url=forge.url, **source)
    store = Store.open(config.store_url, create=True)
    with store.begin() as conn:
        group = identity.add_group(conn, "default", AUTO_RUNS)
        for name, role in (("admin", "admin"), ("alice", "member")):
            identity.set_membership(conn, group.id, identity.add_user(conn, name).id, role)
        if stored:
            set_credential(conn, "forge", token, CredentialCipher(key))
        create_room(
            conn, name="forge", group_id=group.id, repo=room.git_url, base_branch="main",
            verify_command="test -f src/hello.py",
            scope={SCOPE_KEY: room.to_scope(), "delivery": "pull_request"},
        )  # fmt: skip
    return store


def _submit(store: Store, config: Config, script: Path) -> int:
    with store.begin() as conn:
        job = submit_job(
            conn, room="forge", text="Add hello()", agent=load_agent_spec(f"script:{script}"),
            actor="alice", sanitizer=user_sanitizer(config),
        )  # fmt: skip
    return job.id


def _pushed(forge: FakeForge, ref: str, path: str) -> str:
    return subprocess.run(
        ["git", "show", f"{ref}:{path}"], cwd=forge.world.repo_path(REPO),
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip


@pytest.mark.parametrize("kind", ["github", "gitlab"])
def test_no_forge_credential_reaches_the_store_outputs_or_commands(
    kind: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)

    # Each example is two whole jobs: a few, and no shrinking (a failure prints its example).
    @settings(
        max_examples=2,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        phases=(Phase.generate,),
    )
    @given(
        token=_token(kind),
        key=st.text(ALNUM + "-_", min_size=24, max_size=48).filter(
            lambda k: any(c.isdigit() for c in k) and any(c.isupper() for c in k)
        ),
        stored=st.booleans(),
    )
    def property_holds(token: tuple[str, str], key: str, stored: bool) -> None:
        secret, whole = token
        run = tmp_path / f"run-{next(_RUNS)}"
        run.mkdir()
        caplog.clear()
        with FakeForge(run / "forge", kind=kind) as forge, pytest.MonkeyPatch.context() as env:
            forge.create_repo(REPO, source=_sample(run))
            forge.world.tokens[whole] = Token("cairn-bot", frozenset({READ, WRITE}))
            env.setenv("CAIRN_SECRET_KEY", key)
            if not stored:
                env.setenv("FORGE_TOKEN", whole)
            store = _install(run / "home", forge, key, whole, stored)
            config = Config(home=run / "home", secret_key=SecretStr(key))
            try:
                shown = _two_jobs(store, config, run, key)
                pulls = forge.pulls(REPO)
                seen = [p.body for p in pulls] + [c for p in pulls for c in p.comments]
                seen += [_pushed(forge, p.head, "seen-env.txt") for p in pulls]
                seen += [repr(c) for c in forge.calls]
                assert len(pulls) == 2 and "PATH=" in seen[-len(forge.calls) - 1]
                everything = [*shown, *seen, *_dump_store(store), caplog.text]
            finally:
                store.close()
        assert_no_leak(Planted(text="", secrets=(secret, whole, key)), everything)

    property_holds()


def _sample(run: Path) -> Path:
    from cairn.testing.repos import make_sample_repo

    return make_sample_repo(run / "source")


def _two_jobs(store: Store, config: Config, run: Path, key: str) -> list[str]:
    """Reject one job at review and approve the other; what `cairn show` gave for each."""
    script = run / "job.yaml"
    script.write_text(SCRIPT)
    rejected, approved = _submit(store, config, script), _submit(store, config, script)
    Runner(store, config).work(until_idle=True)
    with store.begin() as conn:
        assert job_detail(conn, rejected).stage == Stage.awaiting_review
        gates.reject(conn, rejected, "admin", "not this way")
        gates.approve(conn, approved, "admin")
    Runner(store, config).work(until_idle=True)
    shown = []
    with store.begin() as conn:
        for job in (rejected, approved):
            detail = with_pull_request(conn, job_detail(conn, job), key)
            assert detail.pull_request and "error" not in detail.pull_request, detail
            shown.append(detail.model_dump_json())
    return shown
