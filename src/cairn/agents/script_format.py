"""The script agent's format: a YAML list of steps, validated by pydantic into frozen records.

The records are plain frozen dataclasses, so the agent and the tests build steps directly
(bad paths included, to test the checks at time of use); pydantic validates only what comes
from a script or from stored JSON, and `_problem` says in cairn's words what to fix.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache, partial, reduce
from operator import or_
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, dataclass_transform

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Strict,
    Tag,
    ValidationError,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from cairn.errors import ScriptError
from cairn.sanitize import mask_secret_shapes

# Refused before parsing, by bytes: YAML parsing is slow (a few seconds for 256 KiB of short
# steps), and a script is a few kilobytes. Documented in the README.
MAX_SCRIPT_BYTES = 256 * 1024
# A job stores its parsed script in its immutable request; a bound keeps a YAML alias
# bomb (one huge string referenced many times) from becoming a huge request row.
MAX_SCRIPT_CHARS = 5_000_000


def _text(value: str) -> str:
    if "\0" in value:
        raise PydanticCustomError("text", "contains a NUL character; scripts carry text only")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise PydanticCustomError(
            "text", "contains an unpaired surrogate; use real characters"
        ) from None
    return value


def _said(value: str) -> str:
    if not value:
        raise PydanticCustomError("text", "is empty; give it a value")
    return value


def _given(value: object) -> object:
    # A field may be left out (its default); written as `null`, it is text missing.
    if value is None:
        raise PydanticCustomError("string_type", "must be text")
    return value


def _relative_path(path: str) -> str:
    """Refuse, before any step runs, a path that could never be inside the workspace."""
    pure, shown = PurePosixPath(path), repr(path[:80])
    if pure.is_absolute():  # not echoed: an absolute path may name the user's own folders
        problem = "the path must be relative to the workspace, not absolute"
    elif ".." in pure.parts:
        problem = f"the path {shown} climbs out of the workspace with `..`"
    # Case-insensitive because `.GIT` is the same folder on macOS and Windows file systems.
    elif any(part.lower() == ".git" for part in pure.parts):
        problem = f"the path {shown} is inside `.git`, which is off limits"
    elif not pure.parts or pure == PurePosixPath("."):
        problem = f"the path {shown} names no file"
    else:
        return path
    raise PydanticCustomError("path", "{problem}", {"problem": problem})


Content = Annotated[str, Strict(), AfterValidator(_text)]
"""Text that may be empty (file content, a summary)."""
Said = Annotated[Content, AfterValidator(_said)]
"""Text that must say something (a command, a package name)."""
StepPath = Annotated[Said, AfterValidator(_relative_path)]


@dataclass_transform(frozen_default=True)
class _Step:
    """A step record: a frozen dataclass named in YAML by `kind`.

    `scalar` names the field a bare value fills (`run: "make"`); pydantic refuses fields a
    step does not have.
    """

    kind: ClassVar[str]
    scalar: ClassVar[str | None]
    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="forbid")

    def __init_subclass__(cls, *, kind: str, scalar: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.kind, cls.scalar = kind, scalar
        dataclass(frozen=True)(cls)


class WriteStep(_Step, kind="write"):
    """Replace a file's content (creating parent folders)."""

    path: StepPath
    content: Content


class AppendStep(_Step, kind="append"):
    """Add text to the end of a file (creating it when absent)."""

    path: StepPath
    content: Content


class DeleteStep(_Step, kind="delete"):
    """Remove a file that must exist."""

    path: StepPath


class RunStep(_Step, kind="run", scalar="command"):
    """Run a shell command in the workspace; a non-zero exit fails the turn."""

    command: Said


class RequestDependencyStep(_Step, kind="request_dependency"):
    """Ask a person to approve one exact package version."""

    ecosystem: Said
    name: Said
    version: Said
    reason: Said


class LoseStreamStep(_Step, kind="lose_stream"):
    """Stop answering, as if the agent's stream were cut."""


class FailStep(_Step, kind="fail", scalar="message"):
    """Give up with a diagnosis."""

    message: Said


class FinishStep(_Step, kind="finish"):
    """End the turn, reporting whether this job changed any file."""

    summary: Annotated[Content | None, BeforeValidator(_given)] = None


