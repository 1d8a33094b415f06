"""Secrets and local paths an agent or command prints never reach what a person can read.

Each test plants generated secrets (every kind, see leaks.py) in what a script job says or
prints: a `fail:` message, a `run` command's output, the finish summary, a dependency
request's reason, the request text, a verify command's output, a reviewer's reason. It then
reads every user-visible column of the store (SQLAlchemy), the detail `cairn show --json`
prints (built by the same view code) and, once, the real CLI's `--json` output.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import sqlalchemy as sa
import yaml
from hypothesis import HealthCheck, given, settings

from cairn.agents import parse_script, script_to_data
from cairn.store import schema
from cairn.testing.harness import Cairn

from .leaks import Planted, assert_no_leak, planted_texts

# The columns a person can read, directly or through `cairn show` / `cairn jobs`.
VISIBLE = {
    schema.jobs: ("summary", "diagnosis"),
    schema.requests: ("text",),
    schema.decisions: ("reason", "policy"),
    schema.dependency_requests: ("name", "version", "reason"),
    schema.stage_runs: ("evidence",),
    schema.effects: ("external_ref",),
}
# Job paths read their secrets from the runner's environment; configured secrets are not wired
# into jobs yet, so the planted text carries environment values and secret shapes.
JOB_TEXTS = planted_texts(configured=False)
JOB_SETTINGS = settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def visible_rows(cairn: Cairn, job_id: int) -> list[Any]:
    """Every user-visible value the store holds about one job."""
    values: list[Any] = []
    with cairn.store.begin() as conn:
        request_id = conn.execute(
            sa.select(schema.jobs.c.request_id).where(schema.jobs.c.id == job_id)
        ).scalar_one()
        for table, columns in VISIBLE.items():
            if table is schema.requests:
                where = table.c.id == request_id
            else:
                where = (table.c.id if table is schema.jobs else table.c.job_id) == job_id
            rows = conn.execute(sa.select(*(table.c[name] for name in columns)).where(where))
            values += [value for row in rows for value in row]
    return values


def shown_for(cairn: Cairn, job_id: int) -> list[Any]:
    """What a person can read about a job: the store's visible columns and its detail view."""
    return [*visible_rows(cairn, job_id), cairn.detail(job_id)]


def _unchecked_spec(argument: str) -> dict[str, Any]:
    """A script spec as `load_agent_spec` builds it, without its refusal of credentials."""
    text = Path(argument.partition(":")[2]).read_text()
    return {"adapter": "script", "script": script_to_data(parse_script(text))}


def run_job(cairn: Cairn, planted: Planted, steps: list[Any], text: str = "Change it") -> int:
    """Submit a script job with `steps` and run it, with the planted environment in place.

    A script carrying a secret is refused at submit (test_cli_input); the runner must still mask
    what an agent says when its words are made at run time (another adapter, an older request),
    so these jobs skip that refusal.
    """
    with (
        mock.patch.dict(os.environ, planted.environ),
        mock.patch("cairn.testing.harness.load_agent_spec", _unchecked_spec),
    ):
        job = cairn.submit(yaml.safe_dump({"steps": steps}), text)
        cairn.work()
    return job.id


def _local_paths(cairn: Cairn) -> list[str]:
    return [str(cairn.tmp), str(cairn.tmp.resolve()), str(cairn.config.home)]


def assert_private(cairn: Cairn, planted: Planted, job_id: int) -> None:
    shown = shown_for(cairn, job_id)
    assert_no_leak(planted, shown)
    flat = repr(shown)
    for path in _local_paths(cairn):
        assert path not in flat, f"a local path is visible: {path}"


PATHS: dict[str, Callable[[Planted], list[Any]]] = {
    "fail message": lambda p: [{"write": {"path": "a.txt", "content": "a"}}, {"fail": p.text}],
    "run output": lambda p: [
        {"write": {"path": "out.txt", "content": p.text}},
        {"run": "pwd; echo $HOME; cat out.txt; exit 3"},
    ],
    "finish summary": lambda p: [
        {"write": {"path": "a.txt", "content": "a"}},
        {"finish": {"summary": p.text}},
    ],
    "dependency reason": lambda p: [
        {"write": {"path": "a.txt", "content": "a"}},
        {
            "request_dependency": {
                "ecosystem": "pypi",
                "name": "rich",
                "version": "13.7.1",
                "reason": p.text,
            }
        },
    ],
}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_what_an_agent_says_or_prints_is_masked(cairn: Cairn, path: str) -> None:
    @JOB_SETTINGS
    @given(planted=JOB_TEXTS)
    def property_holds(planted: Planted) -> None:
        job_id = run_job(cairn, planted, PATHS[path](planted))
        assert cairn.detail(job_id)["status"] in ("failed", "waiting"), cairn.detail(job_id)
        assert_private(cairn, planted, job_id)

    property_holds()


def test_the_request_text_is_masked_when_it_is_stored(cairn: Cairn) -> None:
    @JOB_SETTINGS
    @given(planted=JOB_TEXTS)
    def property_holds(planted: Planted) -> None:
        steps = [{"write": {"path": "a.txt", "content": "a"}}, {"finish": {"summary": "done"}}]
        job_id = run_job(cairn, planted, steps, text=f"Please fix this:\n{planted.text}")
        assert_private(cairn, planted, job_id)

    property_holds()


def test_a_verify_command_output_is_masked(cairn: Cairn) -> None:
    with cairn.store.begin() as conn:
        conn.execute(sa.update(schema.rooms).values(verify_command="cat out.txt; exit 1"))

    @JOB_SETTINGS
    @given(planted=JOB_TEXTS)
    def property_holds(planted: Planted) -> None:
        steps = [{"write": {"path": "out.txt", "content": planted.text}}, {"finish": {}}]
        job_id = run_job(cairn, planted, steps)
        assert cairn.detail(job_id)["status"] == "failed"
        assert_private(cairn, planted, job_id)

    property_holds()


def test_a_reviewers_reason_is_masked_in_the_decision_ledger(cairn: Cairn) -> None:
    planted = Planted(
        text="rejected: the diff prints ghp_" + "Z9y8X7w6" * 5,
        secrets=("Z9y8X7w6" * 5,),
    )
    job_id = run_job(cairn, planted, [{"write": {"path": "a.txt", "content": "a"}}, {"finish": {}}])
    cairn.reject(job_id, planted.text)
    assert_private(cairn, planted, job_id)


def test_a_refused_dependency_request_does_not_echo_what_the_agent_sent(cairn: Cairn) -> None:
    secret = "ghp_" + "Q1w2E3r4" * 5
    steps = [
        {"write": {"path": "a.txt", "content": "a"}},
        {
            "request_dependency": {
                "ecosystem": "pypi",
                "name": "rich",
                "version": f"https://x:{secret}@example.com/rich.tar.gz",
                "reason": "colour",
            }
        },
    ]
    job_id = run_job(cairn, Planted(text="", secrets=(secret,)), steps)
    detail = cairn.detail(job_id)
    assert detail["status"] == "failed" and "not one exact version" in detail["diagnosis"]
    assert_private(cairn, Planted(text="", secrets=(secret, secret[4:])), job_id)
