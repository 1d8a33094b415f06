"""The script agent's format: a YAML list of steps, parsed once into frozen records."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

import yaml

from cairn.errors import ScriptError
from cairn.sanitize import mask_secret_shapes

# Refused before parsing, by bytes: YAML parsing is slow (a few seconds for 256 KiB of short
# steps), and a script is a few kilobytes. Documented in the README.
MAX_SCRIPT_BYTES = 256 * 1024
# A job stores its parsed script in its immutable request; a bound keeps a YAML alias
# bomb (one huge string referenced many times) from becoming a huge request row.
MAX_SCRIPT_CHARS = 5_000_000


@dataclass(frozen=True)
class WriteStep:
    """Replace a file's content (creating parent folders)."""

    kind: ClassVar[str] = "write"
    path: str
    content: str


@dataclass(frozen=True)
class AppendStep:
    """Add text to the end of a file (creating it when absent)."""

    kind: ClassVar[str] = "append"
    path: str
    content: str


@dataclass(frozen=True)
class DeleteStep:
    """Remove a file that must exist."""

    kind: ClassVar[str] = "delete"
    path: str


@dataclass(frozen=True)
class RunStep:
    """Run a shell command in the workspace; a non-zero exit fails the turn."""

    kind: ClassVar[str] = "run"
    command: str


@dataclass(frozen=True)
class RequestDependencyStep:
    """Ask a person to approve one exact package version."""

    kind: ClassVar[str] = "request_dependency"
    ecosystem: str
    name: str
    version: str
    reason: str


@dataclass(frozen=True)
class LoseStreamStep:
    """Stop answering, as if the agent's stream were cut."""

    kind: ClassVar[str] = "lose_stream"


@dataclass(frozen=True)
class FailStep:
    """Give up with a diagnosis."""

    kind: ClassVar[str] = "fail"
    message: str


@dataclass(frozen=True)
class FinishStep:
    """End the turn, reporting whether this job changed any file."""

    kind: ClassVar[str] = "finish"
    summary: str | None = None


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
# Steps written as a bare string (`run: "make"`) rather than a mapping, and the field it fills.
_SCALAR_FIELD = {"run": "command", "fail": "message"}
# Fields that may be empty; every other field must say something.
_MAY_BE_EMPTY = {"content", "summary"}
# Fields (and scalar steps) that are text for people rather than code or file content.
PROSE_FIELDS = frozenset({"fail", "message", "summary", "reason"})


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
    if not isinstance(data, Mapping):
        raise ScriptError(
            "a script must be a mapping with a `steps:` list, for example `steps: []`"
        )
    extra = [_shown_key(key) for key in data if key != "steps"]
    if extra:
        raise ScriptError(f"unknown top-level key(s) {', '.join(extra)}; only `steps:` is allowed")
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list):
        raise ScriptError("a script needs a `steps:` list, for example `steps: [finish: {}]`")
    steps = tuple(_parse_step(number, raw) for number, raw in enumerate(raw_steps, start=1))
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
        if step.kind in _SCALAR_FIELD:
            steps.append({step.kind: fields[_SCALAR_FIELD[step.kind]]})
        else:
            steps.append({step.kind: {k: v for k, v in fields.items() if v is not None}})
    return {"steps": steps}


def _fields(step: Step) -> dict[str, Any]:
    return {f.name: getattr(step, f.name) for f in dataclasses.fields(step)}


def _parse_step(number: int, raw: object) -> Step:
    if not isinstance(raw, Mapping) or len(raw) != 1:
        raise ScriptError(
            f"step {number}: each step must be a mapping with exactly one key, "
            f"the step name (one of {_valid_names()}), for example `- finish: {{}}`"
        )
    ((name, body),) = raw.items()
    cls = STEP_TYPES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ScriptError(
            f"step {number}: unknown step {_shown_key(name)}; use one of {_valid_names()}"
        )
    where = f"step {number} ({name})"
    if name in _SCALAR_FIELD:
        body = {_SCALAR_FIELD[name]: body}
    elif body is None:
        body = {}  # `- lose_stream:` with nothing after the colon
    if not isinstance(body, Mapping):
        raise ScriptError(f"{where}: expected a mapping of fields, for example {_example(cls)}")
    return cls(**_checked_fields(where, cls, body))


def _checked_fields(where: str, cls: type[Step], body: Mapping[Any, Any]) -> dict[str, str]:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    extra = [_shown_key(key) for key in body if key not in fields]
    if extra:
        raise ScriptError(
            f"{where}: unexpected field(s) {', '.join(extra)}; "
            f"the fields are {', '.join(fields) or 'none'}, for example {_example(cls)}"
        )
    missing = [n for n, f in fields.items() if n not in body and f.default is dataclasses.MISSING]
    if missing:
        raise ScriptError(
            f"{where}: missing field(s) {', '.join(missing)}, for example {_example(cls)}"
        )
    checked = {}
    for name, value in body.items():
        checked[name] = _checked_text(
            f"{where}: `{name}`", value, may_be_empty=name in _MAY_BE_EMPTY
        )
        if name == "path":
            check_path_syntax(where, value)
    return checked


def _checked_text(where: str, value: object, *, may_be_empty: bool) -> str:
    if not isinstance(value, str):
        raise ScriptError(
            f'{where} must be text, not {_type_name(value)}; quote it (for example "13.7")'
        )
    if not value and not may_be_empty:
        raise ScriptError(f"{where} is empty; give it a value")
    if "\0" in value:
        raise ScriptError(f"{where} contains a NUL character; scripts carry text only")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ScriptError(f"{where} contains an unpaired surrogate; use real characters") from None
    return value


def check_path_syntax(where: str, path: str) -> None:
    """Refuse, before any step runs, a path that could never be inside the workspace."""
    pure = PurePosixPath(path)
    if pure.is_absolute():
        raise ScriptError(f"{where}: the path must be relative to the workspace, not absolute")
    if ".." in pure.parts:
        raise ScriptError(f"{where}: the path {path[:80]!r} climbs out of the workspace with `..`")
    # Case-insensitive because `.GIT` is the same folder on macOS and Windows file systems.
    if any(part.lower() == ".git" for part in pure.parts):
        raise ScriptError(f"{where}: the path {path[:80]!r} is inside `.git`, which is off limits")
    if not pure.parts or pure == PurePosixPath("."):
        raise ScriptError(f"{where}: the path {path[:80]!r} names no file")


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
    names = [f.name for f in dataclasses.fields(cls)]
    if cls.kind in _SCALAR_FIELD:
        return f'`{cls.kind}: "{samples[names[0]]}"`'
    inner = ", ".join(f'{n}: "{samples[n]}"' for n in names)
    return f"`{cls.kind}: {{{inner}}}`"


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
