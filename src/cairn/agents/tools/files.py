"""The workspace file tools a model calls: each bounded, symlink-safe, and never raising.

Every tool returns a `ToolResult` the model can read. What goes wrong (a path outside the
workspace, a missing file, an ambiguous replacement) is an error result, not an exception:
a model that named a wrong path should be told and try again, not fail the job. Paths the
results show are the workspace-relative ones the model used, never local paths.
"""

from __future__ import annotations

import os
import re
import signal
import stat
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from cairn.agents.tools.edits import EditJournal, ToolFailed, apply_once, read_regular
from cairn.errors import BoundaryError
from cairn.workspace.boundary import open_folder_inside, resolve_inside
from cairn.workspace.commands import materialized_dependencies

READ_LIMIT_BYTES = 64 * 1024
"""The most of one file `read_file` returns; the result says when it cut the rest."""
WRITE_LIMIT_BYTES = 1024 * 1024
"""The largest content `write_file` and `replace_in_file` accept."""
LIST_LIMIT = 500
"""The most entries `list_files` returns."""
SEARCH_MATCHES = 100
"""The most matching lines `search` returns."""
SEARCH_FILES = 10_000
"""The most files one search reads."""
SEARCH_FILE_BYTES = 1024 * 1024
"""Larger files are not searched (generated or data files, not code)."""
LINE_CHARS = 300
"""A matching line is cut to this many characters."""
PATTERN_CHARS = 500
SEARCH_SECONDS = 10.0
"""How long one search may take: a pattern that backtracks for ever must not hang the turn."""
WALK_DEPTH = 40
"""Folders nested deeper are not listed or searched (and the walk's descriptors stay few)."""
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_ROOT_NAMES = ("", ".", "./")


class ToolStatus(StrEnum):
    ok = "ok"
    """The tool did what it was asked."""
    error = "error"
    """The tool refused or could not; its text says why, for the model to correct course."""


@dataclass(frozen=True)
class ToolResult:
    status: ToolStatus
    text: str
    """What the model reads back."""

    @classmethod
    def ok(cls, text: str) -> ToolResult:
        """A result of a tool that did what it was asked."""
        return cls(ToolStatus.ok, text)

    @classmethod
    def error(cls, text: str) -> ToolResult:
        """A refusal or failure the model is told about."""
        return cls(ToolStatus.error, text)


def _as_result(tool: Callable[[], ToolResult], doing: str) -> ToolResult:
    """Run `tool`, turning what a model's mistake (or the file system) raises into a result."""
    try:
        return tool()
    except (BoundaryError, ToolFailed) as exc:
        return ToolResult.error(str(exc))
    except IsADirectoryError:
        return ToolResult.error(f"could not {doing}: it is a folder, not a file")
    except UnicodeError:
        # JSON arguments may carry lone surrogates, which no file name or UTF-8 file can hold.
        return ToolResult.error(f"could not {doing}: the text is not valid Unicode")
    except OSError as exc:
        # strerror only: the exception's own text would carry local paths.
        return ToolResult.error(f"could not {doing}: {exc.strerror or 'the file system refused'}")


def list_files(workspace: Path, path: str = ".") -> ToolResult:
    """The files under the folder `path` (the workspace root by default), one per line."""
    shown = path or "."

    def listing() -> ToolResult:
        lines: list[str] = []
        with _opened_folder(workspace, path) as folder:
            for relative, kind, _fd, _name in _entries(workspace, folder, path):
                if len(lines) == LIST_LIMIT:
                    lines.append("… (more entries left out; list a subfolder to see them)")
                    break
                lines.append(f"{relative} -> (a symlink)" if kind == "link" else relative)
        return ToolResult.ok("\n".join(lines) if lines else f"{shown} is empty")

    return _as_result(listing, f"list {shown}")


