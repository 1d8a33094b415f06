"""The lifecycle rules of DESIGN.md on the real Aider CLI: the twins of
tests/jobs/test_lifecycle_rules_openai.py (and of the Claude Code ones), against
ScriptedOpenAIServer over real HTTP. Aider has no session ids: a job's session is its chat
history file, kept in the job's context by cairn. Rule 9's twins are in
test_aider_lost_stream.py."""

from __future__ import annotations

import base64
import json
import zlib
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from tests.agents.aider.support import (
    MODEL,
    agent_state,
    dependency,
    edit,
    point_at,
    request_file,
    submit_aider,
    user_texts,
    whole,
)

from cairn.agents.registry import load_agent_spec
from cairn.jobs.agent_turns import CORRECTIVE_NOTE
from cairn.jobs.submit import submit_job
from cairn.sanitize import user_sanitizer
from cairn.stages import Stage, Status
from cairn.store.records import Job
from cairn.store.schema import contexts
from cairn.testing import Answer, ScriptedOpenAIServer, text_answer
from cairn.testing.harness import Cairn

_RESTORE = "--restore-chat-history"
_NO_RESTORE = "--no-restore-chat-history"


def _restores(cairn: Cairn, job_id: int) -> list[bool]:
    """Each of the job's turns: whether it re-sent the job's history."""
    invocations = agent_state(cairn, job_id)["invocations"]
    assert all((_RESTORE in flags) != (_NO_RESTORE in flags) for flags in invocations)
    return [_RESTORE in flags for flags in invocations]


def _history(cairn: Cairn, job_id: int) -> str:
    """The chat history file as the job's context keeps it (Aider's session)."""
    saved = agent_state(cairn, job_id)["session_file"]
    return zlib.decompress(base64.b64decode(saved["zlib"])).decode("utf-8")


def _replies(request: Any) -> list[str]:
    """The assistant messages of a recorded request, in order."""
    return [m["content"] for m in request.messages if m["role"] == "assistant"]


def _openings(request: Any, marker: str) -> list[str]:
    """The user messages of a recorded request that open a job whose request is `marker`."""
    return [text for text in user_texts(request) if text.startswith(marker)]


def _edit_and_ask(cairn: Cairn, job: Job, path: str, content: str) -> Answer:
    """An answer that writes `path` whole and asks for termcolor in the same reply."""
    ask = {"ecosystem": "pypi", "name": "termcolor", "version": "2.4.0", "reason": "colour"}
    asked = whole(str(request_file(cairn, job)), json.dumps(ask) + "\n")
    return text_answer(f"Writing it, and I need termcolor.\n\n{whole(path, content)}\n{asked}")


def test_rule_1_job_specific_continuity(
    cairn: Cairn, aider_server: ScriptedOpenAIServer, aider_cli: Path
) -> None:
    """A paused job resumes its own history even after another job ran in the room."""
    point_at(cairn, aider_server)
    a = submit_aider(cairn, aider_cli, "job A")
    aider_server.add_answers(
        "job A",
        _edit_and_ask(cairn, a, "a.txt", "from job A\n"),
        edit("a2.txt", "after approval\n", "job A done."),
    )
    cairn.work()
    assert cairn.job(a.id).stage is Stage.awaiting_dependency_approval, cairn.detail(a.id)
    b = submit_aider(cairn, aider_cli, "job B")
    aider_server.add_answers("job B", edit("b.txt", "B\n", "job B done."))
    cairn.work()
    cairn.approve(b.id)
    cairn.work()
    assert cairn.job(b.id).status is Status.completed, cairn.detail(b.id)["diagnosis"]
    cairn.approve(a.id)
    cairn.work()
    detail = cairn.detail(a.id)
    assert detail["stage"] == "awaiting_review", detail["diagnosis"]
    seen = aider_server.requests_for("job A")
    assert len(seen) == 2 and not any("job B" in request.text for request in seen)
    asked, resumed = seen
    (opening,) = _openings(asked, "job A")
    (restored,) = _openings(resumed, "job A")
    assert " ".join(opening.split()).startswith(" ".join(restored.split())), "its own history"
    assert any("from job A" in reply for reply in _replies(resumed)), "its own earlier answer"
    assert "termcolor==2.4.0" in user_texts(resumed)[-1]
    assert _restores(cairn, a.id) == [False, True]
    assert "job B" not in _history(cairn, a.id) and "job A" not in _history(cairn, b.id)
    workspace = cairn.workspace(a.id)
    assert (workspace / "a.txt").read_text() == "from job A\n"
    assert (workspace / "a2.txt").read_text() == "after approval\n"


