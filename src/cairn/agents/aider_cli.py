"""The `aider` adapter: Aider (PyPI `aider-chat`) as a cairn agent, one message per turn.

    {"adapter": "aider", "model": str, "command": str | None, "edit_format": str | None,
     "timeout": float}

The runner's environment gives the endpoint and key (`OPENAI_API_BASE`, `OPENAI_API_KEY`, from
`Config.environment`); the spec never holds a key. Aider talks chat completions to
`--model openai/NAME`, with a model metadata file cairn writes (else Aider fetches a price
list from the internet). The endpoint is also passed as `--openai-api-base`, because Aider
loads a `.env` from its working directory over its environment: a repository's own `.env`
must not move the key to another host.

Sessions: Aider has no session ids. The job's chat history file, in the job's private state
folder (never `.aider.chat.history.md` in the repository), IS its session: `cli_turn` saves it
into the job's context after every turn and restores it before one, and a later turn passes
`--restore-chat-history` to re-send exactly that history. Nothing "last" exists to pick up.

Git: Aider runs with `--no-git`. cairn's sandbox mounts `.git` read-only and cairn owns every
commit; with git on, Aider stages every file it creates (`git add`, which needs `.git`
writable) and reads its own settings from the repository's root. With `--no-git` it edits
files by path in its working directory (the workspace) and touches nothing else of git
(`--no-auto-commits --no-dirty-commits` as well, should a configuration turn git back on).

Dependencies: Aider has no tools, so the opening names a small JSON file in the job's
cairn-owned requests folder (writable in the sandbox, outside the workspace); Aider writes it
as an ordinary edit, and after the turn cairn reads it as the job's dependency request. After
approval the same history is resumed with a note naming the installed version.

How cairn tells a cut-off turn (measured on aider-chat 0.86.2): on a dropped stream Aider
prints the litellm error and "Retrying in N seconds...", doubling from 0.25 s; once the next
delay would pass 60 s it prints the last error with no retry after it, exits 0, and APPLIES
THE PARTIAL ANSWER: every edit block it can parse from the text that arrived, including a
whole-file block cut off mid-file. So a turn whose last model error is not followed by a retry
is `interrupted`, whatever the exit code; the workspace then decides (rule 9): with changes,
verification of what is there (never a `changed` accepted silently, never a second edit),
the reviewer's note naming the files Aider says it wrote from the cut-off answer; without, a
new attempt that resumes the same history.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.agents import mcp_tools
from cairn.agents.base import DependencyAsk, Outcome, OutcomeKind, Turn, Usage
from cairn.agents.cli_adapter import CliAgent, spec_command, spec_timeout
from cairn.agents.cli_agent import CliModule, CliReport, CliTurnPlan, ToolActivity
from cairn.agents.cli_process import CliRun
from cairn.agents.cli_turn import REQUESTS_FOLDER, CliTurn
from cairn.errors import UsageError
from cairn.sanitize import secret_spans

if TYPE_CHECKING:
    pass

ADAPTER = "aider"
BASE_URL_ENV = "OPENAI_API_BASE"
API_KEY_ENV = "OPENAI_API_KEY"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_COMMAND = "aider"
DEFAULT_TIMEOUT = 3600.0
EDIT_FORMATS = ("whole", "diff", "diff-fenced", "udiff")
CONTEXT_TOKENS = 128_000
OUTPUT_TOKENS = 8192
_MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/\[\]-]{0,99}")
_SPEC_KEYS = {"adapter", "model", "command", "edit_format", "timeout"}
_STATE = "aider"
_HISTORY = "chat-history.md"
# What cairn reads from Aider's output: nothing else of it is kept (it echoes the model's text).
_APPLIED = re.compile(r"^Applied edit to (.+?)\s*$")
_TOKENS = re.compile(r"^Tokens: ([\d.]+)([kM]?) sent.*?, ([\d.]+)([kM]?) received")
_ERROR = re.compile(r"litellm\.([A-Za-z]+Error)\b")
_RETRY = re.compile(r"^Retrying in [\d.]+ seconds")
_LOST = frozenset(
    {
        "APIConnectionError",
        "APIError",
        "BadGatewayError",
        "InternalServerError",
        "RateLimitError",
        "ServiceUnavailableError",
        "Timeout",
        "TimeoutError",
    }
)
_REFUSED_KEY = frozenset({"AuthenticationError", "PermissionDeniedError"})
_SCALE = {"": 1, "k": 1_000, "M": 1_000_000}


def aider_spec(given: Mapping[str, Any]) -> dict[str, Any]:
    """Validate `given` (unset fields take their defaults) into a storable `aider` spec."""
    unknown = sorted(set(given) - _SPEC_KEYS)
    if unknown:
        raise UsageError(f"an aider agent has no setting {unknown[0]!r}")
    model = given.get("model")
    if not isinstance(model, str) or not model.strip():
        raise UsageError(
            "an aider agent needs a model, as the server names it: --agent aider:MODEL, or "
            "--model for a named agent"
        )
    if not _MODEL_NAME.fullmatch(model):
        raise UsageError("--model names a model as the server names it, like gpt-4o (no spaces)")
    if secret_spans(model):
        raise UsageError("--model looks like a credential, not a model name")
    command = spec_command(given, "aider")
    edit_format = given.get("edit_format")
    if edit_format is not None and edit_format not in EDIT_FORMATS:
        raise UsageError(f"edit_format is one of {', '.join(EDIT_FORMATS)}")
    timeout = spec_timeout(given, DEFAULT_TIMEOUT)
    return {
        "adapter": ADAPTER,
        "model": model,
        "command": command,
        "edit_format": edit_format,
        "timeout": timeout,
    }


def litellm_model(model: str) -> str:
    """The model as Aider names it for an OpenAI-compatible endpoint: `openai/NAME`."""
    return model if model.startswith("openai/") else f"openai/{model}"


class AiderCli:
    """Aider's command line, environment, output and chat history file (its session)."""

    name = ADAPTER

    def __init__(self, edit_format: str | None = None) -> None:
        self.edit_format = edit_format

    def command_line(self, binary: str, plan: CliTurnPlan) -> list[str]:
        """A headless turn: one message, every question answered yes, git and traffic off.

        Writes the files the command line names (the model's metadata, the turn's message)
        into the job's state folder.
        """
        folder = plan.state_dir / _STATE
        folder.mkdir(parents=True, exist_ok=True)
        model = litellm_model(plan.model or "")
        metadata = folder / "model-metadata.json"
        metadata.write_text(json.dumps({model: _metadata()}), encoding="utf-8")
        argv = [binary, "--model", model, "--model-metadata-file", str(metadata)]
        argv += ["--openai-api-base", plan.endpoint]
        if self.edit_format:
            argv += ["--edit-format", self.edit_format]
        argv += ["--yes-always", "--no-pretty", "--no-fancy-input", "--no-check-update"]
        argv += ["--no-show-release-notes"]
        argv += ["--analytics-disable", "--no-show-model-warnings"]
        # cairn owns git: no repository, no commits, no .gitignore edits (see the docstring).
        argv += ["--no-git", "--no-auto-commits", "--no-dirty-commits", "--no-gitignore"]
        # Nothing runs or is fetched on the model's word: no tests, lints, shell, URLs, map.
        argv += ["--no-auto-lint", "--no-auto-test", "--no-suggest-shell-commands"]
        argv += ["--no-detect-urls", "--map-tokens", "0"]
        argv += ["--chat-history-file", str(self.session_file(plan))]
        argv += ["--input-history-file", str(folder / "input-history")]
        # The job's own history, re-sent on a later turn; never anything "last".
        argv += ["--restore-chat-history" if plan.resume else "--no-restore-chat-history"]
        # The prompt goes in a file: Aider logs its command line into the history, and a
        # multi-line --message there would come back as a made-up assistant message.
        message = folder / "message.md"
        message.write_text(plan.prompt, encoding="utf-8")
        argv += ["--encoding", "utf-8", "--message-file", str(message)]
        return argv

    def environment(self, plan: CliTurnPlan) -> dict[str, str]:
        """The endpoint and key only (HOME, the state folder, is the sandbox's)."""
        environment = {BASE_URL_ENV: plan.endpoint}
        if plan.api_key:
            environment[API_KEY_ENV] = plan.api_key
        return environment

    def reader(self, workspace: Path) -> AiderOutput:
        """A reader of one turn's output."""
        return AiderOutput(workspace)

    def session_file(self, plan: CliTurnPlan) -> Path:
        """The job's chat history: in its state folder, the same path for every workspace."""
        return plan.state_dir / _STATE / _HISTORY


