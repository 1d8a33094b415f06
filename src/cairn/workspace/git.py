"""The one door to the git CLI: every call hardened, every failure a plain-words WorkspaceError.

Hardening: repositories cairn touches may belong to someone else, and a repository's own
hooks, config and attributes can name programs to run. Command-line `-c` settings outrank
every config file, so each call switches off what would run such programs during cairn's own
operations: hooks, fsmonitor, signing and signature checks, auto-gc and maintenance, submodule
recursion, `ext::` URLs, the pager, editors, alternate-refs commands, and every filter, diff
and merge driver the repository's config names (found by reading the config, then each one
overridden to nothing). In cairn's own mirror and its worktrees no filter or merge driver can
be chosen for any path at all (the mirror's info/attributes, see `Mirror.drivers_unset`), so
their config is not read first. Diffs never use external diff programs or textconv. Transports to a
local path may use the file protocol only, so a repository's `url.*.insteadOf` cannot turn
them into an ssh call with its own `core.sshCommand`. `uploadpack.packObjectsHook` is honoured
by git only from the user's own (not a repository's) config, which cairn leaves alone.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import IO, NamedTuple

from cairn.errors import WorkspaceError

HARDENING: tuple[str, ...] = (
    "--no-pager",
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.fsmonitor=false",
    "-c", "core.pager=cat",
    "-c", "core.alternateRefsCommand=",
    "-c", "protocol.ext.allow=never",
    "-c", "commit.gpgSign=false",
    "-c", "tag.gpgSign=false",
    "-c", "merge.verifySignatures=false",
    "-c", "log.showSignature=false",
    "-c", "submodule.recurse=false",
    "-c", "fetch.recurseSubmodules=false",
    # Auto-gc forks a background process in whichever repository it runs in; a person's
    # repository is not cairn's to repack, and a detached gc outlives cairn's lock.
    "-c", "gc.auto=0",
    "-c", "maintenance.auto=false",
)  # fmt: skip

LOCAL_TRANSPORT: tuple[str, ...] = (
    "-c", "protocol.allow=never",
    "-c", "protocol.file.allow=always",
)  # fmt: skip
"""Pass to a call whose transport is a local path: nothing may rewrite it into another protocol."""

# Config keys naming a program per driver: `filter.<name>.clean` and friends. Each one found is
# overridden with an empty value (and `required` with false), which git reads as "no driver".
# The overrides travel as GIT_CONFIG_KEY_n/VALUE_n, which (unlike `-c key=value`) cannot be
# misread when a hostile driver name itself contains `=`.
_DRIVER_KEYS = re.compile(
    r"(?is)(filter\..+\.(?:clean|smudge|process|required)|diff\..+\.(?:command|textconv)"
    r"|merge\..+\.driver)"
)
_DRIVER_QUERY = (
    r"^(filter|diff|merge)\..+\.(clean|smudge|process|required|command|textconv|driver)$"
)
# Commands that never read files of a working tree. Every other command may: even `write-tree`
# re-reads a racily clean file through its clean filter, so those get the driver overrides.
_NO_CONTENT_COMMANDS = frozenset(
    {"bundle", "cat-file", "check-ref-format", "clone", "commit-tree", "config", "diff-tree",
     "fetch", "for-each-ref", "init", "ls-remote", "merge-base", "push", "rev-list",
     "rev-parse", "show-ref", "symbolic-ref", "update-ref"}
)  # fmt: skip
_DIFF_COMMANDS = frozenset({"diff", "log", "show"})
_NO_DIFF_PROGRAMS = ("--no-ext-diff", "--no-textconv")

IDENTITY: tuple[str, ...] = ("-c", "user.name=cairn", "-c", "user.email=cairn@localhost")
"""Pass to any call that creates a commit, so every cairn commit has one author."""

_FIXED_ENV = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_OPTIONAL_LOCKS": "0",
    "LC_ALL": "C",
    "GIT_PAGER": "cat",  # outranks `pager.<command>`, which a repository's config may set
    "PAGER": "cat",
    "GIT_EDITOR": ":",  # git reads `:` as "no editor"
    "GIT_SEQUENCE_EDITOR": ":",
}

# Inherited variables that would point git at another repository, index or config than the
# one cairn names (cairn may itself run inside a git hook), or override cairn's identity.
_DROPPED_ENV = re.compile(
    r"GIT_(DIR|WORK_TREE|INDEX_FILE|OBJECT_DIRECTORY|ALTERNATE_OBJECT_DIRECTORIES|COMMON_DIR"
    r"|NAMESPACE|PREFIX|CONFIG|CONFIG_PARAMETERS|CONFIG_COUNT|CONFIG_KEY_\d+|CONFIG_VALUE_\d+"
    r"|AUTHOR_NAME|AUTHOR_EMAIL|COMMITTER_NAME|COMMITTER_EMAIL|EXTERNAL_DIFF|ATTR_SOURCE)"
)

# Commands that report progress on request: a watched call asks for it, so a long transfer
# keeps talking and only a silent one (an address that never answers) runs out of time.
_PROGRESS_COMMANDS = frozenset({"clone", "fetch", "push"})
# Progress lines (`Receiving objects:  45% (9/20)`, `remote: Counting objects: 5, done.`) are
# noise in an error's detail; each is redrawn after a carriage return.
_PROGRESS_LINE = re.compile(r"(remote: )?([A-Z][a-z]+( [a-z]+)*: +(\d+%|\d+, done)|Total \d+)")

# Branch names git accepts whatever else holds (`check-ref-format`'s rules are all about
# dots, slashes in a row, `@{`, control and a few punctuation characters): letters, digits,
# `_` and `-` in slash-separated parts, not starting with `-` (it would read as an option).
_PLAIN_BRANCH = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*(/[A-Za-z0-9_-]+)*")

# scp-like addresses (`host:path`, `user@host:path`) have a colon before any slash.
_SCP_LIKE = re.compile(r"^[^/]*:")


class GitResult(NamedTuple):
    """What a git command answered: its exit code, stdout (without trailing newline), stderr."""

    returncode: int
    stdout: str
    stderr: str


class GitError(WorkspaceError):
    """A git command failed; `detail` keeps git's raw stderr for a caller to sanitize."""

    def __init__(self, message: str, *, detail: str = "", returncode: int | None = None) -> None:
        super().__init__(message)
        self.detail = detail
        self.returncode = returncode


