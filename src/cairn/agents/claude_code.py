"""The `claude` adapter: Claude Code (`claude -p ... --output-format stream-json`) as a cairn agent.

    {"adapter": "claude", "model": str | None, "command": str | None, "max_retries": int,
     "timeout": float}

The runner's environment gives the endpoint and key (`ANTHROPIC_BASE_URL`,
`ANTHROPIC_API_KEY`, from `Config.environment`); the spec never holds a key. `command` is the
binary (default: `claude` on PATH). Each job's session id is cairn's (`cli_session`): the first
turn starts it with `--session-id`, every later one continues it with `--resume`; Claude
Code's `--continue` ("the most recent session here") is never used. Claude Code's permission
prompts are off (`IS_SANDBOX=1`, `--dangerously-skip-permissions`) because cairn's sandbox is
the boundary, and on every turn: a resumed turn is as writable as the first.

How cairn tells a cut-off turn from a finished one: on a connection that keeps dropping,
Claude Code retries (`CLAUDE_CODE_MAX_RETRIES`, bounded here), then exits 1 with a `result`
event whose `is_error` is true although its `subtype` says `success` (its `terminal_reason`
is `api_error`). That pair is `interrupted`, never `changed`; the workspace then decides
(rule 9) whether verification goes on or a new attempt starts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.agents.base import Usage
from cairn.agents.cli_adapter import CliAgent, spec_command, spec_retries, spec_timeout
from cairn.agents.cli_agent import CliModule, CliReport, CliTurnPlan, ToolActivity
from cairn.errors import UsageError
from cairn.sanitize import secret_spans

if TYPE_CHECKING:
    pass

ADAPTER = "claude"
BASE_URL_ENV = "ANTHROPIC_BASE_URL"
API_KEY_ENV = "ANTHROPIC_API_KEY"
DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_COMMAND = "claude"
DEFAULT_MAX_RETRIES = 2
DEFAULT_TIMEOUT = 3600.0
MCP_PREFIX = "mcp__"
_MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/\[\]-]{0,99}")
_SPEC_KEYS = {"adapter", "model", "command", "max_retries", "timeout"}
# The tools whose input names a file, and the tools whose input is a command.
_PATH_INPUTS = ("file_path", "notebook_path", "path")
_COMMAND_TOOLS = ("Bash",)


def claude_spec(given: Mapping[str, Any]) -> dict[str, Any]:
    """Validate `given` (unset fields take their defaults) into a storable `claude` spec."""
    unknown = sorted(set(given) - _SPEC_KEYS)
    if unknown:
        raise UsageError(f"a claude agent has no setting {unknown[0]!r}")
    model = given.get("model")
    if model is not None and (not isinstance(model, str) or not _MODEL_NAME.fullmatch(model)):
        raise UsageError("--model names a Claude model, like claude-sonnet-4-5 (no spaces)")
    if isinstance(model, str) and secret_spans(model):
        raise UsageError("--model looks like a credential, not a model name")
    command = spec_command(given, "claude")
    retries = spec_retries(given, DEFAULT_MAX_RETRIES)
    timeout = spec_timeout(given, DEFAULT_TIMEOUT)
    return {
        "adapter": ADAPTER,
        "model": model,
        "command": command,
        "max_retries": retries,
        "timeout": timeout,
    }


class ClaudeCode:
    """Claude Code's command line, environment, event stream and session file."""

    name = ADAPTER

    def __init__(self, max_retries: int = DEFAULT_MAX_RETRIES) -> None:
        self.max_retries = max_retries

    def command_line(self, binary: str, plan: CliTurnPlan) -> list[str]:
        """A headless turn: stream-json (which needs --verbose), permissions off, cairn's MCP."""
        argv = [binary, "-p", plan.prompt, "--output-format", "stream-json", "--verbose"]
        argv += ["--dangerously-skip-permissions"]
        # Always the job's own session, by id: never --continue ("the most recent one here").
        argv += ["--resume", plan.session_id] if plan.resume else ["--session-id", plan.session_id]
        argv += ["--mcp-config", json.dumps({"mcpServers": dict(plan.mcp_config)})]
        argv += ["--strict-mcp-config"]  # no MCP server from the workspace or a user's config
        if plan.model:
            argv += ["--model", plan.model]
        return argv

    def environment(self, plan: CliTurnPlan) -> dict[str, str]:
        """The endpoint and key, the private config folder, and every other traffic off."""
        environment = {
            BASE_URL_ENV: plan.endpoint,
            "CLAUDE_CONFIG_DIR": str(plan.state_dir / "claude"),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CODE_MAX_RETRIES": str(self.max_retries),
            "DISABLE_AUTOUPDATER": "1",
            # Root refuses --dangerously-skip-permissions outside a sandbox; this is one.
            "IS_SANDBOX": "1",
        }
        if plan.api_key:
            environment[API_KEY_ENV] = plan.api_key
        return environment

    def reader(self, workspace: Path) -> ClaudeEvents:
        """A reader of one turn's stream-json."""
        return ClaudeEvents(workspace)

    def session_file(self, plan: CliTurnPlan) -> Path:
        """`$CLAUDE_CONFIG_DIR/projects/<cwd, non-alphanumerics as '-'>/<session id>.jsonl`."""
        project = re.sub(r"[^A-Za-z0-9]", "-", str(plan.workspace))
        return plan.state_dir / "claude" / "projects" / project / f"{plan.session_id}.jsonl"