def _metadata() -> dict[str, Any]:
    """What Aider would otherwise look up on the internet: context size, no prices."""
    return {
        "max_tokens": OUTPUT_TOKENS,
        "max_input_tokens": CONTEXT_TOKENS,
        "max_output_tokens": OUTPUT_TOKENS,
        "input_cost_per_token": 0.0,
        "output_cost_per_token": 0.0,
        "litellm_provider": "openai",
        "mode": "chat",
    }


class AiderOutput:
    """Reads Aider's plain output into a bounded report: an allowlist of lines, no model text."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.report = CliReport()
        self._replies = 0
        self._last_error: str | None = None

    def feed(self, line: str) -> None:
        """Take one line of output; what no pattern knows (the model's own text) is dropped."""
        text = line.strip()
        applied = _APPLIED.match(text)
        if applied:
            target = _relative(self.workspace, applied.group(1))
            self.report.activity.append(ToolActivity("edit", target, "ok"))
            return
        tokens = _TOKENS.match(text)
        if tokens:
            self._replies += 1
            usage = self.report.usage
            self.report.usage = Usage(
                model_requests=self._replies,
                input_tokens=usage.input_tokens + _count(tokens.group(1), tokens.group(2)),
                output_tokens=usage.output_tokens + _count(tokens.group(3), tokens.group(4)),
            )
            self._settle()
            return
        if _RETRY.match(text):
            self._last_error = None  # Aider tries again: the turn goes on
            return
        error = _ERROR.search(text)
        if error:
            self._last_error = error.group(1)
            self._settle()

    def _settle(self) -> None:
        """The report as of now: Aider's end is the last thing it printed before exiting."""
        report = self.report
        report.final = {"replies": self._replies, "error": self._last_error}
        report.lost_connection = self._last_error in _LOST
        report.failure = None
        if self._last_error in _REFUSED_KEY:
            report.failure = (
                f"the model endpoint refused the key; set the runner's {API_KEY_ENV} to a key "
                "it accepts"
            )
        elif self._last_error is not None and not report.lost_connection:
            report.failure = f"the model endpoint refused the request ({self._last_error})"


def _count(number: str, scale: str) -> int:
    return int(float(number) * _SCALE[scale])


def _relative(workspace: Path, path: str) -> str:
    """A workspace path as the reviewer reads it; a path outside it is never shown."""
    given = Path(path)
    if not given.is_absolute():
        return str(given)[:200]
    try:
        return str(given.relative_to(workspace))[:200]
    except ValueError:
        return "(outside the workspace)"


class AiderTurn(CliTurn):
    """The shared CLI turn, with Aider's way of asking for a dependency: a file, not a tool."""

    def _dependency_instructions(self) -> str:
        home = self.turn.agent_home
        assert home is not None, "CliTurn.run checks the state folder first"
        path = home / REQUESTS_FOLDER / mcp_tools.REQUEST_FILE
        example = {"ecosystem": "pypi", "name": "NAME", "version": "X.Y.Z", "reason": "WHY"}
        return (
            "If the task needs a package that is not installed, do not change any other file: "
            f"create the file {path} holding one JSON object, {json.dumps(example)} (ecosystem "
            "pypi or npm, the exact name and exact version), and end your reply. A person "
            "decides; this conversation resumes with the decision. Otherwise end with a short "
            "summary of what you changed and why."
        )

    def _outcome(self, run: CliRun, report: CliReport, ask: DependencyAsk | None) -> Outcome:
        """The shared reading, plus the reviewer's note when Aider applied a cut-off answer."""
        outcome = super()._outcome(run, report, ask)
        if outcome.kind is not OutcomeKind.interrupted or not report.lost_connection:
            return outcome
        edited = sorted({item.target for item in report.activity})
        if not edited:
            return outcome
        note = (
            "Aider lost the model's connection mid-answer and applied the part of the answer "
            f"that arrived, to {', '.join(edited)[:300]}: check that these files are complete."
        )
        return replace(outcome, summary=note)

    def _remember(self, argv: list[str], plan: CliTurnPlan) -> None:
        """The flags with the job's state folder written as `<state>`: no local path kept."""
        state = str(plan.state_dir)
        shown = [part if part == plan.prompt else part.replace(state, "<state>") for part in argv]
        super()._remember(shown, plan)


class AiderAgent(CliAgent):
    """Aider as a cairn agent: the shared CLI turn over the `AiderCli` module."""

    name = ADAPTER
    base_url_env = BASE_URL_ENV
    api_key_env = API_KEY_ENV
    default_base_url = DEFAULT_BASE_URL
    default_command = DEFAULT_COMMAND
    validate = staticmethod(aider_spec)

    def make_module(self) -> CliModule:
        return AiderCli(self.spec["edit_format"])

    def make_turn(self, turn: Turn, endpoint: str) -> AiderTurn:
        return AiderTurn(self.module, self.binary(), turn, endpoint, self._api_key, self.spec)

    def run_turn(self, turn: Turn) -> Outcome:
        """One turn of Aider, continuing the job's own chat history."""
        if not self._api_key:
            return _missing_key(turn)
        return super().run_turn(turn)


def _missing_key(turn: Turn) -> Outcome:
    outcome = Outcome(
        OutcomeKind.failed,
        diagnosis=(
            f"the runner's {API_KEY_ENV} is not set: Aider needs one (any value, for a server "
            "that asks for no key)"
        ),
        usage=Usage(),
    )
    turn.save_state(dict(turn.state) if isinstance(turn.state, dict) else {}, outcome)
    return outcome
