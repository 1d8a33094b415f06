"""What a Claude Code turn can reach: only what it needs; no secret gets into cairn's records."""

from __future__ import annotations

import base64
import json
import zlib
from pathlib import Path

import pytest
import sqlalchemy as sa
from tests.agents.claude.support import agent_state, point_at, submit_claude, write

from cairn.store.schema import metadata
from cairn.testing import ScriptedAnthropicServer, ToolUse, text_reply, tool_use_reply
from cairn.testing.harness import Cairn

DEPLOY_TOKEN = "tok-0a1b2c3d4e5f6a7b8c9d"


def _bash(command: str) -> ToolUse:
    return ToolUse("Bash", {"command": command, "description": "look around"})


def _every_row(cairn: Cairn) -> str:
    """Every table of the store as text, the saved session file decompressed into it."""
    dumped = []
    with cairn.store.begin() as conn:
        for table in metadata.sorted_tables:
            dumped += [dict(row._mapping) for row in conn.execute(sa.select(table))]
    text = json.dumps(dumped, default=str)
    for row in dumped:
        saved = (
            (row.get("state") or {}).get("agent") if isinstance(row.get("state"), dict) else None
        )
        if isinstance(saved, dict) and isinstance(saved.get("session_file"), dict):
            packed = base64.b64decode(saved["session_file"]["zlib"])
            text += zlib.decompress(packed).decode()
    return text


def test_no_api_key_or_runner_secret_reaches_the_store_the_output_or_the_workspace(
    cairn: Cairn,
    anthropic_server: ScriptedAnthropicServer,
    claude_code_cli: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CAIRN_TEST_DEPLOY_TOKEN", DEPLOY_TOKEN)
    monkeypatch.setenv("GITHUB_TOKEN", DEPLOY_TOKEN)
    point_at(cairn, anthropic_server)
    key = anthropic_server.api_key
    assert key is not None
    marker = "print the environment"
    job = submit_claude(cairn, claude_code_cli, marker)
    anthropic_server.add_answers(
        marker,
        tool_use_reply(_bash("env | sort; echo key=$ANTHROPIC_API_KEY")),
        tool_use_reply(write(cairn, job, "env-seen.txt", "looked\n")),
        text_reply(f"Done; the key was {key}."),
    )
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["stage"] == "awaiting_review", detail["diagnosis"]
    seen = anthropic_server.requests_for(marker)[1].tool_results[0]
    assert f"key={key}" in seen, "the CLI holds its own key (it needs it)"
    assert DEPLOY_TOKEN not in seen and "CAIRN_" not in seen and "GITHUB_TOKEN" not in seen
    assert "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1" in seen
    stored = _every_row(cairn)
    assert "session_file" in stored and "print the environment" in stored
    shown = json.dumps(detail)
    workspace = cairn.workspace(job.id)
    files = "".join(
        p.read_text(errors="replace")
        for p in workspace.rglob("*")
        if p.is_file() and ".git" not in p.parts
    )
    for secret in (key, DEPLOY_TOKEN):
        assert secret not in stored and secret not in shown and secret not in files


def test_the_turn_writes_the_workspace_but_not_its_git_data_nor_sees_other_jobs(
    cairn: Cairn, anthropic_server: ScriptedAnthropicServer, claude_code_cli: Path
) -> None:
    point_at(cairn, anthropic_server)
    marker = "poke at the sandbox"
    job = submit_claude(cairn, claude_code_cli, marker)
    mine = cairn.config.agent_state_path(cairn.store.installation_id, job.id)
    other = cairn.config.agent_state_path(cairn.store.installation_id, 99)
    (other / "claude").mkdir(parents=True)
    (other / "claude" / "other-session.jsonl").write_text("another job's session\n")
    probe = (
        "touch .git/poked 2>/dev/null && echo git=writable || echo git=read-only; "
        f"echo home: $(ls -A {cairn.config.home}); echo states: $(ls -A {mine.parent}); "
        f"cat {other}/claude/other-session.jsonl; echo ok > inside.txt"
    )
    anthropic_server.add_answers(marker, tool_use_reply(_bash(probe)), text_reply("Poked around."))
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["stage"] == "awaiting_review", detail["diagnosis"]
    seen = anthropic_server.requests_for(marker)[1].tool_results[0]
    assert "git=read-only" in seen and not (cairn.workspace(job.id) / ".git" / "poked").exists()
    # cairn's home is covered: only the folders bound back into it show, and only this job's.
    home = seen.split("home:")[1].splitlines()[0].split()
    assert set(home) <= {"agent-state", "workspaces", "mirrors"}
    assert seen.split("states:")[1].splitlines()[0].split() == [mine.name]
    assert "another job's session" not in seen
    assert (cairn.workspace(job.id) / "inside.txt").read_text() == "ok\n"
    [activity] = agent_state(cairn, job.id)["activity"]
    assert activity["tool"] == "Bash" and activity["status"] == "ok"
    assert activity["target"].startswith("touch .git/poked")


def test_a_link_out_of_the_workspace_fails_the_turn_saying_why(
    cairn: Cairn, anthropic_server: ScriptedAnthropicServer, claude_code_cli: Path
) -> None:
    point_at(cairn, anthropic_server)
    marker = "link outside"
    job = submit_claude(cairn, claude_code_cli, marker)
    anthropic_server.add_answers(
        marker, tool_use_reply(_bash("ln -s / escape")), text_reply("Linked.")
    )
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["status"] == "failed"
    assert "escape" in detail["diagnosis"] and "leads outside the workspace" in detail["diagnosis"]
