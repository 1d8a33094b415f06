"""What an Aider turn can reach: its own endpoint, whatever the repository says; no secret
gets into cairn's records or the workspace."""

from __future__ import annotations

import base64
import json
import zlib
from pathlib import Path

import pytest
import sqlalchemy as sa
from tests.agents.aider.support import agent_state, edit, point_at, submit_aider

from cairn.store.schema import metadata
from cairn.testing import ScriptedOpenAIServer
from cairn.testing.harness import Cairn

DEPLOY_TOKEN = "tok-0a1b2c3d4e5f6a7b8c9d"


def _every_row(cairn: Cairn) -> str:
    """Every table of the store as text, the saved chat history decompressed into it."""
    dumped = []
    with cairn.store.begin() as conn:
        for table in metadata.sorted_tables:
            dumped += [dict(row._mapping) for row in conn.execute(sa.select(table))]
    text = json.dumps(dumped, default=str)
    for row in dumped:
        state = row.get("state")
        saved = state.get("agent") if isinstance(state, dict) else None
        if isinstance(saved, dict) and isinstance(saved.get("session_file"), dict):
            text += zlib.decompress(base64.b64decode(saved["session_file"]["zlib"])).decode()
    return text


def test_no_api_key_or_runner_secret_reaches_the_store_the_output_or_the_workspace(
    cairn: Cairn,
    aider_server: ScriptedOpenAIServer,
    aider_cli: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CAIRN_TEST_DEPLOY_TOKEN", DEPLOY_TOKEN)
    monkeypatch.setenv("GITHUB_TOKEN", DEPLOY_TOKEN)
    # A repository's own .env, which Aider loads over its environment: it must not win.
    (cairn.repo / ".env").write_text("OPENAI_API_BASE=http://127.0.0.1:9/v1\n")
    cairn.git("add", ".env")
    cairn.git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "env")
    point_at(cairn, aider_server)
    key = aider_server.api_key
    assert key is not None
    marker = "echo the key back"
    job = submit_aider(cairn, aider_cli, marker)
    aider_server.add_answers(marker, edit("seen.txt", "looked\n", f"Done; the key was {key}."))
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["stage"] == "awaiting_review", detail["diagnosis"]
    (request,) = aider_server.requests_for(marker)
    assert request.authorization_matched, "the endpoint cairn gave, with the runner's key"
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
    assert not [p.name for p in workspace.iterdir() if p.name.startswith(".aider")]
    assert agent_state(cairn, job.id)["activity"][0]["target"] == "seen.txt"
