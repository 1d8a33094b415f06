"""The tools a model sees, as OpenAI `tools` schemas, and the parser for the calls it makes.

One pydantic model per tool is the single source of truth: the JSON Schema the model is
offered is built from it, and a call's arguments are validated against it. Every argument
is text, so the schema stays the plain subset every OpenAI-compatible server understands.
A call the model gets wrong becomes a `CallProblem` whose message goes back to the model as
the tool's result: a model's mistake is a turn of the conversation, never a failed job.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cairn.sanitize import bound, mask_secret_shapes, strip_control

# What of a model's own wrong output is echoed back to it: enough to recognise, never a flood.
_ECHO_LIMIT = 80


class ToolName(StrEnum):
    list_files = "list_files"
    """List the files under a folder of the workspace."""
    read_file = "read_file"
    """Read one file of the workspace."""
    write_file = "write_file"
    """Create or replace one file with the given content."""
    replace_in_file = "replace_in_file"
    """Replace exactly one occurrence of a text in a file."""
    search = "search"
    """Search the workspace's files for a regular expression."""
    run = "run"
    """Run a shell command in the sandbox (time-limited, output bounded and masked)."""
    request_dependency = "request_dependency"
    """Ask a person to approve one exact package version."""
    finish = "finish"
    """End the turn with a summary of what was done."""


class _Arguments(BaseModel):
    # Strict: a model that sends a number where text is asked gets told, not coerced.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class ListFilesArgs(_Arguments):
    """Arguments of `list_files`."""

    path: str = Field(description="A folder relative to the workspace root; '.' is the root.")


class ReadFileArgs(_Arguments):
    """Arguments of `read_file`."""

    path: str = Field(min_length=1, description="A file path relative to the workspace root.")


class WriteFileArgs(_Arguments):
    """Arguments of `write_file`."""

    path: str = Field(min_length=1, description="A file path relative to the workspace root.")
    content: str = Field(description="The file's whole new content.")


class ReplaceInFileArgs(_Arguments):
    """Arguments of `replace_in_file`."""

    path: str = Field(min_length=1, description="A file path relative to the workspace root.")
    old: str = Field(min_length=1, description="The exact text to replace; it must occur once.")
    new: str = Field(description="The text to put in its place.")


class SearchArgs(_Arguments):
    """Arguments of `search`."""

    pattern: str = Field(min_length=1, description="A regular expression to look for.")
    path: str | None = Field(
        default=None, description="A folder or file to search in; the whole workspace if left out."
    )


class RunArgs(_Arguments):
    """Arguments of `run`."""

    command: str = Field(min_length=1, description="A shell command, run in the workspace.")


class RequestDependencyArgs(_Arguments):
    """Arguments of `request_dependency`."""

    ecosystem: str = Field(min_length=1, description="The package registry: 'pypi' or 'npm'.")
    name: str = Field(min_length=1, description="The package's name in that registry.")
    version: str = Field(min_length=1, description="One exact published version, no range.")
    reason: str = Field(min_length=1, description="Why the job needs this package.")


class FinishArgs(_Arguments):
    """Arguments of `finish`; an empty summary parses, and the loop decides on summary repair."""

    summary: str = Field(description="What changed and why, for the reviewer.")


ToolArguments = (
    ListFilesArgs
    | ReadFileArgs
    | WriteFileArgs
    | ReplaceInFileArgs
    | SearchArgs
    | RunArgs
    | RequestDependencyArgs
    | FinishArgs
)

_ARGUMENTS: dict[ToolName, type[_Arguments]] = {
    ToolName.list_files: ListFilesArgs,
    ToolName.read_file: ReadFileArgs,
    ToolName.write_file: WriteFileArgs,
    ToolName.replace_in_file: ReplaceInFileArgs,
    ToolName.search: SearchArgs,
    ToolName.run: RunArgs,
    ToolName.request_dependency: RequestDependencyArgs,
    ToolName.finish: FinishArgs,
}

