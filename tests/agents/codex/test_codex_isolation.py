"""What a Codex CLI turn can reach: only its model endpoint; no secret reaches cairn's records."""

from __future__ import annotations

import base64
import json
import re
import zlib
from pathlib import Path

import pytest
import sqlalchemy as sa
from tests.agents.codex.support import add_file, agent_state, point_at, submit_codex

from cairn.store.schema import metadata
from cairn.testing import ScriptedResponsesServer, ToolCall, text_answer, tool_call_answer
from cairn.testing.harness import Cairn
from cairn.testing.silent_server import SilentServer

DEPLOY_TOKEN = "tok-0a1b2c3d4e5f6a7b8c9d"


def _exec(command: str) -> ToolCall:
    return ToolCall("exec_command", {"cmd": command})


def _every_row(cairn: Cairn) -> str:
    """Every table of the store as text, the saved rollout file decompressed into it."""
    dumped = []
    with cairn.store.begin() as conn:
        for table in metadata.sorted_tables:
            dumped += [dict(row._mapping) for row in conn.execute(sa.select(table))]
    text = json.dumps(dumped, default=str)
    for row in dumped:
        state = row.get("state")
        saved = state.get("agent") if isinstance(state, dict) else None
        if isinstance(saved, dict) and isinstance(saved.get("session_file"), dict):
            packed = base64.b64decode(saved["session_file"]["zlib"])
            text += zlib.decompress(packed).decode()
    return text


def test_no_api_key_or_runner_secret_reaches_the_store_the_output_or_the_workspace(
    cairn: Cairn,
    responses_server: ScriptedResponsesServer,
    codex_cli: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CAIRN_TEST_DEPLOY_TOKEN", DEPLOY_TOKEN)
    monkeypatch.setenv("GITHUB_TOKEN", DEPLOY_TOKEN)
    point_at(cairn, responses_server)
    key = responses_server.api_key
    assert key is not None
    marker = "print the environment"
    job = submit_codex(cairn, codex_cli, marker)
    responses_server.add_answers(
        marker,
        tool_call_answer(_exec("env | sort; echo key=$OPENAI_API_KEY")),
        tool_call_answer(add_file("env-seen.txt", "looked\n")),
        text_answer(f"Done; the key was {key}."),
    )
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["stage"] == "awaiting_review", detail["diagnosis"]
    [seen] = responses_server.requests_for(marker)[1].tool_outputs.values()
    assert "key=\n" in seen or seen.rstrip().endswith("key="), "the model's commands lack the key"
    assert DEPLOY_TOKEN not in seen and "CAIRN_" not in seen and "GITHUB_TOKEN" not in seen
    stored = _every_row(cairn)
    assert "session_file" in stored and marker in stored
    shown = json.dumps(detail)
    workspace = cairn.workspace(job.id)
    files = "".join(
        p.read_text(errors="replace")
        for p in workspace.rglob("*")
        if p.is_file() and ".git" not in p.parts
    )
    for secret in (key, DEPLOY_TOKEN):
        assert secret not in stored and secret not in shown and secret not in files
    [listed, patched] = agent_state(cairn, job.id)["activity"]
    assert listed["tool"] == "exec_command" and listed["target"].startswith("env | sort")
    assert patched == {"tool": "apply_patch", "target": "env-seen.txt", "status": "ok"}


def test_the_turns_commands_reach_no_address_but_the_model_endpoint(
    cairn: Cairn, responses_server: ScriptedResponsesServer, codex_cli: Path
) -> None:
    point_at(cairn, responses_server)
    marker = "try the network"
    other = SilentServer()
    try:
        job = submit_codex(cairn, codex_cli, marker)
        probes = "; ".join(
            f"curl -sSf -m 5 -o /dev/null {target} 2>/dev/null; echo {name}=$?"
            for name, target in {
                "loopback": f"http://127.0.0.1:{other.port}/",
                "external_ip": "http://192.0.2.10/",
                "external_host": "https://example.com/",
            }.items()
        )
        responses_server.add_answers(
            marker,
            tool_call_answer(_exec(probes)),
            tool_call_answer(add_file("tried.txt", "tried\n")),
            text_answer("Tried it."),
        )
        cairn.work()
        detail = cairn.detail(job.id)
        assert detail["stage"] == "awaiting_review", detail["diagnosis"]
        [seen] = responses_server.requests_for(marker)[1].tool_outputs.values()
        exits = dict(re.findall(r"(\w+)=(\d+)", seen))
        assert set(exits) == {"loopback", "external_ip", "external_host"}, seen
        # 127 would be "no curl": a probe that never ran proves nothing.
        assert "127" not in exits.values(), "curl must be installed (make test installs it)"
        assert all(code != "0" for code in exits.values()), exits
        assert other.accepted == 0
    finally:
        other.close()
