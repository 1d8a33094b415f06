"""cairn's own tools for a coding CLI, over MCP: `request_dependency`.

A stdio MCP server (the official `mcp` SDK) that cairn starts for one turn of a CLI agent:

    python -m cairn.agents.mcp_tools --requests FOLDER

Calling `request_dependency {ecosystem, name, version, reason}` records the ask as one JSON
file in FOLDER (a cairn-owned folder of the job's private state) and tells the agent to end
its turn; after the turn cairn reads the file and the job waits at the dependency gate. The
decision comes back when cairn resumes the same session, as a note naming the exact version.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cairn.agents.base import DependencyAsk

SERVER_NAME = "cairn"
TOOL_NAME = "request_dependency"
REQUEST_FILE = "dependency-request.json"
ASKED = (
    "cairn recorded the request for {label}. End your turn now, without further tool calls: "
    "a person decides on it, and this session resumes with the decision."
)
_FIELD_LIMIT = 2000


def tool_name_in(cli_prefix: str) -> str:
    """The tool's name as a CLI shows it to its model (Claude Code: `mcp__cairn__...`)."""
    return f"{cli_prefix}{SERVER_NAME}__{TOOL_NAME}"


def server_config(python: str, requests: Path) -> dict[str, Any]:
    """The stdio server entry a CLI's MCP configuration names for this turn."""
    return {
        "type": "stdio",
        "command": python,
        "args": ["-m", "cairn.agents.mcp_tools", "--requests", str(requests)],
        "env": {"PYTHONDONTWRITEBYTECODE": "1"},
    }


def record_request(folder: Path, ask: DependencyAsk) -> None:
    """Write the ask atomically: a turn that ends mid-write leaves no half a request."""
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f".{REQUEST_FILE}.partial"
    partial.write_text(json.dumps(ask.__dict__), encoding="utf-8")
    os.replace(partial, folder / REQUEST_FILE)


def take_request(folder: Path) -> DependencyAsk | None:
    """The ask recorded during the turn, removed so it is taken once; None when there is none."""
    path = folder / REQUEST_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    path.unlink(missing_ok=True)
    if not isinstance(data, dict):
        return None
    fields = [str(data.get(key) or "")[:_FIELD_LIMIT] for key in DependencyAsk.__annotations__]
    return DependencyAsk(*fields)


def clear_requests(folder: Path) -> None:
    """Forget an ask left from an earlier turn (it was settled then)."""
    (folder / REQUEST_FILE).unlink(missing_ok=True)


def build_server(requests: Path) -> Any:
    """The MCP server offering `request_dependency`, recording into `requests`."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer(
        SERVER_NAME,
        instructions="cairn's tools: ask for a new package with request_dependency.",
    )

    @server.tool(
        name=TOOL_NAME,
        description=(
            "Ask cairn for a package the task needs that is not installed yet: its ecosystem "
            "(pypi or npm), exact name and exact version, and why. A person approves or "
            "rejects it; end your turn right after calling this."
        ),
    )
    def request_dependency(ecosystem: str, name: str, version: str, reason: str) -> str:
        ask = DependencyAsk(ecosystem.strip(), name.strip(), version.strip(), reason.strip())
        record_request(requests, ask)
        return ASKED.format(label=f"{ask.ecosystem} {ask.name}=={ask.version}")

    return server


def main(argv: Sequence[str] | None = None) -> None:
    """Serve the tools over stdio until the CLI closes the connection."""
    parser = argparse.ArgumentParser(prog="python -m cairn.agents.mcp_tools")
    parser.add_argument("--requests", type=Path, required=True)
    options = parser.parse_args(argv)
    build_server(options.requests).run("stdio")


if __name__ == "__main__":
    main()