def read_file(workspace: Path, path: str) -> ToolResult:
    """The text of the file `path`, cut at READ_LIMIT_BYTES (the result says so)."""

    def reading() -> ToolResult:
        data = _read(workspace, path, READ_LIMIT_BYTES + 1)
        if data is None:
            return ToolResult.error(f"there is no file {path}; list_files shows what exists")
        if b"\0" in data:
            return ToolResult.error(f"{path} is a binary file; only text files can be read")
        text = data[:READ_LIMIT_BYTES].decode("utf-8", errors="replace")
        if len(data) > READ_LIMIT_BYTES:
            text += f"\n… ({path} continues; only its first {READ_LIMIT_BYTES} bytes are shown)"
        return ToolResult.ok(text)

    return _as_result(reading, f"read {path}")


def write_file(workspace: Path, path: str, content: str, journal: EditJournal) -> ToolResult:
    """Give the file `path` exactly `content` (folders are created), exactly once."""

    def writing() -> ToolResult:
        data = content.encode("utf-8")
        if len(data) > WRITE_LIMIT_BYTES:
            return ToolResult.error(f"the content is larger than {WRITE_LIMIT_BYTES} bytes")
        apply_once(workspace, path, lambda before: data, journal)
        return ToolResult.ok(f"wrote {path} ({len(data)} bytes)")

    return _as_result(writing, f"write {path}")


def replace_in_file(
    workspace: Path, path: str, old: str, new: str, journal: EditJournal
) -> ToolResult:
    """Replace the one occurrence of `old` in the file `path` by `new`, exactly once."""
    if not old:
        return ToolResult.error("`old` is empty; give the exact text to replace")

    def replaced(before: bytes | None) -> bytes:
        if before is None:
            raise ToolFailed(f"there is no file {path}; list_files shows what exists")
        text = before.decode("utf-8", errors="strict")
        count = text.count(old)
        if count != 1:
            what = "does not occur" if count == 0 else f"occurs {count} times"
            raise ToolFailed(
                f"`old` {what} in {path}; it must occur exactly once (include more of the "
                "surrounding lines to make it unique, and copy it exactly)"
            )
        after = text.replace(old, new, 1).encode("utf-8")
        if len(after) > WRITE_LIMIT_BYTES:
            raise ToolFailed(f"the result would be larger than {WRITE_LIMIT_BYTES} bytes")
        return after

    def replacing() -> ToolResult:
        try:
            apply_once(workspace, path, replaced, journal)
        except UnicodeDecodeError:
            return ToolResult.error(f"{path} is not UTF-8 text; it cannot be edited by replacing")
        return ToolResult.ok(f"replaced one occurrence in {path}")

    return _as_result(replacing, f"edit {path}")


def search(workspace: Path, pattern: str, path: str | None = None) -> ToolResult:
    """Lines matching the regular expression `pattern` under `path` (a file or a folder)."""
    if not pattern or len(pattern) > PATTERN_CHARS:
        return ToolResult.error(f"give a pattern of 1 to {PATTERN_CHARS} characters")
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        return ToolResult.error(f"the pattern is not a valid regular expression: {exc}")
    where = path or "."
    too_long = f"the search took longer than {SEARCH_SECONDS:g} s; narrow the pattern or the path"

    def searching() -> ToolResult:
        hits: list[str] = []
        deadline = time.monotonic() + SEARCH_SECONDS
        for index, (relative, data) in enumerate(_searched_files(workspace, where)):
            if index == SEARCH_FILES:
                hits.append(f"… (stopped after {SEARCH_FILES} files; narrow the path)")
                break
            if time.monotonic() > deadline:
                raise _SearchTooLong
            for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
                if compiled.search(line):
                    if len(hits) == SEARCH_MATCHES:
                        hits.append("… (more matches left out; narrow the pattern or path)")
                        return ToolResult.ok("\n".join(hits))
                    hits.append(f"{relative}:{number}: {line[:LINE_CHARS]}")
        return ToolResult.ok("\n".join(hits) if hits else f"no line under {where} matches")

    try:
        with _interrupted_after(SEARCH_SECONDS):
            return _as_result(searching, f"search {where}")
    except _SearchTooLong:
        return ToolResult.error(too_long)


class _SearchTooLong(Exception):
    """A search ran out of time."""


