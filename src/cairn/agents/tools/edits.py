"""Exactly-once file edits in a workspace: the intent is saved first, then the effect.

An agent's edit must happen once even when the runner dies in the middle of it. The caller
saves an `Intent` (the file and the digest of the bytes it is about to hold) with the job's
context before anything is written; a resumed attempt of the same edit passes that intent
back and, when the file already holds those bytes, the edit is not made a second time. An
append or a replace applied twice would otherwise double.

Every operation goes through descriptors opened without following symlinks, and the file
is replaced atomically (a temporary file renamed over it), so neither a symlink swapped in
since the boundary check nor a crash mid-write can leave a half-written or escaped file.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import stat
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cairn.errors import BoundaryError
from cairn.no_follow import read_no_follow
from cairn.workspace.boundary import (
    hard_link_error,
    open_folder_inside,
    resolve_inside,
    shown_path,
)

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class ToolFailed(Exception):
    """A file operation could not be carried out; the message says why, without local paths.

    It never leaves cairn.agents: the script agent turns it into its step's diagnosis, the
    model tools into an error result the model reads.
    """


@dataclass(frozen=True)
class Intent:
    """An edit about to be made: the file, and the digest of its intended bytes (None: deleted)."""

    path: str
    sha256: str | None

    def to_data(self) -> dict[str, str | None]:
        """The JSON-ready form saved in the job's context."""
        return {"path": self.path, "sha256": self.sha256}

    @classmethod
    def from_data(cls, data: object) -> Intent | None:
        """The intent a saved context holds, or None when it holds none (or a malformed one)."""
        if not isinstance(data, Mapping):
            return None
        path, sha256 = data.get("path"), data.get("sha256")
        if not isinstance(path, str) or not (sha256 is None or isinstance(sha256, str)):
            return None
        return cls(path, sha256)


class RecordIntent(Protocol):
    def __call__(self, intent: Intent, changes: bool) -> None:
        """Save `intent` with the job's context before the edit happens.

        `changes` says whether the edit gives the file different bytes than it holds now.
        """


@dataclass(frozen=True)
class EditJournal:
    """What keeps one edit exactly-once: the intent an earlier attempt of it saved, if any."""

    pending: Intent | None
    """Pass the saved intent only when resuming the very edit (step, tool call) that saved it."""
    record: RecordIntent


Edit = Callable[[bytes | None], bytes | None]
"""The bytes a file should hold given what it holds now (None: absent); None deletes it."""


def apply_once(
    workspace: Path, path: str, edit: Edit, journal: EditJournal, *, deleting: bool = False
) -> None:
    """Apply `edit` to the workspace file `path` exactly once, even across a crash.

    Raises BoundaryError for a path that leaves the workspace, ToolFailed for a file that is
    not a regular file (or what `edit` refuses), and OSError when the file system refuses.
    """
    target = resolve_inside(workspace, path)
    resuming = journal.pending is not None and journal.pending.path == path
    with _folder_of(workspace, target, create=not deleting) as folder:
        if resuming and folder is not None:
            _remove_stale_temps(folder, target.name)
        if resuming and journal.pending and _already_applied(folder, target.name, journal.pending):
            return
        before = read_regular(folder, target.name, path)
        intended = edit(before)
        if folder is None:
            raise ToolFailed(f"there is no file {path} to delete")
        digest = None if intended is None else hashlib.sha256(intended).hexdigest()
        journal.record(Intent(path, digest), intended != before)
        _replace_atomically(folder, target.name, intended)


@contextmanager
def _folder_of(workspace: Path, target: Path, *, create: bool) -> Iterator[int | None]:
    """The target's folder, opened without following symlinks; None when it does not exist."""
    try:
        fd = open_folder_inside(workspace, target.parent, create=create)
    except FileNotFoundError:
        if create:
            raise
        yield None
        return
    try:
        yield fd
    finally:
        os.close(fd)


def _already_applied(folder: int | None, name: str, intent: Intent) -> bool:
    if intent.sha256 is None:
        return folder is None or not _exists(folder, name)
    current = None if folder is None else read_regular(folder, name, name)
    return current is not None and hashlib.sha256(current).hexdigest() == intent.sha256


def _exists(folder: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def read_regular(folder: int | None, name: str, shown: str, limit: int = -1) -> bytes | None:
    """The file's bytes (at most `limit`), read without following a symlink swapped in since.

    None when there is no such file; a folder reads as None too, so only a write can find
    that out (and fail). Raises BoundaryError for a symlink or a hard link, ToolFailed for
    anything that is not a regular file.
    """
    if folder is None:
        return None

    def swapped() -> BoundaryError:
        return BoundaryError(
            f"the file {shown_path(shown)} became a symlink while cairn was using it; a path that "
            "leads outside the workspace through a symlink is refused"
        )

    def plain(info: os.stat_result) -> None:
        if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
            raise hard_link_error(shown)
        if not stat.S_ISREG(info.st_mode) and not stat.S_ISDIR(info.st_mode):
            raise ToolFailed(f"{shown_path(shown)} is not a regular file")

    # Non-blocking (cairn.no_follow), so a FIFO a command left behind cannot hang the agent.
    return read_no_follow(name, dir_fd=folder, symlink_error=swapped, check=plain, limit=limit)


def _temp_prefix(name: str) -> str:
    # Truncated so the temporary name stays within the file system's name limit.
    return f".{name[:100]}.cairn-"


def _replace_atomically(folder: int, name: str, data: bytes | None) -> None:
    """Delete the file, or give it exactly `data`: never a half-written file, even on a crash.

    Everything happens relative to the folder's descriptor: a rename or unlink never follows
    a symlink, so a name swapped for one since the check is replaced, not written through.
    """
    if data is None:
        os.unlink(name, dir_fd=folder)
        os.fsync(folder)
        return
    try:
        existing_mode: int | None = stat.S_IMODE(
            os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode
        )
    except FileNotFoundError:
        existing_mode = None
    temp = f"{_temp_prefix(name)}{secrets.token_hex(6)}.tmp"
    # 0o666 lets the umask decide a new file's mode, as an ordinary write would.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC
    fd = os.open(temp, flags, 0o666, dir_fd=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if existing_mode is not None:
                os.fchmod(handle.fileno(), existing_mode)  # an edited script stays executable
            os.fsync(handle.fileno())
        os.replace(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=folder)
        raise
    os.fsync(folder)


def _remove_stale_temps(folder: int, name: str) -> None:
    """Remove temporary files a crash left beside the target, so they never reach the diff."""
    prefix = _temp_prefix(name)
    for entry in os.listdir(folder):
        if entry.startswith(prefix) and entry.endswith(".tmp"):
            info = os.stat(entry, dir_fd=folder, follow_symlinks=False)
            if stat.S_ISREG(info.st_mode):
                os.unlink(entry, dir_fd=folder)
