"""The config files git reads in a repository folder, and a signature that changes with them.

Before each git command that reads a workspace's files, cairn asks git which filter, diff and
merge drivers the folder's config names, so that it can switch every one of them off
(`cairn.workspace.git`). The answer depends only on the config files git reads there: the
system file, the user's global files, the repository's `config` and the worktree's
`config.worktree`. While none of them changed, the answer stands, and asking again would start
one more git process before each command. A signature is the stat of each of those files
(inode, size, times), so any write to any of them (by cairn, a person, or an agent's command
that could reach them) gives a new signature and a fresh read.

There is no signature (and so nothing reused) where cairn cannot know every file git reads:
a folder that is not the top of a repository, a config that includes other files, a system
file cairn cannot locate, or a file changed within the last moment, whose next change could
leave its times as they were.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

SETTLE_SECONDS = 1.0
"""A config file changed more recently than this is read afresh on every call."""

Signature = tuple[object, ...]

_INCLUDE = re.compile(rb"^[ \t]*\[[ \t]*include", re.IGNORECASE | re.MULTILINE)
_ORIGIN = re.compile(r"^file:([^\t\"]+)\t")
_UNREADABLE = re.compile(r"unable to read config file '([^']+)'")
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})


def signature(cwd: Path | str, environ: Mapping[str, str]) -> Signature | None:
    """What the config git reads in `cwd` is made of now; None when that cannot be known."""
    files = config_files(Path(cwd), environ)
    if files is None:
        return None
    settled_before = time.time_ns() - int(SETTLE_SECONDS * 1e9)
    # The files alone decide, whatever the folder: every worktree of one mirror reads the
    # mirror's config and a `config.worktree` of its own, which none has (a file that
    # appears anywhere in the list changes the signature).
    stats: list[object] = []
    for path in files:
        try:
            found = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            stats.append("missing")
            continue
        except OSError:
            return None
        if max(found.st_mtime_ns, found.st_ctime_ns) >= settled_before:
            return None  # just written (or dated in the future): its next write may look the same
        stats.append(
            (
                os.path.normpath(path),
                found.st_ino,
                found.st_size,
                found.st_mtime_ns,
                found.st_ctime_ns,
            )
        )
    # Settings given in the environment are part of the config too (git reads them last).
    stats.extend(sorted((k, v) for k, v in environ.items() if k.startswith("GIT_CONFIG")))
    return tuple(stats)


def includes_other_files(signed: Signature) -> bool:
    """Whether a config file in `signed` includes another file (which it does not cover)."""
    for entry in signed:
        if isinstance(entry, tuple) and len(entry) == 5:
            try:
                if _INCLUDE.search(Path(str(entry[0])).read_bytes()):
                    return True
            except OSError:
                return True
    return False


def config_files(top: Path, environ: Mapping[str, str]) -> list[str] | None:
    """Every config file git reads in the repository whose top folder is `top`, or None."""
    git_dir = _git_dir(top)
    system = _system_file(environ)
    if git_dir is None or system is None:
        return None
    common = _common_dir(git_dir)
    if common is None:
        return None
    files = [str(common / "config"), str(git_dir / "config.worktree"), *_global_files(environ)]
    return files if system == "" else [*files, system]


def _git_dir(top: Path) -> Path | None:
    """The git folder git finds when it starts in `top`, if `top` is a repository's top."""
    dot_git = top / ".git"
    if dot_git.is_dir():
        return dot_git
    if dot_git.is_file():
        try:
            pointer = dot_git.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return None
        if not pointer.startswith("gitdir:"):
            return None
        return top / pointer.removeprefix("gitdir:").strip()
    if os.path.lexists(dot_git):
        return None
    is_bare = (top / "HEAD").is_file() and (top / "objects").is_dir() and (top / "refs").is_dir()
    return top if is_bare else None


def _common_dir(git_dir: Path) -> Path | None:
    """Where the repository's shared files (its `config` among them) are, for `git_dir`."""
    try:
        named = (git_dir / "commondir").read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return git_dir
    except (OSError, UnicodeDecodeError):
        return None
    return git_dir / named


def _global_files(environ: Mapping[str, str]) -> list[str]:
    """The user's config files, as git finds them from the environment."""
    if "GIT_CONFIG_GLOBAL" in environ:
        named = environ["GIT_CONFIG_GLOBAL"]
        return [] if named == os.devnull else [named]
    home = environ.get("HOME")
    xdg = environ.get("XDG_CONFIG_HOME") or (f"{home}/.config" if home else None)
    return [path for path in (xdg and f"{xdg}/git/config", home and f"{home}/.gitconfig") if path]


def _system_file(environ: Mapping[str, str]) -> str | None:
    """The system config file git reads: "" for none, None when it cannot be known."""
    nosystem = environ.get("GIT_CONFIG_NOSYSTEM", "").strip().lower()
    if nosystem in _TRUE:
        return ""
    if nosystem not in _FALSE:
        return None
    if "GIT_CONFIG_SYSTEM" in environ:
        named = environ["GIT_CONFIG_SYSTEM"]
        return "" if named == os.devnull else named
    return _built_in_system_file()


@functools.cache
def _built_in_system_file() -> str | None:
    """The system config file this host's git was built to read, asked of git once."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    try:
        asked = subprocess.run(
            ["git", "config", "--system", "--show-origin", "--list"],
            cwd="/",
            env={**environ, "LC_ALL": "C"},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="surrogateescape",
            check=False,
        )
    except OSError:
        return None
    named = _ORIGIN.match(asked.stdout) or _UNREADABLE.search(asked.stderr)
    if named is not None:
        return named.group(1)
    # An existing but empty file names nobody; the usual place is the only one to believe.
    usual = Path("/etc/gitconfig")
    empty = asked.returncode == 0 and not asked.stdout and usual.is_file()
    return str(usual) if empty and usual.stat().st_size == 0 else None
