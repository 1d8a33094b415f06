"""Rule 9 for Aider: a stream lost for good. Aider then applies whatever edit blocks the cut
answer held and exits 0; cairn reads its last error (no retry after it) as `interrupted`, and
the workspace decides: verification of the change, or a new attempt in the same history."""

from __future__ import annotations

import json
from pathlib import Path

from tests.agents.aider.support import (
    GIVE_UP,
    agent_state,
    dropped,
    edit,
    point_at,
    submit_aider,
    user_texts,
    whole,
)

from cairn.agents.cli_turn import CONTINUE
from cairn.testing import ScriptedOpenAIServer
from cairn.testing.harness import Cairn


def _outcomes(cairn: Cairn, job_id: int) -> list[object]:
    runs = [s for s in cairn.detail(job_id)["stages"] if s["name"] == "running_agent"]
    return [run["evidence"]["outcome"]["value"] for run in runs]


def test_rule_9_lost_stream_after_a_file_was_written_goes_to_verification(
    cairn: Cairn, aider_server: ScriptedOpenAIServer, aider_cli: Path
) -> None:
    point_at(cairn, aider_server)
    marker = "edit then lose the stream"
    job = submit_aider(cairn, aider_cli, marker)
    block = whole("log.txt", "once\n")
    answer = f"Writing it.\n\n{block}\nAnd a summary that never arrives.\n"
    aider_server.add_answers(marker, *[dropped(answer, "once\n```\n")] * GIVE_UP)
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["stage"] == "awaiting_review", detail["diagnosis"]
    assert (cairn.workspace(job.id) / "log.txt").read_text() == "once\n"
    assert len(aider_server.requests_for(marker)) == GIVE_UP, "no second turn, no second edit"
    assert _outcomes(cairn, job.id) == ["interrupted"]
    assert "applied the part of the answer that arrived, to log.txt" in json.dumps(detail)
    state = agent_state(cairn, job.id)
    assert len(state["invocations"]) == 1
    assert state["activity"] == [{"tool": "edit", "target": "log.txt", "status": "ok"}]


def test_rule_9_lost_stream_before_any_change_starts_a_new_attempt(
    cairn: Cairn, aider_server: ScriptedOpenAIServer, aider_cli: Path
) -> None:
    point_at(cairn, aider_server)
    marker = "lose the stream before any change"
    job = submit_aider(cairn, aider_cli, marker)
    answer = "Let me think about where this goes, and then write it.\n"
    aider_server.add_answers(
        marker, *[dropped(answer, "Let me")] * GIVE_UP, edit("n.txt", "n\n", "wrote n.txt")
    )
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["stage"] == "awaiting_review", detail["diagnosis"]
    assert _outcomes(cairn, job.id) == ["interrupted", "changed"]
    assert (cairn.workspace(job.id) / "n.txt").read_text() == "n\n"
    again = aider_server.requests_for(marker)[-1]
    texts = user_texts(again)
    assert any(text.startswith(marker) for text in texts[:-1]), "the same history, restored"
    assert texts[-1].startswith(CONTINUE)
    first, second = agent_state(cairn, job.id)["invocations"]
    assert "--no-restore-chat-history" in first and "--restore-chat-history" in second