class GitTimeout(GitError):
    """A watched git call went silent for its whole timeout; its process group was killed."""

    def __init__(self, seconds: float, *, detail: str = "") -> None:
        super().__init__(
            f"git got no answer from the room's repository for {seconds:g} s and was stopped; "
            "check the URL and the network, or raise CAIRN_GIT_TIMEOUT",
            detail=detail,
        )
        self.seconds = seconds


def run_git(
    *args: str,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    check: bool = True,
    failure: str | None = None,
    timeout: float | None = None,
    own_repository: bool = False,
    stdout: IO[bytes] | None = None,
) -> str:
    """Run one hardened git command and return its stdout without the trailing newline.

    `stdout`: a file that git's output (bytes, such as a pack) goes to instead; "" is returned.

    With `timeout` (and no input), the call is watched: git runs in a process group of its
    own, reports its progress, and the whole group is killed once it has said nothing for
    `timeout` seconds. `own_repository`: `cwd` is cairn's mirror or one of its worktrees,
    whose attributes unset every filter and merge driver (`Mirror.drivers_unset`), so the
    config need not be asked which drivers it names.
    """
    result = _run(
        args,
        cwd=cwd,
        env=env,
        input=input,
        failure=failure,
        timeout=timeout,
        own_repository=own_repository,
        stdout=stdout,
    )
    if check and result.returncode != 0:
        raise GitError(
            failure or _default_failure(args),
            detail=result.stderr.strip(),
            returncode=result.returncode,
        )
    return (result.stdout or "").removesuffix("\n")


