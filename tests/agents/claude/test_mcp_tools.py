"""cairn's MCP server over real stdio, through the official SDK's client: `request_dependency`
records the exact ask for cairn and tells the agent to end its turn."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from cairn.agents import mcp_tools
from cairn.agents.base import DependencyAsk


async def _call(requests: Path, arguments: dict[str, Any]) -> tuple[list[str], str]:
    config = mcp_tools.server_config(sys.executable, requests)
    params = StdioServerParameters(command=config["command"], args=config["args"])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = [tool.name for tool in (await session.list_tools()).tools]
        result: Any = await session.call_tool(mcp_tools.TOOL_NAME, arguments)
        return tools, " ".join(getattr(part, "text", "") for part in result.content)


def test_request_dependency_records_the_ask_and_tells_the_agent_to_end_its_turn(
    tmp_path: Path,
) -> None:
    requests = tmp_path / "cairn-requests"
    ask = {"ecosystem": "pypi", "name": "termcolor", "version": "2.4.0", "reason": "colour"}
    tools, told = asyncio.run(_call(requests, ask))
    assert tools == ["request_dependency"]
    assert "pypi termcolor==2.4.0" in told and "End your turn now" in told
    assert mcp_tools.take_request(requests) == DependencyAsk("pypi", "termcolor", "2.4.0", "colour")
    assert mcp_tools.take_request(requests) is None, "taken once"


def test_a_request_left_by_an_earlier_turn_is_cleared(tmp_path: Path) -> None:
    mcp_tools.record_request(tmp_path, DependencyAsk("npm", "left-pad", "1.3.0", "old"))
    mcp_tools.clear_requests(tmp_path)
    assert mcp_tools.take_request(tmp_path) is None