Step = (
    WriteStep
    | AppendStep
    | DeleteStep
    | RunStep
    | RequestDependencyStep
    | LoseStreamStep
    | FailStep
    | FinishStep
)
FileStep = WriteStep | AppendStep | DeleteStep

STEP_TYPES: dict[str, type[Step]] = {
    cls.kind: cls
    for cls in (
        WriteStep,
        AppendStep,
        DeleteStep,
        RunStep,
        RequestDependencyStep,
        LoseStreamStep,
        FailStep,
        FinishStep,
    )
}
# Fields (and scalar steps) that are text for people rather than code or file content.
PROSE_FIELDS = frozenset({"fail", "message", "summary", "reason"})


def _kind_of(raw: object) -> str | None:
    """The step's name when it is a one-key mapping naming a known step (pydantic's tag)."""
    if isinstance(raw, Mapping) and len(raw) == 1:
        (name,) = raw
        return name if isinstance(name, str) and name in STEP_TYPES else None
    return None


def _body(cls: type[Step], raw: Mapping[str, Any]) -> object:
    """A step's fields from `{kind: body}`: a bare value fills the scalar field."""
    body = raw[cls.kind]
    if cls.scalar is not None:
        return {cls.scalar: body}
    return {} if body is None else body  # `- lose_stream:` with nothing after the colon


def _tagged_step(cls: type[Step]) -> Any:
    return Annotated[cls, BeforeValidator(partial(_body, cls)), Tag(cls.kind)]


if TYPE_CHECKING:
    ScriptStep = Step
else:
    # One choice per step kind, picked by the step's one key.
    ScriptStep = Annotated[
        reduce(or_, map(_tagged_step, STEP_TYPES.values())), Discriminator(_kind_of)
    ]


class _Document(BaseModel):
    """A script as written: a mapping with one `steps:` list."""

    # Built on first use, not on import: `cairn --help` imports this module's package.
    model_config = ConfigDict(extra="forbid", defer_build=True)

    steps: Annotated[list[ScriptStep], Strict()]


@dataclass(frozen=True)
class Script:
    """A parsed script: the ordered steps the agent replays."""

    steps: tuple[Step, ...] = ()


def read_script_text(path: Path) -> str:
    """A script file's UTF-8 text, refused unread beyond its first MAX_SCRIPT_BYTES (+1)."""
    with path.open("rb") as file:
        data = file.read(MAX_SCRIPT_BYTES + 1)
    _check_size(len(data))
    return data.decode("utf-8")


def parse_script(text: str) -> Script:
    """Parse a script's YAML text, raising ScriptError that says what to fix."""
    _check_size(len(text.encode("utf-8", "surrogatepass")))
    try:
        data = yaml.safe_load(text)
    # PyYAML raises more than YAMLError on odd input (ValueError for an impossible date,
    # RecursionError for deep nesting); every one of them means "fix the YAML".
    except Exception as exc:
        raise ScriptError(f"the script is not valid YAML ({_yaml_problem(exc)}); fix it") from None
    return script_from_data(data)


def _check_size(size: int) -> None:
    if size > MAX_SCRIPT_BYTES:
        raise ScriptError(
            f"the script is larger than {MAX_SCRIPT_BYTES // 1024} KiB; "
            "keep it short (long file contents belong in the repository, not in the script)"
        )


def script_from_data(data: object) -> Script:
    """Rebuild a Script from plain data (parsed YAML or stored JSON), validating everything."""
    try:
        document = _Document.model_validate(data)
    except ValidationError as exc:
        raise ScriptError(_problem(data, exc.errors())) from None
    steps = tuple(document.steps)
    total = sum(len(value) for step in steps for value in _fields(step).values() if value)
    if total > MAX_SCRIPT_CHARS:
        raise ScriptError(
            f"the script carries {total} characters of text; keep it under {MAX_SCRIPT_CHARS}"
        )
    return Script(steps)


def script_to_data(script: Script) -> dict[str, Any]:
    """Plain JSON-ready data that `script_from_data` turns back into the same Script."""
    steps: list[dict[str, Any]] = []
    for step in script.steps:
        fields = _fields(step)
        if step.scalar is not None:
            steps.append({step.kind: fields[step.scalar]})
        else:
            steps.append({step.kind: {k: v for k, v in fields.items() if v is not None}})
    return {"steps": steps}


def _fields(step: Step) -> dict[str, Any]:
    return {f.name: getattr(step, f.name) for f in dataclasses.fields(step)}