def test_rule_1_a_job_without_saved_context_starts_fresh_with_one_copy_of_its_request(
    cairn: Cairn, aider_server: ScriptedOpenAIServer, aider_cli: Path
) -> None:
    point_at(cairn, aider_server)
    marker = "job with a lost context"
    job = submit_aider(cairn, aider_cli, marker)
    aider_server.add_answers(
        marker, dependency(cairn, job), edit("fresh.txt", "went on fresh\n", "went on fresh")
    )
    cairn.work()
    assert cairn.job(job.id).stage is Stage.awaiting_dependency_approval, cairn.detail(job.id)
    assert '"termcolor"' in _history(cairn, job.id), "a history of its own, about to be lost"
    with cairn.store.begin() as conn:  # the job's context is lost (an old record, a lost row)
        conn.execute(sa.delete(contexts).where(contexts.c.job_id == job.id))
    cairn.approve(job.id)
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["stage"] == "awaiting_review", detail["diagnosis"]
    seen = aider_server.requests_for(marker)
    assert len(seen) == 2
    fresh = seen[1]
    assert fresh.text.count(marker) == 1, "one sanitized copy of its request"
    assert not any('"termcolor"' in reply for reply in _replies(fresh)), "no earlier history"
    opening = user_texts(fresh)[-1]
    assert opening.startswith(marker) and "termcolor==2.4.0 was approved" in opening
    [flags] = agent_state(cairn, job.id)["invocations"]
    assert _NO_RESTORE in flags and _RESTORE not in flags
    # The host's old history file was not picked up either: the saved one starts anew.
    history = _history(cairn, job.id)
    assert history.count(marker) == 1 and '"termcolor"' not in history
    assert (cairn.workspace(job.id) / "fresh.txt").read_text() == "went on fresh\n"


def test_rule_7_first_edit_must_edit_fails_a_second_unchanged_result(
    cairn: Cairn, aider_server: ScriptedOpenAIServer, aider_cli: Path
) -> None:
    point_at(cairn, aider_server)
    marker = "look around only"
    job = submit_aider(cairn, aider_cli, marker)
    aider_server.add_answers(
        marker,
        text_answer("I looked around; nothing needs to change.\n"),
        text_answer("Still only looked.\n"),
    )
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["status"] == "failed" and "second unchanged result" in detail["diagnosis"]
    assert detail["usage"]["agent_runs"] == 2 and detail["usage"]["corrective_runs"] == 1
    first, corrective = aider_server.requests_for(marker)
    (opening,) = _openings(first, marker)
    (restored,) = _openings(corrective, marker)
    assert " ".join(opening.split()).startswith(" ".join(restored.split())), "the same history"
    assert any("I looked around" in reply for reply in _replies(corrective))
    assert CORRECTIVE_NOTE in user_texts(corrective)[-1]
    assert _restores(cairn, job.id) == [False, True]
    before, again = agent_state(cairn, job.id)["invocations"]
    assert _same_authority(before) == _same_authority(again), "no wider authority"


def _same_authority(flags: list[str]) -> list[str]:
    """A turn's flags but for the history choice and the per-turn endpoint (egress proxy)."""
    kept = [flag for flag in flags if flag not in (_RESTORE, _NO_RESTORE)]
    at = kept.index("--openai-api-base")
    return kept[:at] + kept[at + 2 :]


def test_rule_8_fresh_context_for_scheduled_work(
    cairn: Cairn, aider_server: ScriptedOpenAIServer, aider_cli: Path
) -> None:
    """A scheduled run's history holds nothing of an earlier run's: a fresh start each time."""
    point_at(cairn, aider_server)
    first = _submit_scheduled(cairn, aider_cli)
    aider_server.add_answers(
        "nightly", edit("b.txt", "first run secret-ish content\n", "first run's own words")
    )
    cairn.work()
    cairn.approve(first.id)
    cairn.work()
    assert cairn.job(first.id).status is Status.completed, cairn.detail(first.id)["diagnosis"]
    second = _submit_scheduled(cairn, aider_cli)
    aider_server.add_answers("nightly", edit("c.txt", "second\n", "run 2"))
    cairn.work()
    assert cairn.job(second.id).stage is Stage.awaiting_review, cairn.detail(second.id)
    earlier, opening = aider_server.requests_for("nightly")
    (request,) = _openings(opening, "nightly")
    # The bounded reference set: the repository's documents and the earlier run's result...
    assert "--- README.md ---" in request and "The previous run (job 1" in request
    # ...never its history: no answer it got, no content it wrote.
    body = json.dumps(opening.body)
    assert "secret-ish" not in body and "first run's own words" not in body
    assert len(_replies(opening)) == len(_replies(earlier)), "only Aider's own examples"
    assert _restores(cairn, first.id) == [False] and _restores(cairn, second.id) == [False]
    assert "secret-ish" not in _history(cairn, second.id)
    sessions = {agent_state(cairn, job.id)["session_id"] for job in (first, second)}
    assert len(sessions) == 2


def _submit_scheduled(cairn: Cairn, cli: Path) -> Job:
    spec = {**load_agent_spec(f"aider:{MODEL}"), "command": str(cli), "edit_format": "whole"}
    with cairn.store.begin() as conn:
        return submit_job(
            conn,
            room="sample",
            text="nightly",
            agent=spec,
            actor="alice",
            sanitizer=user_sanitizer(cairn.config),
            kind="scheduled",
        )
