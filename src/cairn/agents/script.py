"""The script agent: replays a parsed script; its position in the script is the job's context."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.agents.base import DependencyAsk, Outcome, OutcomeKind, Turn
from cairn.agents.script_format import (
    AppendStep,
    DeleteStep,
    FailStep,
    FileStep,
    FinishStep,
    LoseStreamStep,
    RequestDependencyStep,
    RunStep,
    Script,
    Step,
    WriteStep,
    parse_script,
    read_script_text,
    script_from_data,
    script_to_data,
)
from cairn.agents.tools.edits import EditJournal, Intent, ToolFailed, apply_once
from cairn.errors import BoundaryError, ScriptError, UsageError
from cairn.sanitize import tail
from cairn.workspace.commands import CommandResult, run_in_workspace, sandbox_problem

if TYPE_CHECKING:  # pydantic stays out of every import of cairn.agents
    from cairn.config import Config

__all__ = ["ScriptAgent", "parse_script", "script_from_data", "script_to_data"]

DEFAULT_COMMAND_TIMEOUT = 600.0
NOTES_KEPT = 20
OUTPUT_LINES = 20
DIAGNOSIS_CHARS = 2000

State = dict[str, Any]


class _StepFailed(Exception):
    """A step could not be carried out; the message is the diagnosis without its step number."""


class ScriptAgent:
    """A deterministic agent that replays a script and resumes exactly where it stopped."""

    name = "script"

    def __init__(self, script: Script, *, command_timeout: float = DEFAULT_COMMAND_TIMEOUT) -> None:
        self.script = script
        self.command_timeout = command_timeout

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], config: Config | None = None) -> ScriptAgent:
        """Build the agent from its stored spec: `{"adapter": "script", "script": ...}`.

        The script agent needs nothing of the runner's configuration.
        """
        if "script" not in spec:
            raise UsageError(
                "the script agent's configuration has no script; create it with --agent script:PATH"
            )
        timeout = spec.get("command_timeout", DEFAULT_COMMAND_TIMEOUT)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise UsageError("the script agent's command_timeout must be a positive number")
        return cls(script_from_data(spec["script"]), command_timeout=float(timeout))

    @classmethod
    def spec_from_argument(cls, argument: str) -> dict[str, Any]:
        """Read and parse the script file named by `--agent script:PATH` into a storable spec."""
        if not argument.strip():
            raise UsageError(
                "--agent script needs a script file, for example --agent script:demo.yaml"
            )
        path = Path(argument).expanduser()
        # Messages name only the file, never the local path it was read from.
        shown = path.name or "the script file"
        try:
            text = read_script_text(path)
        except FileNotFoundError:
            raise UsageError(
                f"no script file named {shown!r} was found; check the path in --agent script:PATH"
            ) from None
        except IsADirectoryError:
            raise UsageError(
                f"{shown!r} is a folder; --agent script:PATH needs a YAML file"
            ) from None
        except UnicodeDecodeError:
            raise ScriptError(f"{shown}: the script is not UTF-8 text; save it as UTF-8") from None
        except OSError as exc:
            raise UsageError(
                f"could not read the script file {shown!r} ({exc.strerror or 'unreadable'}); "
                "check its permissions"
            ) from None
        try:
            script = parse_script(text)
        except ScriptError as exc:
            raise ScriptError(f"{shown}: {exc}") from None
        return {"adapter": cls.name, "script": script_to_data(script)}

    def run_turn(self, turn: Turn) -> Outcome:
        """Replay steps from the job's saved position until one of them ends the turn."""
        state = _loaded_state(turn.state)
        if state is None:
            return _failed(
                "the script agent's saved context is unreadable (it has no valid position); "
                "start a new job for this request"
            )
        told = _told(turn)
        if told:
            seen = [*state.get("notes_seen", []), *told][-NOTES_KEPT:]
            state = _saved(turn, {**state, "notes_seen": seen})
        steps = self.script.steps
        while state["position"] < len(steps):
            step = steps[state["position"]]
            try:
                outcome, state = self._step(turn, state, step)
            except (BoundaryError, _StepFailed, ToolFailed) as exc:
                return _tagged(_failed(f"step {state['position'] + 1} ({step.kind}): {exc}"), state)
            if outcome is not None:
                return outcome
        return _tagged(_finished(state, None), state)

    def _step(self, turn: Turn, state: State, step: Step) -> tuple[Outcome | None, State]:
        match step:
            case WriteStep() | AppendStep() | DeleteStep():
                return None, _apply_file_step(turn, state, step)
            case RunStep():
                return self._run(turn, state, step)
        state = _advanced(state)
        outcome = _tagged(_ending_outcome(step, state), state)
        return outcome, _saved(turn, state, outcome)

    def _run(self, turn: Turn, state: State, step: RunStep) -> tuple[Outcome | None, State]:
        """Run a command once: a resume after a crash mid-command checks the workspace first."""
        marker = state.get("running")
        if marker and marker.get("position") == state["position"]:
            if turn.workspace_id() != marker.get("tree"):
                # Rule 9: the interrupted command already changed files; running it again
                # could make the same edit twice, so its step counts as done.
                return None, _saved(turn, _advanced(state))
        else:
            running = {"position": state["position"], "tree": turn.workspace_id()}
            # Recorded before the command runs: isolation is unproven even if cairn dies in it.
            if turn.allow_unsandboxed and sandbox_problem() is not None:
                state = {**state, "unsandboxed": True}
            state = _saved(turn, {**state, "running": running})
        try:
            result = run_in_workspace(
                step.command,
                turn.workspace,
                timeout=self.command_timeout,
                should_stop=turn.stop_requested,
                allow_unsandboxed=turn.allow_unsandboxed,
                hidden=turn.hidden_paths,
            )
        except BoundaryError as exc:
            # The command already ran: it is done, and it failed the turn.
            state = _advanced(state)
            outcome = _tagged(_failed(f"step {state['position']} (run): {exc}"), state)
            return outcome, _saved(turn, state, outcome)
        except OSError as exc:
            raise _StepFailed(f"could not start the command ({exc.strerror or exc})") from None
        state = _advanced(state)
        if result.exit_code == 0:
            return None, _saved(turn, state)
        outcome = _failed(_run_failure(f"step {state['position']} (run)", result, self))
        outcome = _tagged(outcome, state)
        return outcome, _saved(turn, state, outcome)