# What the model reads about each tool; the results' own rules are the adapter's to enforce.
_DESCRIPTIONS: dict[ToolName, str] = {
    ToolName.list_files: "List the files and folders under a folder of the workspace.",
    ToolName.read_file: "Read a text file of the workspace.",
    ToolName.write_file: (
        "Create a file or replace its whole content; parent folders are created."
    ),
    ToolName.replace_in_file: (
        "Replace one exact text in a file with another; the old text must occur exactly "
        "once, else nothing changes and the result says why."
    ),
    ToolName.search: "Search the workspace's files for a regular expression; lists the matches.",
    ToolName.run: (
        "Run a shell command in the workspace, in a sandbox; time-limited, its output is "
        "bounded. Packages cannot be installed this way: use request_dependency."
    ),
    ToolName.request_dependency: (
        "Ask a person to approve and install one exact package version. The turn pauses "
        "until the decision; the result then says whether the package is installed."
    ),
    ToolName.finish: "End the turn with a short summary of what changed and why.",
}

ALL_TOOLS: tuple[ToolName, ...] = tuple(ToolName)


@dataclass(frozen=True)
class ToolCall:
    """One validated call of an offered tool; `id` pairs it with its result."""

    id: str
    name: ToolName
    arguments: ToolArguments

    def to_openai(self) -> dict[str, Any]:
        """The call as an assistant message's `tool_calls` entry."""
        arguments = self.arguments.model_dump(exclude_none=True)
        function = {"name": self.name.value, "arguments": json.dumps(arguments)}
        return {"id": self.id, "type": "function", "function": function}


@dataclass(frozen=True)
class CallProblem:
    """A call that cannot run; `message` is the tool result the model gets instead."""

    id: str
    name: str
    message: str


def tool_schema(name: ToolName) -> dict[str, Any]:
    """One tool as an OpenAI `tools` entry (`type: function`, JSON Schema parameters)."""
    fields = _ARGUMENTS[name].model_fields
    properties = {
        field: {"type": "string", "description": info.description or field}
        for field, info in fields.items()
    }
    parameters = {
        "type": "object",
        "properties": properties,
        "required": [field for field, info in fields.items() if info.is_required()],
        "additionalProperties": False,
    }
    function = {"name": name.value, "description": _DESCRIPTIONS[name], "parameters": parameters}
    return {"type": "function", "function": function}


def openai_tools(offered: Iterable[ToolName] = ALL_TOOLS) -> list[dict[str, Any]]:
    """The `tools` list of a chat completion request offering `offered`."""
    return [tool_schema(name) for name in offered]


def summary_repair_tools() -> list[dict[str, Any]]:
    """The tools of a summary repair: every tool removed except `finish`."""
    return openai_tools([ToolName.finish])


def parse_tool_call(
    call_id: str,
    name: str,
    arguments: object,
    offered: Sequence[ToolName] = ALL_TOOLS,
) -> ToolCall | CallProblem:
    """An OpenAI tool call (name, JSON arguments) as a `ToolCall`, or what the model got wrong.

    `arguments` is the JSON text of the call, or an object already decoded (a text call's).
    """
    if name not in {tool.value for tool in offered}:
        names = ", ".join(tool.value for tool in offered)
        message = f"unknown tool {_echo(name)}; the tools are: {names}"
        return CallProblem(call_id, name, message)
    tool = ToolName(name)
    try:
        data = _arguments_object(arguments)
        parsed = _ARGUMENTS[tool].model_validate(data)
    except (ValueError, ValidationError) as error:
        return CallProblem(call_id, name, f"bad arguments for {tool.value}: {_problem(error)}")
    return ToolCall(call_id, tool, cast("ToolArguments", parsed))


def _arguments_object(arguments: object) -> dict[str, Any]:
    if isinstance(arguments, str):
        # Some servers send "" for a call without arguments; that is the empty object.
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as error:
            raise ValueError(f"the arguments are not valid JSON ({error.msg})") from None
    if not isinstance(arguments, dict):
        raise ValueError("the arguments must be a JSON object")
    return arguments


