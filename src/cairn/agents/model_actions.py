"""What a model's tool call does in the workspace, and the result payload saved for it.

The file tools and `run` happen here, exactly once: an edit saves its intent with the job's
context before it is made (`agents.tools.edits`), and a command saves a marker before it
starts, so a call resumed after a crash is never done twice (a marked command is never run
again: what it did cannot always be measured). `request_dependency` and
`finish` end the turn; the loop handles them. Every result text is masked and bounded
before it is saved or sent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cairn.agents.base import Turn
from cairn.agents.model_tools import (
    CallProblem,
    ListFilesArgs,
    ReadFileArgs,
    ReplaceInFileArgs,
    RequestDependencyArgs,
    RunArgs,
    SearchArgs,
    ToolCall,
    ToolName,
    WriteFileArgs,
)
from cairn.agents.tools import (
    EditJournal,
    Intent,
    ToolResult,
    ToolStatus,
    list_files,
    read_file,
    replace_in_file,
    search,
    write_file,
)
from cairn.errors import BoundaryError, WorkspaceError
from cairn.sanitize import bound
from cairn.workspace.commands import run_in_workspace, sandbox_problem

RUN_TIMEOUT = 300.0
"""Seconds one `run` command may take."""
RESULT_CHARS = 80_000
"""The most of one tool result that is saved and sent back (a read file is at most 64 KiB)."""
TARGET_CHARS = 200
INTERRUPTED_RUN = (
    "this command was interrupted and was not run again; check its effects before running it again"
)
EDIT_TOOLS = (ToolName.write_file, ToolName.replace_in_file)

State = dict[str, Any]


@dataclass(frozen=True)
class CallResult:
    """A call's saved result: `to_payload` is exactly the stored `tool_result` step."""

    call_id: str
    name: str
    target: str | None
    ok: bool
    content: str

    def to_payload(self) -> dict[str, Any]:
        """The `tool_result` step's payload (the transcript summary reads it)."""
        return {
            "call_id": self.call_id,
            "name": self.name,
            "target": self.target,
            "ok": self.ok,
            "content": self.content,
        }


def target_of(call: ToolCall | CallProblem) -> str | None:
    """What the call acts on: a path, a command, a pattern, or `eco:name==version`."""
    if isinstance(call, CallProblem):
        return None
    match call.arguments:
        case ListFilesArgs(path=path) | ReadFileArgs(path=path) | WriteFileArgs(path=path):
            return path
        case ReplaceInFileArgs(path=path):
            return path
        case RunArgs(command=command):
            return command
        case SearchArgs(pattern=pattern):
            return pattern
        case RequestDependencyArgs(ecosystem=ecosystem, name=name, version=version):
            return f"{ecosystem}:{name}=={version}"
    return None


class Actions:
    """Carries out the workspace tools of one turn, saving what exactly-once needs."""

    def __init__(
        self, turn: Turn, state: State, mask: Callable[[str], str], save: Callable[[], None]
    ) -> None:
        self.turn = turn
        self.state = state
        self.mask = mask
        self._save = save

    def result(self, call: ToolCall | CallProblem, ok: bool, text: str) -> CallResult:
        """A result of `call` with its target and text masked and bounded."""
        target = target_of(call)
        name = bound(self.mask(call.name), 80) if isinstance(call, CallProblem) else call.name.value
        shown = None if target is None else bound(self.mask(target), TARGET_CHARS)
        return CallResult(call.id, name, shown, ok, bound(self.mask(text), RESULT_CHARS))

    def execute(self, call: ToolCall) -> CallResult:
        """Carry out one workspace tool; its mistakes are results, never exceptions."""
        workspace = self.turn.workspace
        match call.arguments:
            case ListFilesArgs(path=path):
                done = list_files(workspace, path)
            case ReadFileArgs(path=path):
                done = read_file(workspace, path)
            case WriteFileArgs(path=path, content=content):
                done = write_file(workspace, path, content, self._journal(call.id))
            case ReplaceInFileArgs(path=path, old=old, new=new):
                done = replace_in_file(workspace, path, old, new, self._journal(call.id))
            case SearchArgs(pattern=pattern, path=where):
                done = search(workspace, pattern, where)
            case RunArgs(command=command):
                return self._run(call, command)
            case _:
                done = ToolResult.error(f"{call.name.value} is not a workspace tool")
        return self.result(call, done.status is ToolStatus.ok, done.text)

    def _journal(self, call_id: str) -> EditJournal:
        saved = self.state.get("pending_edit")
        pending = None
        if isinstance(saved, dict) and saved.get("call") == call_id:
            pending = Intent.from_data(saved)

        def record(intent: Intent, changes: bool) -> None:
            self.state["pending_edit"] = {"call": call_id, **intent.to_data()}
            self._save()

        return EditJournal(pending, record)

    def _run(self, call: ToolCall, command: str) -> CallResult:
        turn = self.turn
        marker = self.state.get("running")
        if isinstance(marker, dict) and marker.get("call") == call.id:
            # Rule 9: the command was under way when the runner stopped. Its effects cannot
            # be measured (an ignored file, a database), so running it again could do twice.
            return self.result(call, False, INTERRUPTED_RUN)
        if turn.allow_unsandboxed and sandbox_problem() is not None:
            self.state["unsandboxed"] = True  # recorded before it runs: unproven even on a crash
        self.state["running"] = {"call": call.id}
        self._save()
        try:
            ran = run_in_workspace(
                command,
                turn.workspace,
                timeout=RUN_TIMEOUT,
                should_stop=turn.stop_requested,
                allow_unsandboxed=turn.allow_unsandboxed,
                hidden=turn.hidden_paths,
            )
        except (BoundaryError, WorkspaceError) as error:
            return self.result(call, False, f"the command could not run: {error}")
        except OSError as error:
            return self.result(call, False, f"the command could not start: {error.strerror}")
        if ran.exit_code is None:
            head = "stopped" if ran.stopped else f"did not finish within {RUN_TIMEOUT:g} seconds"
            return self.result(call, False, f"the command {head}\n{ran.output}")
        text = (
            f"exit code {ran.exit_code}\n{ran.output}"
            if ran.output
            else f"exit code {ran.exit_code}"
        )
        return self.result(call, ran.exit_code == 0, text)
