"""A CLI turn's network is its model endpoint only: everything else fails inside the sandbox."""

from __future__ import annotations

import re
from pathlib import Path

from tests.agents.claude.support import point_at, submit_claude, write

from cairn.testing import ScriptedAnthropicServer, ToolUse, text_reply, tool_use_reply
from cairn.testing.harness import Cairn
from cairn.testing.silent_server import SilentServer

EXTERNAL_IP = "192.0.2.10"  # TEST-NET-1: never routed, so no traffic leaves even on a leak


def _probes(other_port: int) -> str:
    """curl to every kind of address but the model endpoint, each followed by its exit code."""
    targets = {
        "loopback": f"http://127.0.0.1:{other_port}/",
        "loopback_via_proxy": f'--proxy "$HTTP_PROXY" http://127.0.0.1:{other_port}/',
        "external_ip": f"http://{EXTERNAL_IP}/",
        "external_ip_direct": f"--noproxy '*' http://{EXTERNAL_IP}/",
        "external_host": "https://example.com/",
    }
    return "; ".join(
        f"curl -sSf -m 5 -o /dev/null {target} 2>/dev/null; echo {name}=$?"
        for name, target in targets.items()
    )


def test_a_turn_reaches_its_model_endpoint_and_nothing_else(
    cairn: Cairn, anthropic_server: ScriptedAnthropicServer, claude_code_cli: Path
) -> None:
    point_at(cairn, anthropic_server)
    marker = "try the network"
    other = SilentServer()  # another port of this host, listening
    try:
        job = submit_claude(cairn, claude_code_cli, marker)
        probe = ToolUse("Bash", {"command": _probes(other.port), "description": "network"})
        anthropic_server.add_answers(
            marker,
            tool_use_reply(probe),
            tool_use_reply(write(cairn, job, "tried.txt", "tried\n")),
            text_reply("Tried it."),
        )
        cairn.work()
        detail = cairn.detail(job.id)
        # The turn completed: every one of its model calls reached the endpoint from inside.
        assert detail["stage"] == "awaiting_review", detail["diagnosis"]
        seen = anthropic_server.requests_for(marker)
        assert len(seen) == 3
        exits = dict(re.findall(r"(\w+)=(\d+)", seen[1].tool_results[0]))
        assert set(exits) == {
            "loopback",
            "loopback_via_proxy",
            "external_ip",
            "external_ip_direct",
            "external_host",
        }
        # 127 would be "no curl": a probe that never ran proves nothing.
        assert "127" not in exits.values(), "curl must be installed (make test installs it)"
        assert all(code != "0" for code in exits.values()), exits
        assert other.accepted == 0, "nothing inside reached the host's other port"
    finally:
        other.close()