def _problem(data: object, errors: Sequence[ErrorDetails]) -> str:
    """What to fix, from pydantic's first complaint and the data it was about."""
    if not isinstance(data, Mapping):
        return "a script must be a mapping with a `steps:` list, for example `steps: []`"
    extra = [_shown_key(key) for key in data if key != "steps"]
    if extra:
        return f"unknown top-level key(s) {', '.join(extra)}; only `steps:` is allowed"
    in_steps = [error for error in errors if len(error["loc"]) > 1]
    if len(in_steps) < len(errors):
        return "a script needs a `steps:` list, for example `steps: [finish: {}]`"
    index = min(int(error["loc"][1]) for error in in_steps)
    step_errors = [error for error in in_steps if error["loc"][1] == index]
    return _step_problem(index + 1, data["steps"][index], step_errors)


def _step_problem(number: int, raw: Any, errors: list[ErrorDetails]) -> str:
    name = _kind_of(raw)
    if name is None:
        if isinstance(raw, Mapping) and len(raw) == 1:
            (key,) = raw
            return f"step {number}: unknown step {_shown_key(key)}; use one of {_valid_names()}"
        return (
            f"step {number}: each step must be a mapping with exactly one key, "
            f"the step name (one of {_valid_names()}), for example `- finish: {{}}`"
        )
    cls, where = STEP_TYPES[name], f"step {number} ({name})"
    body, kinds = _body(cls, raw), {error["type"] for error in errors}
    if not isinstance(body, Mapping):
        return f"{where}: expected a mapping of fields, for example {_example(cls)}"
    names = [f.name for f in dataclasses.fields(cls)]
    # Read from the body: pydantic reports a key that is not text (or not Unicode) otherwise.
    extra = [_shown_key(key) for key in body if key not in names]
    if extra:
        return (
            f"{where}: unexpected field(s) {', '.join(extra)}; "
            f"the fields are {', '.join(names) or 'none'}, for example {_example(cls)}"
        )
    if "missing" in kinds:
        missing = ", ".join(str(error["loc"][-1]) for error in errors if error["type"] == "missing")
        return f"{where}: missing field(s) {missing}, for example {_example(cls)}"
    # The first field as written, as a reader goes through the step.
    order = list(body)
    error = min(errors, key=lambda error: order.index(error["loc"][-1]))
    return _field_problem(where, str(error["loc"][-1]), error)


def _field_problem(where: str, field: str, error: ErrorDetails) -> str:
    if error["type"] == "path":
        return f"{where}: {error['msg']}"
    if error["type"] == "text":
        return f"{where}: `{field}` {error['msg']}"
    return (
        f"{where}: `{field}` must be text, not {_type_name(error['input'])}; "
        'quote it (for example "13.7")'
    )


def _example(cls: type[Step]) -> str:
    samples = {
        "path": "src/app.py",
        "content": "print('hi')\\n",
        "command": "python src/app.py",
        "ecosystem": "pypi",
        "name": "rich",
        "version": "13.7.1",
        "reason": "colour output",
        "message": "could not find the entry point",
        "summary": "Added src/app.py",
    }
    if cls.scalar is not None:
        return f'`{cls.kind}: "{samples[cls.scalar]}"`'
    inner = ", ".join(f'{f.name}: "{samples[f.name]}"' for f in dataclasses.fields(cls))
    return f"`{cls.kind}: {{{inner}}}`"


@cache
def _valid_names() -> str:
    return ", ".join(STEP_TYPES)


def _shown_key(key: object) -> str:
    # Keys come from untrusted YAML: any type, any length, perhaps a pasted token.
    shown = repr(mask_secret_shapes(key) if isinstance(key, str) else key)[:60]
    return shown if isinstance(key, str) else f"{shown} ({_type_name(key)})"


def _type_name(value: object) -> str:
    names = {
        dict: "a mapping",
        list: "a list",
        bool: "true/false",
        int: "a number",
        float: "a number",
        type(None): "empty",
    }
    return names.get(type(value), f"a {type(value).__name__}")


def _yaml_problem(exc: BaseException) -> str:
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        return f"{exc.problem} at line {mark.line + 1}, column {mark.column + 1}"
    if isinstance(exc, RecursionError):
        return "it is nested too deeply"
    return str(exc)[:200] or type(exc).__name__
