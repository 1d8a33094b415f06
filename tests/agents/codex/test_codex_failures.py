"""Codex CLI turns refused: a refused key fails the job saying which variable to fix, a missing
binary saying how to install or name it. (Turns cut off are rule 9's twins, in
test_lifecycle_rules_codex.py.)"""

from __future__ import annotations

import json
from pathlib import Path

from tests.agents.codex.support import point_at, submit_codex

from cairn.testing import ScriptedResponsesServer, text_answer
from cairn.testing.harness import Cairn


def test_a_refused_key_fails_the_job_saying_which_variable_to_fix(
    cairn: Cairn, responses_server: ScriptedResponsesServer, codex_cli: Path
) -> None:
    point_at(cairn, responses_server)
    wrong = "sk-wrong-key-00112233445566778899"
    environment = {**cairn.config.environment, "OPENAI_API_KEY": wrong}
    cairn.config = cairn.config.model_copy(update={"environment": environment})
    job = submit_codex(cairn, codex_cli, "refused key")
    responses_server.add_answers("refused key", text_answer("never"))
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["status"] == "failed"
    assert "OPENAI_API_KEY" in detail["diagnosis"] and "HTTP 401" in detail["diagnosis"]
    assert wrong not in json.dumps(detail) and "127.0.0.1" not in detail["diagnosis"]


def test_a_missing_binary_fails_the_job_saying_how_to_install_or_name_it(
    cairn: Cairn, responses_server: ScriptedResponsesServer, tmp_path: Path
) -> None:
    point_at(cairn, responses_server)
    job = submit_codex(cairn, tmp_path / "no-such" / "codex", "no binary here")
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["status"] == "failed"
    assert "codex CLI is not installed on this runner" in detail["diagnosis"]
    assert "--command" in detail["diagnosis"] and str(tmp_path) not in detail["diagnosis"]
    assert responses_server.requests == ()