@contextmanager
def _interrupted_after(seconds: float) -> Iterator[None]:
    """Interrupt the block after `seconds`, even inside one regular expression match.

    Python's `re` checks for signals while it backtracks, so an alarm stops a pattern such as
    `(a+)+$` that would otherwise run for ever. Signals reach only the main thread: elsewhere the
    search is bounded by its deadline between files alone.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(signum: int, frame: object) -> None:
        raise _SearchTooLong

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _read(workspace: Path, path: str, limit: int) -> bytes | None:
    target = resolve_inside(workspace, path)
    try:
        folder = open_folder_inside(workspace, target.parent)
    except FileNotFoundError:
        return None
    try:
        return read_regular(folder, target.name, path, limit)
    finally:
        os.close(folder)


def _searched_files(workspace: Path, where: str) -> Iterator[tuple[str, bytes]]:
    """(path, bytes) of each text file to search: `where` itself when it is a file."""
    if where not in _ROOT_NAMES:
        target = resolve_inside(workspace, where)
        if stat.S_ISREG(target.lstat().st_mode):
            data = _read(workspace, where, SEARCH_FILE_BYTES + 1)
            if data is not None and len(data) <= SEARCH_FILE_BYTES:
                yield where, data
            return
    with _opened_folder(workspace, where) as folder:
        for relative, kind, fd, name in _entries(workspace, folder, where):
            if kind != "file":
                continue
            try:
                data = read_regular(fd, name, relative, SEARCH_FILE_BYTES + 1)
            except (BoundaryError, ToolFailed, OSError):
                continue  # a hard link, a FIFO, an unreadable file: not searched
            if data is not None and len(data) <= SEARCH_FILE_BYTES and b"\0" not in data:
                yield relative, data


@contextmanager
def _opened_folder(workspace: Path, path: str) -> Iterator[int]:
    """The workspace folder `path` (its root for "."), opened without following symlinks."""
    root = workspace.resolve()
    folder = root if path in _ROOT_NAMES else resolve_inside(workspace, path)
    try:
        fd = open_folder_inside(root, folder)
    except NotADirectoryError:
        raise ToolFailed(f"{path} is a file, not a folder") from None
    except FileNotFoundError:
        raise ToolFailed(f"there is no folder {path}; list_files shows what exists") from None
    try:
        yield fd
    finally:
        os.close(fd)


def _prefix(path: str) -> str:
    return "" if path in _ROOT_NAMES else path.rstrip("/") + "/"


def _entries(workspace: Path, folder: int, path: str) -> Iterator[tuple[str, str, int, str]]:
    """Everything under the folder `path`; from the root, without cairn's dependency folders."""
    # A materialized .venv or node_modules is cairn's (thousands of files, none the
    # repository's); naming it as the path still lists or searches it.
    root = path in _ROOT_NAMES
    skipped = tuple(f.name for f in materialized_dependencies(workspace)) if root else ()
    return _walk(folder, _prefix(path), skipped)


def _walk(
    folder: int, prefix: str, skipped: tuple[str, ...] = (), depth: int = 0
) -> Iterator[tuple[str, str, int, str]]:
    """(relative path, "file"/"link"/"other", folder fd, name) under `folder`, sorted, no .git.

    Subfolders are opened relative to their parent with O_NOFOLLOW: a symlink is listed,
    never entered, so the walk cannot leave the workspace. `skipped` names are left out of
    `folder` itself; folders deeper than WALK_DEPTH are not entered.
    """
    with os.scandir(folder) as scan:
        entries = sorted(scan, key=lambda entry: entry.name)
    for entry in entries:
        relative = prefix + entry.name
        if entry.is_symlink():
            yield relative, "link", folder, entry.name
        elif entry.is_dir(follow_symlinks=False):
            if entry.name.casefold() == ".git" or entry.name in skipped or depth >= WALK_DEPTH:
                continue
            try:
                inner = os.open(entry.name, _FOLDER_FLAGS, dir_fd=folder)
            except OSError:
                continue  # swapped for a symlink, or unreadable: not entered
            try:
                yield from _walk(inner, relative + "/", depth=depth + 1)
            finally:
                os.close(inner)
        else:
            kind = "file" if entry.is_file(follow_symlinks=False) else "other"
            yield relative, kind, folder, entry.name