def try_git(
    *args: str,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    timeout: float | None = None,
) -> GitResult:
    """Run one hardened git command whose exit code is an answer, not a failure."""
    result = _run(
        args, cwd=cwd, env=env, input=input, failure=None, timeout=timeout, own_repository=False
    )
    return GitResult(result.returncode, result.stdout.removesuffix("\n"), result.stderr.strip())


def git_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment every cairn git call runs with."""
    environ = {k: v for k, v in os.environ.items() if not _DROPPED_ENV.fullmatch(k)}
    environ.update(_FIXED_ENV)
    environ.update(extra or {})
    return environ


def local_path(repo: str) -> Path | None:
    """The filesystem path a repository address names, or None when it is a remote URL."""
    if repo.startswith("file://"):
        return Path(repo.removeprefix("file://")).expanduser().absolute()
    if "://" in repo or _SCP_LIKE.match(repo):
        return None
    return Path(repo).expanduser().absolute()


def transport_address(repo: str) -> str:
    """The address to hand to fetch, push or ls-remote, independent of the caller's cwd."""
    path = local_path(repo)
    return repo if path is None else str(path)


def transport_settings(repo: str) -> tuple[str, ...]:
    """Extra settings for a fetch, push or clone that talks to `repo`."""
    return LOCAL_TRANSPORT if local_path(repo) is not None else ()


def git_folders(path: Path) -> tuple[Path, Path] | None:
    """The git folder of the repository at `path` and the common one its worktrees share
    (the same folder unless `path` is a linked worktree), resolved; None when git finds no
    repository there. One call each: a folder's name may hold a newline."""
    folders = []
    for asked in (("--absolute-git-dir",), ("--path-format=absolute", "--git-common-dir")):
        try:
            found = try_git("rev-parse", *asked, cwd=path)
        except GitError:
            return None  # the folder itself is missing
        if found.returncode != 0:
            return None
        folders.append(Path(found.stdout).resolve())
    return folders[0], folders[1]


def check_branch_name(branch: str) -> None:
    """Refuse a branch name git would not accept, before it reaches any refspec."""
    if _PLAIN_BRANCH.fullmatch(branch):
        return  # none of the characters or sequences git's rules are about: git would agree
    result = try_git("check-ref-format", f"refs/heads/{branch}", cwd="/")
    if result.returncode != 0 or branch.startswith("-"):
        raise WorkspaceError(f"{branch[:80]!r} is not a valid git branch name")


def _run(
    args: tuple[str, ...],
    *,
    cwd: Path | str | None,
    env: Mapping[str, str] | None,
    input: str | None,
    failure: str | None,
    timeout: float | None,
    own_repository: bool,
    stdout: IO[bytes] | None = None,
) -> subprocess.CompletedProcess[str]:
    # A neutral folder by default: the caller's current folder may be any repository.
    where = "/" if cwd is None else cwd
    environ = git_environment(env)
    if not own_repository:
        environ.update(_driver_overrides(args, where, environ))
    shaped = _after_subcommand(args, _DIFF_COMMANDS, _NO_DIFF_PROGRAMS)
    assert stdout is None or timeout is None, "a watched call's output is read as it comes"
    watch = timeout if input is None else None
    if watch is not None:
        shaped = _after_subcommand(shaped, _PROGRESS_COMMANDS, ("--progress",))
    command = ["git", *HARDENING, *shaped]
    try:
        if watch is not None:
            return _run_watched(command, where, environ, watch)
        return subprocess.run(
            command,
            cwd=where,
            env=environ,
            input=input,
            # Without input, none at all: nothing git starts may wait on cairn's own stdin.
            stdin=None if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE if stdout is None else stdout,
            stderr=subprocess.PIPE,
            text=True,
            # Paths git prints may not be UTF-8; keep their bytes round-trippable.
            errors="surrogateescape",
            check=False,
        )
    except FileNotFoundError as exc:
        missing = "git is not installed" if exc.filename == "git" else "a folder is missing"
        raise GitError(f"{failure or _default_failure(args)}: {missing}") from None


