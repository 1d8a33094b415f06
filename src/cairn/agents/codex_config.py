"""The `config.toml` cairn writes into a Codex CLI job's private CODEX_HOME before each turn.

Codex CLI reads its provider, model and MCP servers from `$CODEX_HOME/config.toml` (checked
with Codex CLI 0.171.0 and `--strict-config`, which refuses any key it does not know):

- one provider, `cairn`: `base_url` (the runner's OPENAI_BASE_URL as the sandbox reaches it),
  `env_key = "OPENAI_API_KEY"`, `wire_api = "responses"`, and bounded retries
  (`request_max_retries`, `stream_max_retries`; `features.unbounded_connection_retries` off,
  without which Codex retries an unreachable server for ever);
- a model catalog (`model_catalog_json`, which replaces Codex's own): Codex's own catalog
  (`codex debug models`), with an entry added for the job's model when it has none; without
  one, a model name Codex does not know gets fallback metadata that offers no `apply_patch`;
- every other traffic off (`analytics.enabled`, `features.plugins`, update checks);
- cairn's MCP server (`mcp_servers.cairn`), required (the turn fails rather than run without
  `request_dependency`) and its tools approved (exec mode has no one to ask);
- commands the model runs get only the core environment (`shell_environment_policy`), never
  the provider's key.
"""

from __future__ import annotations

import functools
import json
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cairn.workspace.commands import command_environment

PROVIDER = "cairn"
API_KEY_ENV = "OPENAI_API_KEY"
CATALOG_FILE = "cairn-models.json"
CONFIG_FILE = "config.toml"
MCP_STARTUP_SECONDS = 30
_CATALOG_SECONDS = 60.0


def catalog_entry(slug: str, *, context_window: int = 128_000) -> dict[str, Any]:
    """A model catalog entry for `slug` that gives Codex its editing tools (`apply_patch`)."""
    return {
        "slug": slug,
        "display_name": slug,
        "description": "a model configured for cairn",
        "default_reasoning_level": "medium",
        "supported_reasoning_levels": [{"effort": "medium", "description": "medium"}],
        "shell_type": "shell_command",
        "visibility": "list",
        "minimal_client_version": [0, 1, 0],
        "supported_in_api": True,
        "priority": 1,
        "upgrade": None,
        "base_instructions": "You are a coding agent working in the user's repository.",
        "supports_reasoning_summaries": False,
        "support_verbosity": False,
        "default_verbosity": None,
        "apply_patch_tool_type": "freeform",
        "truncation_policy": {"mode": "bytes", "limit": 10_000},
        "supports_parallel_tool_calls": False,
        "context_window": context_window,
        "experimental_supported_tools": [],
    }


def catalog_for(binary: str, model: str) -> list[dict[str, Any]]:
    """Codex's own model catalog, with an entry for `model` added when it has none.

    Codex's tuned entries (its instructions for its own models) stay as they are; a catalog
    Codex cannot render (an old binary) leaves only the entry for `model`.
    """
    try:
        stamp = Path(binary).stat().st_mtime_ns
    except OSError:
        stamp = 0
    models = [dict(entry) for entry in _builtin_catalog(binary, stamp)]
    if not any(entry.get("slug") == model for entry in models):
        models.append(catalog_entry(model))
    return models


@functools.lru_cache(maxsize=8)
def _builtin_catalog(binary: str, _stamp: int) -> tuple[dict[str, Any], ...]:
    """`codex debug models` with an empty CODEX_HOME: no config, no key, no model call."""
    with tempfile.TemporaryDirectory(prefix="cairn-codex-") as scratch:
        environment = command_environment(Path(scratch), extra={"CODEX_HOME": scratch})
        try:
            done = subprocess.run(
                [binary, "debug", "models"],
                env=environment,
                cwd=scratch,
                capture_output=True,
                text=True,
                timeout=_CATALOG_SECONDS,
                stdin=subprocess.DEVNULL,
                check=False,
            )
            given = json.loads(done.stdout) if done.returncode == 0 else {}
        except (OSError, subprocess.TimeoutExpired, ValueError):
            given = {}
    models = given.get("models") if isinstance(given, dict) else None
    if not isinstance(models, list):
        return ()
    return tuple(entry for entry in models if isinstance(entry, dict) and entry.get("slug"))


def write_config(
    codex_home: Path,
    *,
    base_url: str,
    model: str | None,
    catalog: list[dict[str, Any]],
    max_retries: int,
    mcp_servers: Mapping[str, Mapping[str, Any]],
) -> Path:
    """Write the turn's config.toml (and `catalog`, when a model is named) into `codex_home`."""
    codex_home.mkdir(parents=True, exist_ok=True)
    top: dict[str, Any] = {"model_provider": PROVIDER, "check_for_update_on_startup": False}
    if model:
        path = codex_home / CATALOG_FILE
        path.write_text(json.dumps({"models": catalog}), encoding="utf-8")
        top |= {"model": model, "model_catalog_json": str(path)}
    tables: list[tuple[str, Mapping[str, Any]]] = [
        (
            f"model_providers.{PROVIDER}",
            {
                "name": PROVIDER,
                "base_url": base_url,
                "env_key": API_KEY_ENV,
                "wire_api": "responses",
                "request_max_retries": max_retries,
                "stream_max_retries": max_retries,
            },
        ),
        ("analytics", {"enabled": False}),
        ("features", {"plugins": False, "unbounded_connection_retries": False}),
        ("shell_environment_policy", {"inherit": "core"}),
    ]
    for name, server in mcp_servers.items():
        entry = {
            "command": server["command"],
            "args": list(server.get("args") or []),
            "env": dict(server.get("env") or {}),
            "required": True,
            "startup_timeout_sec": MCP_STARTUP_SECONDS,
            "default_tools_approval_mode": "approve",
        }
        tables.append((f"mcp_servers.{name}", entry))
    lines = [f"{key} = {_value(value)}" for key, value in top.items()]
    for name, values in tables:
        lines += ["", f"[{name}]", *(f"{key} = {_value(value)}" for key, value in values.items())]
    path = codex_home / CONFIG_FILE
    partial = path.with_suffix(".partial")
    partial.write_text("\n".join(lines) + "\n", encoding="utf-8")
    partial.replace(path)
    return path


def _value(value: object) -> str:
    """A TOML value: a JSON string is a valid TOML basic string, lists and tables inline."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    if isinstance(value, Mapping):
        pairs = ", ".join(f"{json.dumps(str(k))} = {_value(v)}" for k, v in value.items())
        return "{ " + pairs + " }" if pairs else "{}"
    raise TypeError(f"no TOML form for {type(value).__name__}")