def _told(turn: Turn) -> list[str]:
    """What cairn tells this turn: notes, a reviewer's follow-ups, or a fresh opening.

    A script has no conversation: the follow-ups are recorded as notes are, and the script
    goes on from its position (the steps after the `finish` that ended its last turn). A
    fresh opening (`cairn reply --fresh`) is recorded too, but the position is kept, since a
    script's position is no conversation that could start anew.
    """
    opening = [turn.fresh_opening] if turn.fresh_opening else []
    return [*turn.notes, *turn.follow_ups, *opening]


def _ending_outcome(step: Step, state: State) -> Outcome:
    match step:
        case RequestDependencyStep():
            ask = DependencyAsk(step.ecosystem, step.name, step.version, step.reason)
            return Outcome(OutcomeKind.dependency_request, dependency=ask)
        case LoseStreamStep():
            return Outcome(OutcomeKind.interrupted)
        case FailStep():
            return _failed(step.message)
        case FinishStep():
            return _finished(state, step.summary)
    raise AssertionError(f"unhandled step {step!r}")  # pragma: no cover


def _finished(state: State, summary: str | None) -> Outcome:
    kind = OutcomeKind.changed if state.get("changed") else OutcomeKind.no_change
    return Outcome(kind, summary=summary)


def _failed(diagnosis: str) -> Outcome:
    return Outcome(OutcomeKind.failed, diagnosis=diagnosis)


def _tagged(outcome: Outcome, state: State) -> Outcome:
    """The outcome, marked when any command of this job ran without a sandbox."""
    if not state.get("unsandboxed"):
        return outcome
    return replace(outcome, isolation_unproven=True)


def _loaded_state(raw: object) -> State | None:
    """The job's saved context, or None when it cannot be trusted."""
    if raw is None:
        return {"position": 0}
    if not isinstance(raw, dict):
        return None
    position = raw.get("position")
    if type(position) is not int or position < 0:
        return None
    pending = raw.get("pending")
    if pending is not None and not (
        isinstance(pending, dict)
        and isinstance(pending.get("path"), str)
        and isinstance(pending.get("sha256"), str | None)
    ):
        return None
    if not isinstance(raw.get("notes_seen", []), list):
        return None
    return dict(raw)


def _saved(turn: Turn, state: State, outcome: Outcome | None = None) -> State:
    turn.save_state(state, outcome)
    return state


def _advanced(state: State) -> State:
    rest = {key: value for key, value in state.items() if key not in ("pending", "running")}
    return {**rest, "position": state["position"] + 1}


def _run_failure(where: str, result: CommandResult, agent: ScriptAgent) -> str:
    code = result.exit_code
    if result.stopped:
        head = f"{where}: the command was stopped because this runner lost the job"
    elif code is None:
        head = f"{where}: the command did not finish within {agent.command_timeout:g} seconds"
    elif code < 0:
        head = f"{where}: the command was killed by signal {-code}"
    else:
        head = f"{where}: the command exited with code {code}"
    return _with_output_tail(head, result.output)


def _apply_file_step(turn: Turn, state: State, step: FileStep) -> State:
    """Apply a file step exactly once, even across a crash between applying and saving."""
    current = state

    def record(intent: Intent, changes: bool) -> None:
        nonlocal current
        changed = bool(current.get("changed")) or changes
        current = _saved(turn, {**current, "pending": intent.to_data(), "changed": changed})

    journal = EditJournal(Intent.from_data(state.get("pending")), record)
    try:
        apply_once(
            turn.workspace,
            step.path,
            lambda before: _intended_bytes(step, before),
            journal,
            deleting=isinstance(step, DeleteStep),
        )
    except OSError as exc:
        raise _StepFailed(f"could not {step.kind} {step.path}: {exc.strerror or exc}") from None
    return _saved(turn, _advanced(current))


def _intended_bytes(step: FileStep, before: bytes | None) -> bytes | None:
    match step:
        case WriteStep():
            return step.content.encode("utf-8")
        case AppendStep():
            return (before or b"") + step.content.encode("utf-8")
    if before is None:
        raise _StepFailed(f"there is no file {step.path} to delete")
    return None


def _with_output_tail(head: str, output: str) -> str:
    lines = "\n".join(output.splitlines()[-OUTPUT_LINES:]).strip("\n")
    if not lines.strip():
        return f"{head}, with no output"
    budget = DIAGNOSIS_CHARS - len(head) - 40
    if len(lines) > budget:
        # Starts after a break: a secret cut in half here could no longer be recognized.
        lines = "…" + tail(lines, budget - 1)
    return f"{head}; the last lines of its output:\n{lines}"
