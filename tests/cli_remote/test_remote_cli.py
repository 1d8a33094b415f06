"""The real `cairn` command as an API client: CAIRN_URL and CAIRN_TOKEN, never `--as`.

A server (Uvicorn in a thread, as in tests/api) serves the home a plain `cairn init` made,
with member `alice`, admin `admin` and room `sample`. The same command line is then run
locally (the store owner's tool) and through the server, and the two must agree, except
that through the server the token alone says who acts.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from acceptance.conftest import Cli
from api.conftest import serve
from authority.conftest import WRITE_B, cli, strict_home  # noqa: F401
from cairn.api import create_app
from cairn.config import Config


@dataclass
class Served:
    cli: Cli
    url: str
    tokens: dict[str, str]

    def remote(self, name: str | None, *args: str, expect: int | None = 0) -> str:
        """Run `cairn args` through the server as `name` (its token); the output."""
        env = {"CAIRN_URL": self.url, "CAIRN_TOKEN": self.tokens[name] if name else ""}
        done = self.cli(*args, expect=expect, env=env)
        return done.stdout + done.stderr


@pytest.fixture
def served(cli: Cli) -> Iterator[Served]:  # noqa: F811
    cli("room", "create", "sample", "--repo", str(cli.repo))
    tokens = {name: cli.json("user", "token", name)["token"] for name in ("admin", "alice")}
    with serve(create_app(Config.from_env(cli.env))) as url:
        yield Served(cli=cli, url=url, tokens=tokens)


def _submit(served: Served) -> str:
    script = served.cli.script(WRITE_B)
    return served.cli("submit", "sample", "add b", "--agent", f"script:{script}").stdout.strip()


def test_a_members_token_cannot_approve_a_run_whatever_as_says(served: Served) -> None:
    job = _submit(served)  # by admin, locally: it waits at the run gate
    for who in ("admin", "bob", "alice"):
        said = served.remote("alice", "approve", job, "--as", who, expect=2)
        assert "--as is not accepted with CAIRN_URL" in said
    # CAIRN_USER names the store owner's choice locally; through the server it counts for nothing.
    refused = served.cli(
        "approve",
        job,
        expect=1,
        env={"CAIRN_URL": served.url, "CAIRN_TOKEN": served.tokens["alice"], "CAIRN_USER": "admin"},
    )
    assert "only an admin" in refused.stderr and "Traceback" not in refused.stderr
    assert served.cli.show(int(job))["status"] == "waiting"
    assert served.cli.show(int(job))["decisions"] == []


def test_remote_output_is_the_local_output(served: Served) -> None:
    job = _submit(served)
    for args in (("jobs",), ("show", job), ("group", "show", "default"), ("audit", "verify")):
        local = served.cli(*args, "--json").stdout
        assert served.remote("admin", *args, "--json") == local, args
        assert served.remote("admin", *args) == served.cli(*args).stdout, args


def test_a_remote_user_acts_as_the_token_says(served: Served) -> None:
    job = _submit(served)
    said = served.remote("alice", "reject", job, "--reason", "no", expect=1)
    assert "only an admin" in said
    # The run gate's own rule holds for the token's user: admin requested it, so admin may
    # reject (own job included) but never approve it.
    assert "its own" in served.remote("admin", "approve", job, expect=1)
    assert "rejected" in served.remote("admin", "reject", job, "--reason", "not now")
    decided = served.cli.show(int(job))["decisions"]
    assert [(d["verdict"], d["actor"]) for d in decided] == [("rejected", "admin")]
    retried = served.remote("alice", "retry", job, "--json")
    new = served.cli.show(int(retried.split(":")[1].strip(" }\n")))
    assert new["requester"] == "alice"


def test_schedules_and_agents_through_the_server(served: Served) -> None:
    script = served.cli.script(WRITE_B)
    added = served.remote(
        "alice",
        "schedule",
        "add",
        "nightly",
        "sample",
        "tidy",
        "--cron",
        "0 3 * * *",
        "--agent",
        f"script:{script}",
    )
    assert "schedule nightly added" in added
    listed = served.remote("alice", "schedule", "list", "--json")
    assert listed == served.cli("schedule", "list", "--json").stdout
    assert "may not fire" not in served.remote("alice", "schedule", "fire", "nightly")
    assert "only an admin" in served.remote(
        "alice", "agent", "add", "qwen", "--adapter", "openai", "--model", "q", expect=1
    )
    served.remote("admin", "agent", "add", "qwen", "--adapter", "openai", "--model", "q")
    assert (
        served.remote("alice", "agent", "list", "--json")
        == served.cli("agent", "list", "--json").stdout
    )
    served.remote("admin", "agent", "remove", "qwen")
    assert "no named agents" in served.cli("agent", "list").stdout


def test_commands_of_the_store_are_refused_through_the_server(served: Served) -> None:
    for args in (("init",), ("work", "--until-idle"), ("gc",), ("cache", "list"), ("serve",)):
        said = served.remote("admin", *args, expect=2)
        assert "runs on the cairn host itself" in said, args
    assert "Usage" in served.remote("admin", "work", "--help")


def test_a_bad_token_or_server_is_a_clear_error(served: Served) -> None:
    served.tokens["nobody"] = "cairn_" + "x" * 43
    said = served.remote("nobody", "jobs", expect=1)
    assert "does not accept CAIRN_TOKEN" in said and "cairn_x" not in said
    assert "CAIRN_TOKEN is not" in served.remote(None, "jobs", expect=2)
    gone = served.cli(
        "jobs", expect=1, env={"CAIRN_URL": "http://127.0.0.1:9", "CAIRN_TOKEN": "cairn_y"}
    )
    assert "did not answer" in gone.stderr
    assert "no job" in served.remote("admin", "show", "999", expect=1)


def test_resume_through_the_server_words_it_as_locally(served: Served) -> None:
    from cairn.stages import Status
    from cairn.store import Store
    from cairn.store import jobs as job_ledger

    job = int(_submit(served))
    served.remote("admin", "cancel", str(job))  # through the server too
    assert served.cli.show(job)["status"] == "cancelled"
    blocked = int(_submit(served))
    store = Store.open(Config.from_env(served.cli.env).store_url)
    try:
        with store.begin() as conn:
            found = job_ledger.get_job(conn, blocked)
            job_ledger.transition(conn, found, found.stage, Status.blocked, diagnosis="moved")
    finally:
        store.close()
    assert "only" in served.remote("alice", "resume", str(blocked), expect=1)
    said = served.remote("admin", "resume", str(blocked))
    assert said == f"job {blocked}: waits at awaiting_run_approval again for a decision\n"
