"""Dependency inputs and their fingerprint: the identity of what an installer would prepare.

The fingerprint hashes the *canonical* content of the package declarations (only the fields
that decide what is installed: a new description or test script changes nothing), the exact
bytes of the lockfile, allowlisted configuration (index and registry URLs, without
credentials; auth tokens never), the repository's pinned package-manager version
(`[tool.uv] required-version`, `packageManager`), and the installer's environment: tool
version, interpreter version and path, platform, and the approved source. Formatting and
comments in declarations and configuration do not change it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
import tempfile
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cairn.canonical import digest
from cairn.errors import UsageError
from cairn.no_follow import read_no_follow

# Bump when the entry layout changes, so no entry built the old way is ever reused.
LAYOUT_VERSION = 1
LOCKFILES = ("uv.lock", "package-lock.json")
MAX_INPUT_BYTES = 32 * 1024 * 1024
_PYPROJECT_FIELDS = ("name", "dependencies", "optional-dependencies", "requires-python", "dynamic")
_PACKAGE_JSON_FIELDS = (
    "name", "dependencies", "devDependencies", "optionalDependencies", "peerDependencies",
    "peerDependenciesMeta", "bundleDependencies", "bundledDependencies", "overrides",
    "workspaces", "engines", "os", "cpu", "packageManager",
)  # fmt: skip
_UV_TOML_FIELDS = ("required-version", "index-url", "extra-index-url", "index", "find-links")
# `registry=` and `@scope:registry=` only: every other .npmrc line may hold a credential.
_NPMRC_KEY = re.compile(r"(?:@[a-z0-9._~-]+:)?registry")
_USERINFO = re.compile(r"(?<=://)[^/@\s]*@")


@dataclass(frozen=True)
class Environment:
    """What besides the inputs decides an entry's content: recorded in its fingerprint."""

    tool: str
    """The package manager and its version, e.g. `uv 0.13.9`."""
    runtime: str
    """The interpreter the packages are for, e.g. `CPython 3.11.7` or `node v20.20.2`."""
    platform: str
    """Operating system, machine and C library."""
    source: str
    """The one approved index or registry URL (without credentials)."""
    outside_links: tuple[str, ...] = field(default=())
    """Absolute paths an entry's symlinks may point to: a venv's base interpreter, nothing else."""


class InputFiles(Protocol):
    """The names an installer reads its inputs from (an `Installer`, or its class, is one)."""

    # Read-only, so that an installer class (whose names are class variables) is one too.
    @property
    def ecosystem(self) -> str: ...

    @property
    def declarations(self) -> str:
        """The package declarations file: `pyproject.toml` or `package.json`."""
        ...

    @property
    def lockfile(self) -> str: ...

    @property
    def config(self) -> tuple[str, ...]:
        """Configuration files whose allowlisted keys enter the fingerprint."""
        ...


@dataclass(frozen=True)
class DependencyInputs:
    """The dependency inputs of one project, as bytes: declarations, lockfile, config files."""

    ecosystem: str
    files: Mapping[str, bytes]

    def canonical(self) -> dict[str, Any]:
        """The content that identifies these inputs (what the fingerprint hashes)."""
        return {name: canonical_content(name, data) for name, data in sorted(self.files.items())}


def read_inputs(
    root: Path, files: InputFiles, *, require_lockfile: bool = True
) -> DependencyInputs | None:
    """The project's dependency inputs at `root`, or None when it has none for this installer.

    Files are read without following symlinks and must be regular and bounded: a workspace
    is written by an agent, and a link or a device there must not reach anything else.
    """
    declarations = _read_file(root, files.declarations)
    lockfile = _read_file(root, files.lockfile)
    if declarations is None or (lockfile is None and require_lockfile):
        return None
    found = {files.declarations: declarations}
    if lockfile is not None:
        found[files.lockfile] = lockfile
    for name in files.config:
        data = _read_file(root, name)
        if data is not None:
            found[name] = data
    return DependencyInputs(files.ecosystem, found)


