"""The workspace boundary: every path an agent names must resolve inside its worktree.

Three checks, each at the time of use:
- `resolve_inside` resolves a path the agent names, refusing anything that leaves the
  workspace, touches `.git`, or is a hard link (its content may be shared with a file outside).
- `open_folder_inside` opens the folder a file operation happens in one component at a time
  without following symlinks, so a symlink swapped in after the check is caught, not followed.
- `escaping_links` lists the links that lead out of the workspace (or into `.git`), so a
  caller can tell whether a command created one.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import unicodedata
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from cairn.errors import BoundaryError

_GIT_OFF_LIMITS = "the agent tried to touch the repository's .git folder, which is off limits"
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def resolve_inside(root: Path, relative: str) -> Path:
    """Resolve `relative` against `root`, refusing anything that would leave it or touch `.git`.

    Checked on the resolved path at the time of use, so a symlink planted earlier cannot
    redirect a later write outside the workspace.
    """
    pure = _checked_syntax(relative)
    root = root.resolve()
    try:
        target = (root / pure).resolve()
    except (OSError, RuntimeError):
        # A symlink loop: Python 3.11 raises RuntimeError, with the absolute path in its message.
        looped = f"the path {shown_path(relative, outside=True)} goes through a symlink loop"
        raise BoundaryError(looped) from None
    if target != root and root not in target.parents:
        raise BoundaryError(
            f"the path {shown_path(relative, outside=True)} leads outside the workspace through "
            "a symlink"
        )
    inside = target.relative_to(root).parts
    if not inside or inside[0].casefold() == ".git":
        raise BoundaryError(_GIT_OFF_LIMITS)
    _refuse_hard_link(target, relative)
    return target


def _checked_syntax(relative: str) -> PurePosixPath:
    if not relative or "\0" in relative:
        raise BoundaryError("the agent named an empty or invalid path")
    pure = PurePosixPath(relative)
    if pure.is_absolute() or Path(relative).is_absolute():
        raise BoundaryError(
            f"the agent named an absolute path ({shown_path(relative)}); "
            "only paths inside the workspace are allowed"
        )
    if ".." in pure.parts:
        raise BoundaryError(
            f"the agent named a path that climbs out of the workspace ({shown_path(relative)})"
        )
    if pure.parts and pure.parts[0].casefold() == ".git":
        raise BoundaryError(_GIT_OFF_LIMITS)
    return pure


def _refuse_hard_link(target: Path, relative: str) -> None:
    # A second name for a file may live outside the workspace; editing or reading through it
    # would reach that file. Cairn cannot see where the other names are, so it refuses all.
    try:
        found = target.lstat()
    except OSError:
        return
    if stat.S_ISREG(found.st_mode) and found.st_nlink > 1:
        raise hard_link_error(relative)


def hard_link_error(relative: str) -> BoundaryError:
    """The refusal of a file that has other names (hard links), which may lie outside."""
    return BoundaryError(
        f"the file {shown_path(relative)} is a hard link shared with another file, which may be "
        "outside the workspace; cairn will not use it"
    )


def open_folder_inside(root: Path, folder: Path, *, create: bool = False) -> int:
    """A descriptor of `folder` (inside `root`), opened without following any symlink.

    Each component is opened relative to the one before with O_NOFOLLOW, so a folder swapped
    for a symlink after `resolve_inside` checked it is refused instead of followed.
    The caller closes the descriptor.
    """
    root = root.resolve()
    try:
        parts = folder.relative_to(root).parts
    except ValueError:
        raise BoundaryError("the path leads outside the workspace through a symlink") from None
    fd = os.open(root, _FOLDER_FLAGS)
    try:
        for part in parts:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, dir_fd=fd)
            inner = _open_component(fd, part)
            os.close(fd)
            fd = inner
        return fd
    except BaseException:
        os.close(fd)
        raise


def _open_component(fd: int, part: str) -> int:
    try:
        return os.open(part, _FOLDER_FLAGS, dir_fd=fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_symlink(fd, part):
            raise BoundaryError(
                f"the folder {part[:80]!r} became a symlink while cairn was using it; "
                "a path that leads outside the workspace through a symlink is refused"
            ) from None
        raise


def _is_symlink(fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def escaping_links(root: Path) -> dict[str, str]:
    """Every link under `root` that leads out of it or into its `.git`: relative path -> identity.

    Symlinks whose target resolves outside (or into `.git`), and regular files with more
    names than the workspace holds (a hard link to a file elsewhere). The identity changes
    when the link does, so comparing two calls shows which links a command made.
    """
    root = root.resolve()
    found: dict[str, str] = {}
    names_of: dict[tuple[int, int], list[tuple[str, int]]] = {}
    # The identity of a hard link leaves out its link count: another job materializing the
    # same cached file raises the count without this workspace changing.
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        if here == root:
            dirs[:] = [d for d in dirs if d.casefold() != ".git"]
        for name in (*dirs, *files):
            path = here / name
            relative = str(path.relative_to(root))
            try:
                info = path.lstat()
            except OSError:
                continue
            if stat.S_ISLNK(info.st_mode):
                if _link_escapes(root, path):
                    found[relative] = f"symlink:{os.readlink(path)}"
            elif stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                key = (info.st_dev, info.st_ino)
                names_of.setdefault(key, []).append((relative, info.st_nlink))
    for (_dev, inode), names in names_of.items():
        for relative, links in names:
            if links > len(names):
                found[relative] = f"hardlink:{inode}"
    return found


def _link_escapes(root: Path, link: Path) -> bool:
    target = Path(os.path.realpath(link))
    if target != root and root not in target.parents:
        return True
    inside = target.relative_to(root).parts
    return bool(inside) and inside[0].casefold() == ".git"


def check_no_new_escapes(before: Mapping[str, str], after: Mapping[str, str]) -> None:
    """Raise BoundaryError when `after` holds an escaping link that `before` did not."""
    new = sorted(path for path, identity in after.items() if before.get(path) != identity)
    if not new:
        return
    first = new[0]
    more = f" (and {len(new) - 1} more)" if len(new) > 1 else ""
    if after[first].startswith("hardlink:"):
        raise BoundaryError(
            f"the command left {shown_path(first)}{more}, a hard link to a file outside the "
            "workspace; links must stay inside the workspace"
        )
    raise BoundaryError(
        f"the command left {shown_path(first)}{more}, which leads outside the workspace through a "
        "symlink (or into its .git folder); links must stay inside the workspace"
    )


_SHOWN_NAME_LIMIT = 60
_SHOWN_PATH_LIMIT = 80


def shown_path(relative: str, *, outside: bool = False) -> str:
    """An agent's path as a message may show it: on one line, without a character a terminal
    would act on, and short. One that names a place outside the workspace (absolute, climbing
    with "..", or `outside`: through a symlink that leads out), perhaps a local path, by its
    last part only."""
    text = unicodedata.normalize("NFC", relative)  # an accent stays with its letter
    if outside or text.startswith("/") or ".." in text.split("/"):
        name = os.path.basename(text.rstrip("/"))
        shown = "…/" + _clipped(name, _SHOWN_NAME_LIMIT) if name else "/"
    else:
        shown = _clipped(text, _SHOWN_PATH_LIMIT)
    return "".join(c if c.isprintable() else "?" for c in shown)


def _clipped(text: str, limit: int) -> str:
    """`text` in at most `limit` characters: cut in the middle, so a file's name stays."""
    if len(text) <= limit:
        return text
    head, tail = (limit - 1) // 3, len(text) - (limit - 1 - (limit - 1) // 3)
    # A combining mark goes with its letter: both kept or both cut.
    while head > 0 and unicodedata.combining(text[head]):
        head -= 1
    while tail < len(text) and unicodedata.combining(text[tail]):
        tail += 1
    return text[:head] + "…" + text[tail:]
