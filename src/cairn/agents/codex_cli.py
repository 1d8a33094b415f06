"""The `codex` adapter: Codex CLI (`codex exec --json ...`) as a cairn agent.

    {"adapter": "codex", "model": str | None, "command": str | None, "max_retries": int,
     "timeout": float}

The runner's environment gives the endpoint and key (`OPENAI_BASE_URL`, `OPENAI_API_KEY`, from
`Config.environment`); the endpoint goes into the job's provider config (`codex_config`), the
key only into the CLI's environment. Each job has its own CODEX_HOME in its private state
folder. The first turn runs `codex exec --json PROMPT`; Codex reports the thread it started
(`thread.started`), which cairn keeps in the job's context at once; every later turn runs
`codex exec --json resume THREAD_ID PROMPT`. `resume --last` ("the most recent session") is
never used. Codex's own sandbox cannot nest inside cairn's bubblewrap and its approvals have
no one to ask, so every turn, resumes included (Codex does not remember them), passes
`--dangerously-bypass-approvals-and-sandbox`: cairn's sandbox is the boundary.

The thread's rollout file (`CODEX_HOME/sessions/YYYY/MM/DD/rollout-...-THREAD.jsonl`) is saved
into the job's context after every turn; where it is missing it is restored under a fixed
date, which Codex accepts (it finds the thread by the id in the file name).

How cairn tells a cut-off turn from a finished one: a dropped stream makes Codex retry
(`stream_max_retries`, bounded), then print `turn.failed` ("stream disconnected before
completion") and exit 1. Codex applies each `apply_patch` call as it comes, so a turn cut off
later may have changed files: that turn is `interrupted`, never `changed`, and the workspace
decides (rule 9) whether verification goes on or a new attempt starts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.agents import codex_config
from cairn.agents.cli_adapter import CliAgent, spec_command, spec_retries, spec_timeout
from cairn.agents.cli_agent import CliModule, CliTurnPlan
from cairn.agents.codex_events import THREAD_ID, CodexEvents
from cairn.errors import UsageError
from cairn.sanitize import secret_spans

if TYPE_CHECKING:
    pass

ADAPTER = "codex"
BASE_URL_ENV = "OPENAI_BASE_URL"
API_KEY_ENV = codex_config.API_KEY_ENV
DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_COMMAND = "codex"
DEFAULT_MAX_RETRIES = 1
DEFAULT_TIMEOUT = 3600.0
_MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/-]{0,99}")
_SPEC_KEYS = {"model", "command", "max_retries", "timeout"}
RESTORED_PREFIX = "sessions/2000/01/01/rollout-2000-01-01T00-00-00-"
"""Where a rollout restored on another host goes (Codex needs its canonical file name)."""
PERMISSION_FLAGS = ("--dangerously-bypass-approvals-and-sandbox",)
"""On every turn: Codex's sandbox cannot nest in bubblewrap, which is the boundary."""


def codex_spec(given: Mapping[str, Any]) -> dict[str, Any]:
    """Validate `given` (unset fields take their defaults) into a storable `codex` spec."""
    unknown = sorted(set(given) - _SPEC_KEYS)
    if unknown:
        raise UsageError(f"a codex agent has no setting {unknown[0]!r}")
    model = given.get("model")
    if model is not None and (not isinstance(model, str) or not _MODEL_NAME.fullmatch(model)):
        raise UsageError("--model names a model, like gpt-5.1-codex (no spaces)")
    if isinstance(model, str) and secret_spans(model):
        raise UsageError("--model looks like a credential, not a model name")
    command = spec_command(given, "codex")
    retries = spec_retries(given, DEFAULT_MAX_RETRIES)
    timeout = spec_timeout(given, DEFAULT_TIMEOUT)
    return {
        "adapter": ADAPTER,
        "model": model,
        "command": command,
        "max_retries": retries,
        "timeout": timeout,
    }


class CodexCli:
    """Codex CLI's command line, config, environment, event stream and rollout file."""

    name = ADAPTER
    reports_session_id = True
    """Codex names its threads itself; cairn keeps the one the job's first turn reported."""

    def __init__(self, max_retries: int = DEFAULT_MAX_RETRIES) -> None:
        self.max_retries = max_retries

    def command_line(self, binary: str, plan: CliTurnPlan) -> list[str]:
        """`codex exec --json`, or `... resume THREAD_ID` by id; writes the turn's config."""
        codex_config.write_config(
            _codex_home(plan),
            base_url=plan.endpoint,
            model=plan.model,
            catalog=codex_config.catalog_for(binary, plan.model) if plan.model else [],
            max_retries=self.max_retries,
            mcp_servers=plan.mcp_config,
        )
        argv = [binary, "exec", "--json"]
        if plan.resume:
            argv += ["resume"]  # by the job's own thread id: never --last
        argv += [*PERMISSION_FLAGS, "--strict-config", "--skip-git-repo-check"]
        if plan.model:
            argv += ["--model", plan.model]
        if plan.resume:
            argv += [plan.session_id]
        return [*argv, "--", plan.prompt]

    def environment(self, plan: CliTurnPlan) -> dict[str, str]:
        """The private CODEX_HOME and the key: the endpoint is in the config it reads."""
        environment = {"CODEX_HOME": str(_codex_home(plan)), "NO_COLOR": "1"}
        if plan.api_key:
            environment[API_KEY_ENV] = plan.api_key
        return environment

    def reader(self, workspace: Path) -> CodexEvents:
        """A reader of one turn's `--json` events."""
        return CodexEvents(workspace)

    def session_file(self, plan: CliTurnPlan) -> Path:
        """The thread's rollout file where Codex wrote it, else where cairn restores it."""
        home = _codex_home(plan)
        if not THREAD_ID.fullmatch(plan.session_id):
            return home / "sessions" / "none.jsonl"  # no thread yet: nothing to restore
        found = sorted(home.glob(f"sessions/*/*/*/rollout-*-{plan.session_id}.jsonl"))
        return found[0] if found else home / f"{RESTORED_PREFIX}{plan.session_id}.jsonl"


def _codex_home(plan: CliTurnPlan) -> Path:
    return plan.state_dir / "codex"


class CodexCliAgent(CliAgent):
    """Codex CLI as a cairn agent: the shared CLI turn over the `CodexCli` module."""

    name = ADAPTER
    base_url_env = BASE_URL_ENV
    api_key_env = API_KEY_ENV
    default_base_url = DEFAULT_BASE_URL
    default_command = DEFAULT_COMMAND
    validate = staticmethod(codex_spec)

    def make_module(self) -> CliModule:
        return CodexCli(self.spec["max_retries"])
