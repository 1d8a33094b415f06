"""`cairn agent check NAME` as an API client: the spec comes from the server, the check runs
here, with this machine's environment (the server has no route that runs a check)."""

from __future__ import annotations

import json

from authority.conftest import cli, strict_home  # noqa: F401
from cairn.agents.checks import CHECK_MARKER
from cairn.testing import ScriptedOpenAIServer
from cairn.testing.openai_script import ToolCall, text_answer, tool_call_answer
from cairn.testing.openai_server import TEST_API_KEY
from cli_remote.test_remote_cli import Served, served  # noqa: F401


def test_a_named_agent_is_checked_here_with_its_spec_from_the_server(
    served: Served,  # noqa: F811
    openai_server: ScriptedOpenAIServer,
) -> None:
    served.remote("admin", "agent", "add", "qwen", "--adapter", "openai", "--model", "q")
    openai_server.add_answers(
        CHECK_MARKER, text_answer("OK"), tool_call_answer(ToolCall("report_ok"))
    )
    env = {
        "CAIRN_URL": served.url,
        "CAIRN_TOKEN": served.tokens["alice"],
        "OPENAI_BASE_URL": openai_server.base_url,
        "OPENAI_API_KEY": TEST_API_KEY,
    }
    done = served.cli("agent", "check", "qwen", "--json", env=env)
    report = json.loads(done.stdout)
    assert report["ok"] is True and report["model"] == "q"
    assert TEST_API_KEY not in done.stdout
    missing = served.cli("agent", "check", "nobody", env=env, expect=2)
    assert "there is no agent named 'nobody'" in missing.stderr