def _problem(error: ValueError | ValidationError) -> str:
    if not isinstance(error, ValidationError):
        return str(error)
    # Our own words per field, never the input back: it may be a whole file's content.
    parts = []
    for detail in error.errors(include_url=False, include_input=False):
        field = ".".join(str(part) for part in detail["loc"]) or "arguments"
        parts.append(f"{_echo(field)}: {_FIELD_PROBLEMS.get(detail['type'], detail['msg'])}")
    return "; ".join(parts)


_FIELD_PROBLEMS = {
    "missing": "is required",
    "extra_forbidden": "is not an argument of this tool",
    "string_type": "must be text",
    "string_too_short": "must not be empty",
}


def _echo(text: str) -> str:
    return repr(bound(mask_secret_shapes(strip_control(text)), _ECHO_LIMIT))


class RoomFacts(Protocol):
    """What the system prompt says about the room (a store `Room` has these)."""

    @property
    def name(self) -> str: ...
    @property
    def base_branch(self) -> str: ...
    @property
    def verify_command(self) -> str | None: ...


class RequestFacts(Protocol):
    """What the system prompt says about the request (a store `Request` has these)."""

    @property
    def kind(self) -> str: ...
    @property
    def text(self) -> str: ...


_KIND_LINES = {
    "interactive": "A person asked for this change and reviews the result.",
    "scheduled": (
        "This job runs on a schedule; it starts fresh from the repository, not from an "
        "earlier run's conversation."
    ),
}


_TEXT_PROTOCOL = (
    "Call a tool by answering with one JSON object in a ```json block, for example:\n"
    '```json\n{"name": "read_file", "arguments": {"path": "README.md"}}\n```\n'
    "Several calls are several blocks. Each result comes back as the next user message."
)


def system_prompt(request: RequestFacts, room: RoomFacts, *, text_protocol: bool = False) -> str:
    """The system message: what the job is, what the tools do, how packages and the turn work.

    With `text_protocol` (a server without native tool calls) it also says how to write one.
    """
    # Masked: a verify command may carry a token, and the prompt must carry none.
    verify = room.verify_command
    lines = [
        "You are a coding agent working in a git checkout of the repository of room "
        f"{_fact(room.name)}, on a branch made from {_fact(room.base_branch)}.",
        _KIND_LINES.get(request.kind, _KIND_LINES["interactive"]),
        "The request is the first user message; later user messages are follow-ups from "
        "the reviewer and refine it.",
        "Work only through the tools; paths are relative to the workspace root.",
        "",
        "Tools:",
        *(f"- {tool.value} {_signature(tool)}: {_DESCRIPTIONS[tool]}" for tool in ALL_TOOLS),
        *(["", _TEXT_PROTOCOL] if text_protocol else []),
        "",
        "A package the work needs must be asked for with request_dependency (one exact "
        "version); never install it with run.",
        "A tool that fails returns its error as the result; read it and go on.",
    ]
    if verify:
        lines.append(f"After your turn cairn checks the work with: {_fact(verify)}")
    lines.append(
        "End every turn by calling finish with a summary of what changed and why; change "
        "files first, finish last."
    )
    return "\n".join(lines)


def opening_messages(
    request: RequestFacts, room: RoomFacts, *, text_protocol: bool = False
) -> list[dict[str, Any]]:
    """A fresh conversation: the system prompt, then the request as the first user message.

    The request text goes as stored: submit sanitized it once, and the model sees that copy.
    """
    return [
        {"role": "system", "content": system_prompt(request, room, text_protocol=text_protocol)},
        {"role": "user", "content": request.text},
    ]


def _signature(tool: ToolName) -> str:
    """`{path, content}`, optional arguments marked: how the prompt shows a tool's arguments."""
    fields = _ARGUMENTS[tool].model_fields
    return "{" + ", ".join(f + ("" if i.is_required() else "?") for f, i in fields.items()) + "}"


def _fact(text: str) -> str:
    return mask_secret_shapes(strip_control(text))