class ClaudeEvents:
    """Reads Claude Code's stream-json into a bounded report; keeps no model text but the last."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.report = CliReport()
        self._calls: dict[str, ToolActivity] = {}
        self._messages: set[str] = set()

    def feed(self, line: str) -> None:
        """Take one line of output; what is not a JSON event (a warning) is ignored."""
        try:
            event = json.loads(line)
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        kind = event.get("type")
        if kind == "system" and event.get("subtype") == "init":
            self.report.session_id = str(event.get("session_id") or "") or None
        elif kind == "system" and event.get("subtype") == "api_retry":
            self.report.lost_connection = True
        elif kind == "assistant":
            self._assistant(event.get("message"))
        elif kind == "user":
            self._tool_results(event.get("message"))
        elif kind == "result":
            self._result(event)

    def _assistant(self, message: object) -> None:
        if not isinstance(message, dict):
            return
        if message.get("model") != "<synthetic>" and message.get("id"):
            self._messages.add(str(message["id"]))
        for block in message.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                activity = ToolActivity(_tool_name(block.get("name")), self._target(block))
                self._calls[str(block.get("id"))] = activity
                self.report.activity.append(activity)

    def _tool_results(self, message: object) -> None:
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            started = self._calls.pop(str(block.get("tool_use_id")), None)
            if started is None:
                continue
            done = ToolActivity(
                started.tool, started.target, "error" if block.get("is_error") else "ok"
            )
            index = self.report.activity.index(started)
            self.report.activity[index] = done

    def _result(self, event: dict[str, Any]) -> None:
        usage = event.get("usage") if isinstance(event.get("usage"), dict) else {}
        assert isinstance(usage, dict)
        tokens_in = sum(
            int(usage.get(key) or 0)
            for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        )
        self.report.usage = Usage(
            model_requests=len(self._messages),
            input_tokens=tokens_in,
            output_tokens=int(usage.get("output_tokens") or 0),
            seconds=float(event.get("duration_api_ms") or 0) / 1000,
        )
        keep = ("subtype", "is_error", "num_turns", "terminal_reason", "api_error_status")
        self.report.final = {key: event.get(key) for key in keep}
        text = event.get("result")
        text = text if isinstance(text, str) else None
        self.report.lost_connection = False
        if not event.get("is_error"):
            self.report.summary = text
            return
        status = event.get("api_error_status")
        if isinstance(status, int) and not isinstance(status, bool):
            # The endpoint answered: a refused key or request is the job's failure; a busy or
            # broken server (429, 5xx, 529 overloaded) is a lost turn, like a dropped stream.
            self.report.lost_connection = status == 429 or status >= 500
            self.report.failure = _refusal(status, event.get("api_error_type"), text)
        elif event.get("terminal_reason") == "api_error":
            # The trap: a connection lost for good still says subtype "success".
            self.report.lost_connection = True
        else:
            self.report.failure = text or str(event.get("subtype") or "an error")

    def _target(self, block: dict[str, Any]) -> str:
        given = block.get("input") if isinstance(block.get("input"), dict) else {}
        assert isinstance(given, dict)
        if block.get("name") in _COMMAND_TOOLS and isinstance(given.get("command"), str):
            return (
                given["command"].strip().splitlines()[0][:120] if given["command"].strip() else ""
            )
        for key in _PATH_INPUTS:
            if isinstance(given.get(key), str):
                return _relative(self.workspace, given[key])
        return ""


def _refusal(status: int, kind: object, text: str | None) -> str:
    if status in (401, 403):
        return (
            f"the model endpoint refused the key (HTTP {status}); set the runner's "
            f"{API_KEY_ENV} to a key it accepts"
        )
    named = f" {kind}" if isinstance(kind, str) and re.fullmatch(r"[a-z_]{1,60}", kind) else ""
    said = f": {text}" if text else ""
    return f"the model endpoint refused the request (HTTP {status}{named}){said}"


def _tool_name(name: object) -> str:
    text = str(name) if isinstance(name, str) else "unknown"
    return text[:60] if re.fullmatch(r"[A-Za-z0-9_.-]{1,60}", text) else "unknown"


def _relative(workspace: Path, path: str) -> str:
    """A workspace path as the reviewer reads it; a path outside it is never shown."""
    given = Path(path)
    if not given.is_absolute():
        return str(given)[:200]
    try:
        return str(given.relative_to(workspace))[:200]
    except ValueError:
        return "(outside the workspace)"


class ClaudeCodeAgent(CliAgent):
    """Claude Code as a cairn agent: the shared CLI turn over the `ClaudeCode` module."""

    name = ADAPTER
    base_url_env = BASE_URL_ENV
    api_key_env = API_KEY_ENV
    default_base_url = DEFAULT_BASE_URL
    default_command = DEFAULT_COMMAND
    validate = staticmethod(claude_spec)

    def make_module(self) -> CliModule:
        return ClaudeCode(self.spec["max_retries"])