def _run_watched(
    command: list[str],
    cwd: Path | str,
    environ: Mapping[str, str],
    timeout: float,
) -> subprocess.CompletedProcess[str]:
    """Run git in a process group of its own; kill the group after `timeout` silent seconds."""
    # Its own session also leaves git (and ssh under it) no terminal to prompt on.
    with subprocess.Popen(
        command,
        cwd=cwd,
        env=environ,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    ) as process:
        try:
            stdout, stderr, silent = _read_until_silent(process, timeout)
        finally:
            # Before the wait: an unreaped leader keeps its group id from being reused, and
            # what git started (ssh, a remote helper) goes with it.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
    returncode = process.wait()
    errors = _without_progress(stderr.decode("utf-8", errors="surrogateescape"))
    if silent:
        raise GitTimeout(timeout, detail=errors)
    out = stdout.decode("utf-8", errors="surrogateescape")
    return subprocess.CompletedProcess(command, returncode, out, errors)


def _read_until_silent(
    process: subprocess.Popen[bytes], timeout: float
) -> tuple[bytes, bytes, bool]:
    """Read stdout and stderr to their end: (stdout, stderr, whether git fell silent first)."""
    assert process.stdout is not None and process.stderr is not None
    streams = (process.stdout.fileno(), process.stderr.fileno())
    read: dict[int, list[bytes]] = {fd: [] for fd in streams}
    silent = False
    with selectors.DefaultSelector() as selector:
        for fd in streams:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map() and not silent:
            ready = selector.select(timeout=timeout)
            silent = not ready
            for key, _ in ready:
                chunk = os.read(key.fd, 65536)
                if chunk:
                    read[key.fd].append(chunk)
                else:
                    selector.unregister(key.fd)
    out, err = (b"".join(read[fd]) for fd in streams)
    return out, err, silent


def _without_progress(stderr: str) -> str:
    lines = (line.rsplit("\r", 1)[-1] for line in stderr.split("\n"))
    return "\n".join(line for line in lines if not _PROGRESS_LINE.match(line))


def _subcommand(args: tuple[str, ...]) -> tuple[int, str | None]:
    """Where the git subcommand sits in `args` (after `-c` pairs and options), and its name."""
    index = 0
    while index < len(args):
        word = args[index]
        if word == "-c":
            index += 2
        elif word.startswith("-"):
            index += 1
        else:
            return index, word
    return index, None


def _after_subcommand(
    args: tuple[str, ...], commands: frozenset[str], extra: tuple[str, ...]
) -> tuple[str, ...]:
    """`args` with `extra` options right after the subcommand, when it is one of `commands`."""
    index, name = _subcommand(args)
    if name not in commands:
        return args
    return (*args[: index + 1], *extra, *args[index + 1 :])


def _driver_overrides(
    args: tuple[str, ...], cwd: Path | str, environ: Mapping[str, str]
) -> dict[str, str]:
    """Settings (as environment) that switch off every filter, diff and merge driver in config."""
    if _subcommand(args)[1] in _NO_CONTENT_COMMANDS:
        return {}
    return _read_overrides(cwd, environ) or {}


def _read_overrides(cwd: Path | str, environ: Mapping[str, str]) -> dict[str, str] | None:
    """The overrides for every driver the folder's config names; None if git did not start."""
    try:
        found = subprocess.run(
            ["git", *HARDENING, "config", "-z", "--name-only", "--get-regexp", _DRIVER_QUERY],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            env=environ,
            capture_output=True,
            text=True,
            errors="surrogateescape",
            check=False,
        )
    except OSError:
        return None  # the command itself will report what is missing
    keys = [key for key in found.stdout.split("\0") if _DRIVER_KEYS.fullmatch(key)]
    overrides = {"GIT_CONFIG_COUNT": str(len(keys))} if keys else {}
    for number, key in enumerate(keys):
        overrides[f"GIT_CONFIG_KEY_{number}"] = key
        overrides[f"GIT_CONFIG_VALUE_{number}"] = (
            "false" if key.lower().endswith(".required") else ""
        )
    return overrides


def _default_failure(args: tuple[str, ...]) -> str:
    words = [a for a in args if not a.startswith("-") and "=" not in a]
    return f"a git {words[0]!r} step failed" if words else "a git step failed"