def fingerprint(inputs: DependencyInputs, environment: Environment) -> str:
    """The identity of verified dependency inputs on one kind of host (hex SHA-256)."""
    return digest(
        {
            "layout": LAYOUT_VERSION,
            "ecosystem": inputs.ecosystem,
            "inputs": inputs.canonical(),
            "environment": {
                "tool": environment.tool,
                "runtime": environment.runtime,
                "platform": environment.platform,
                "source": without_credentials(environment.source),
                "outside_links": list(environment.outside_links),
            },
        }
    )


@contextlib.contextmanager
def inputs_copy(inputs: DependencyInputs) -> Iterator[Path]:
    """A temporary folder holding a copy of the inputs, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="cairn-deps-") as folder:
        write_inputs(Path(folder), inputs)
        yield Path(folder)


def write_inputs(root: Path, inputs: DependencyInputs) -> None:
    """Write the input files into `root`, replacing (never following) what is there."""
    for name, data in inputs.files.items():
        staged = root / f".{name}.cairn-new"
        staged.unlink(missing_ok=True)
        fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        # A rename replaces a symlink planted at `name` instead of writing through it.
        os.replace(staged, root / name)


def canonical_content(name: str, data: bytes) -> Any:
    """The parts of one input file that decide what is installed, as plain JSON values."""
    if name in LOCKFILES:
        # Written by the package manager, deterministically: its bytes are its canonical form,
        # and hashing them keeps a fingerprint hit free of a slow TOML parse.
        return {"sha256": hashlib.sha256(data).hexdigest()}
    try:
        if name == "pyproject.toml":
            return _pyproject(tomllib.loads(data.decode("utf-8")))
        if name == "uv.toml":
            return _picked(tomllib.loads(data.decode("utf-8")), _UV_TOML_FIELDS)
        if name == "package.json":
            return _picked(_json_object(data), _PACKAGE_JSON_FIELDS)
        if name == ".npmrc":
            return _npmrc(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, json.JSONDecodeError, TypeError):
        raise UsageError(
            f"the project's {name} cannot be parsed; fix it (it must be valid UTF-8 "
            f"{'JSON' if name.endswith('json') else 'TOML'}) and prepare the dependencies again"
        ) from None
    raise UsageError(f"{name} is not a dependency input cairn knows")


def without_credentials(url: str) -> str:
    """`url` with any `user:password@` removed: credentials never enter an identity."""
    return _USERINFO.sub("", url)


def _pyproject(document: dict[str, Any]) -> dict[str, Any]:
    project = document.get("project", {})
    tool = document.get("tool", {})
    return {
        "project": _picked(project if isinstance(project, dict) else {}, _PYPROJECT_FIELDS),
        "dependency-groups": _scrubbed(document.get("dependency-groups")),
        "tool.uv": _scrubbed(tool.get("uv") if isinstance(tool, dict) else None),
    }


def _picked(document: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    return {name: _scrubbed(document[name]) for name in names if name in document}


def _scrubbed(value: Any) -> Any:
    """Plain JSON values (TOML dates become text), with URL credentials removed."""
    if isinstance(value, dict):
        return {str(k): _scrubbed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrubbed(v) for v in value]
    if isinstance(value, str):
        return without_credentials(value)
    if isinstance(value, bool | int) or value is None:
        return value
    # Floats and dates have no canonical JSON form; their TOML/JSON spelling is stable enough.
    return repr(value)


def _json_object(data: bytes) -> dict[str, Any]:
    document = json.loads(data.decode("utf-8"))
    if not isinstance(document, dict):
        raise TypeError("not a JSON object")
    return document


def _npmrc(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and _NPMRC_KEY.fullmatch(key.strip()):
            found[key.strip()] = without_credentials(value.strip())
    return found


def _read_file(root: Path, name: str) -> bytes | None:
    def symlink() -> UsageError:
        return UsageError(
            f"the project's {name} is a symlink; cairn reads dependency inputs only from "
            "regular files inside the repository"
        )

    def bounded(info: os.stat_result) -> None:
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_INPUT_BYTES:
            raise UsageError(
                f"the project's {name} is not a regular file of at most "
                f"{MAX_INPUT_BYTES // (1024 * 1024)} MiB; cairn will not read it"
            )

    return read_no_follow(
        root / name, symlink_error=symlink, check=bounded, limit=MAX_INPUT_BYTES + 1
    )
