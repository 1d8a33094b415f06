"""Shell commands inside a workspace: sandboxed, an allowlisted environment, bounded output.

Every command runs under bubblewrap: the whole file system read-only, only the workspace and a
private temporary folder writable, the workspace's `.git` pointer and its materialized
dependencies (`.venv`, `node_modules`: first on PATH, as if activated) read-only, cairn's home
(or whatever the caller hides) replaced by an empty read-only folder, no network, no capabilities,
a session of its own, and nothing left running when it ends. A `SandboxPolicy` may open the
network, pass more environment, bind more folders read-only, or watch the output as it comes;
its default is exactly the above. Where no sandbox can be had,
commands are refused unless the caller (the room's scope) allows running them unsandboxed.
After every command the workspace boundary is checked: a link it made that leads outside
fails the command.
"""

from __future__ import annotations

import codecs
import contextlib
import ctypes
import errno
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from cairn.errors import WorkspaceError
from cairn.sanitize import tail
from cairn.workspace.boundary import check_no_new_escapes, escaping_links

OUTPUT_TAIL_BYTES = 64 * 1024
# Only these reach a command: never CAIRN_* (the store URL would bypass fencing) nor any secret.
_PASSED_THROUGH = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM")
# A folder cairn materialized from its dependency cache holds this file (the fingerprint).
DEPENDENCY_MARKER = ".cairn-dependencies"
# Where each kind of materialized folder keeps its commands: put first on PATH.
_COMMAND_FOLDERS = {".venv": "bin", "node_modules": ".bin"}
MATERIALIZED_FOLDERS = tuple(_COMMAND_FOLDERS)
"""The workspace-root folders cairn may materialize dependencies into."""
_PR_SET_PDEATHSIG = 1
_PROBE_TIMEOUT = 20.0
INSTALL_HINT = (
    "install bubblewrap (for example `apt-get install bubblewrap`, `dnf install bubblewrap` or "
    "`pacman -S bubblewrap`) and run the job again"
)
_ISOLATION = (
    "--unshare-ipc", "--unshare-pid", "--unshare-net",
    "--unshare-uts", "--unshare-cgroup-try",
    "--die-with-parent", "--new-session", "--cap-drop", "ALL",
)  # fmt: skip


@dataclass(frozen=True)
class SandboxPolicy:
    """What a command may reach beyond the default sandbox; the default adds nothing."""

    network: bool = False
    """Share the runner's network (off: the command has none, not even loopback)."""
    environment: Mapping[str, str] = field(default_factory=dict, hash=False)
    """More variables for the command, on top of the allowlist; never CAIRN_* (refused)."""
    read_only_binds: tuple[Path, ...] = ()
    """More folders the command can read but not write, even inside a hidden one."""
    on_output: Callable[[str], None] | None = None
    """Called with each piece of output as the command writes it (unbounded, unmasked)."""

    def __post_init__(self) -> None:
        # The store URL in a command's environment would let it bypass fencing; cairn's own
        # variables (and a HOME or TMPDIR of the caller's) never reach a command.
        refused = sorted(
            name for name in self.environment if name.startswith("CAIRN_") or name in _OWN
        )
        if refused:
            raise ValueError(f"a sandbox policy may not set {', '.join(refused)}")


DEFAULT_POLICY = SandboxPolicy()
"""Every command's policy unless its caller says otherwise: no network, nothing added."""
_OWN = ("HOME", "TMPDIR")


@dataclass(frozen=True)
class CommandResult:
    exit_code: int | None
    """The exit code; negative for a signal; None when it ran out of time or was stopped."""
    output: str
    """The tail of its combined output (at most OUTPUT_TAIL_BYTES)."""
    stopped: bool = False
    """True when cairn stopped it because the runner lost the job."""
    sandboxed: bool = False
    """True when the command ran isolated (only the workspace writable, no network)."""


def materialized_dependencies(workspace: Path) -> list[Path]:
    """The workspace's folders that cairn materialized from its dependency cache."""
    return [
        folder
        for folder in (workspace / name for name in _COMMAND_FOLDERS)
        if not folder.is_symlink() and (folder / DEPENDENCY_MARKER).is_file()
    ]


def command_environment(
    private_tmp: Path,
    environ: Mapping[str, str] | None = None,
    workspace: Path | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of a workspace command: a short allowlist and a private HOME and TMPDIR.

    The workspace's materialized dependencies come first on PATH (`.venv` also as VIRTUAL_ENV),
    as if activated; `extra` (a policy's environment) is added to the allowlist.
    """
    source = os.environ if environ is None else environ
    env = {name: source[name] for name in _PASSED_THROUGH if name in source}
    env |= extra or {}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    for folder in materialized_dependencies(workspace) if workspace else ():
        env["PATH"] = f"{folder / _COMMAND_FOLDERS[folder.name]}{os.pathsep}{env['PATH']}"
        if folder.name == ".venv":
            env["VIRTUAL_ENV"] = str(folder)
    env |= {
        "HOME": str(private_tmp),
        "TMPDIR": str(private_tmp),
        "PYTHONDONTWRITEBYTECODE": "1",  # verification must not leave __pycache__ in the result
    }
    return env


def run_in_workspace(
    command: str,
    workspace: Path,
    *,
    timeout: float,
    should_stop: Callable[[], bool] = lambda: False,
    allow_unsandboxed: bool = False,
    hidden: Iterable[Path] = (),
    policy: SandboxPolicy = DEFAULT_POLICY,
) -> CommandResult:
    """Run `command` with /bin/sh in `workspace`, sandboxed; its whole process tree ends with it.

    `hidden` folders (cairn's home) are invisible to the command, except the workspace and the
    repository data its git needs (read-only). `policy` says what else it may reach; without
    a sandbox (allowed by `allow_unsandboxed`) only its environment and output callback apply.
    Raises WorkspaceError when no sandbox can be had and `allow_unsandboxed` is false, and
    BoundaryError when the command left a link that leads out of the workspace.
    """
    workspace = Path(workspace).absolute()
    if not workspace.is_dir():
        raise FileNotFoundError(errno.ENOENT, "the workspace folder is missing")
    problem = sandbox_problem()
    if problem is not None and not allow_unsandboxed:
        raise WorkspaceError(problem)
    before = escaping_links(workspace)
    with tempfile.TemporaryDirectory(prefix="cairn-") as tmp:
        private_tmp = Path(tmp).resolve()
        shell = ["/bin/sh", "-c", command]
        if problem is None:
            bwrap = _bwrap_path()
            assert bwrap is not None, "sandbox_problem found it"
            shell = sandbox_argv(bwrap, workspace, private_tmp, hidden, policy) + shell
        result = _run(shell, workspace, private_tmp, timeout, should_stop, policy)
    check_no_new_escapes(before, escaping_links(workspace))
    return CommandResult(*result, sandboxed=problem is None)


def _run(
    argv: list[str],
    workspace: Path,
    private_tmp: Path,
    timeout: float,
    should_stop: Callable[[], bool],
    policy: SandboxPolicy,
) -> tuple[int | None, str, bool]:
    """Run `argv` in its own process group: (exit code or None, output tail, stopped)."""
    # Output goes to a file, not a pipe: memory stays bounded and a background child holding
    # a pipe open cannot keep the caller waiting. A watcher reads the file as it grows.
    with tempfile.TemporaryFile() as output:
        watch = _OutputWatcher(output, policy.on_output)
        process = subprocess.Popen(
            argv,
            cwd=workspace,
            env=command_environment(private_tmp, workspace=workspace, extra=policy.environment),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent(),
        )
        try:
            ended, stopped = _wait_unreaped(process, timeout, should_stop, watch.poll)
        finally:
            # Leftovers (background jobs, a timed-out tree) do not outlive the command. Only
            # while the shell is unreaped can its group id not have been reused. In the
            # sandbox, ending bubblewrap ends its whole PID namespace.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            code = process.wait()
            watch.poll(final=True)
        return (code if ended else None), _tail(output), stopped


CREDENTIAL_PATHS = (
    ".git-credentials",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".docker",
    ".ssh",
    ".aws",
    ".kube",
    ".gnupg",
    ".config/gh",
    ".config/gcloud",
    ".config/git/credentials",
    ".config/hub",
)
"""Where tools keep credentials under a home folder: hidden from every sandboxed command."""


def _credential_covers(home: Path | None) -> list[str]:
    """bubblewrap arguments that hide the runner's credential files and folders."""
    if home is None:
        return []
    argv: list[str] = []
    for name in CREDENTIAL_PATHS:
        path = home / name
        if path.is_dir() and not path.is_symlink():
            argv += ["--tmpfs", str(path)]
        elif path.exists():
            argv += ["--ro-bind", "/dev/null", str(path)]
    return argv


def sandbox_argv(
    bwrap: str,
    workspace: Path,
    private_tmp: Path,
    hidden: Iterable[Path],
    policy: SandboxPolicy = DEFAULT_POLICY,
) -> list[str]:
    """The bubblewrap prefix that confines a command to `workspace` and `private_tmp`."""
    workspace = workspace.resolve()
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    argv += ["--tmpfs", "/dev/shm"]  # private and gone with the command (multiprocessing needs it)
    home = os.environ.get("HOME")
    argv += _credential_covers(Path(home).resolve() if home else None)
    # The host's /tmp holds other jobs' private folders and cairn's git askpass folders: covered
    # (read-only, like every cover); the command's own temporary folder, and a workspace under
    # /tmp, are bound back below.
    covers = [Path("/tmp"), *(Path(h).resolve() for h in hidden if Path(h).is_dir())]
    for folder in covers:
        argv += ["--tmpfs", str(folder)]
    for folder in _git_folders(workspace):
        # The workspace's own git data stays readable (read-only) even inside a hidden home.
        argv += ["--ro-bind", str(folder), str(folder)]
    home_covers = [Path(home).resolve() / name for name in CREDENTIAL_PATHS] if home else []
    shown = [*policy.read_only_binds, *_interpreter_folders([*covers, *home_covers])]
    for folder in shown:
        # After the covers, so a folder inside a hidden one shows through; "-try": a missing
        # folder is simply absent, as it would be without the sandbox.
        resolved = Path(folder).resolve()
        argv += ["--ro-bind-try", str(resolved), str(resolved)]
    argv += ["--bind", str(workspace), str(workspace)]
    dot_git = workspace / ".git"
    if dot_git.exists() and not dot_git.is_symlink():
        # The pointer to the repository's data: rewritten, it would aim cairn's own git at a
        # repository the command made (with its own filters and hooks).
        argv += ["--ro-bind", str(dot_git), str(dot_git)]
    for folder in materialized_dependencies(workspace):
        # Hardlinks of the shared cache entry: writing through them would change every job's.
        argv += ["--ro-bind", str(folder), str(folder)]
    argv += ["--bind", str(private_tmp), str(private_tmp)]
    for folder in covers:
        argv += ["--remount-ro", str(folder)]
    # Only an ordinary user needs a user namespace to build the sandbox. Root builds it without
    # one (and drops every capability all the same); in a chroot the kernel refuses root a new
    # user namespace, and bubblewrap takes that as fatal even with `--unshare-user-try`.
    user_namespace = [] if os.geteuid() == 0 else ["--unshare-user-try"]
    isolation = [flag for flag in _ISOLATION if not (policy.network and flag == "--unshare-net")]
    return [*argv, *user_namespace, *isolation, "--chdir", str(workspace), "--"]


def _interpreter_folders(covered: list[Path]) -> list[Path]:
    """cairn's own Python (its venv and the interpreter it was made from), to show read-only
    through the covers: the coding CLIs start cairn's tool server with it inside the sandbox,
    so it must be there when cairn was installed in a covered folder (a venv under /tmp).
    Never a folder that holds a covered one: that would show it again."""
    folders = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix)}
    return sorted(
        folder
        for folder in folders
        if not any(folder == cover or folder in cover.parents for cover in covered)
    )


def _git_folders(workspace: Path) -> list[Path]:
    """The worktree's admin folder and the repository it belongs to, from its `.git` file."""
    try:
        pointer = (workspace / ".git").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return []
    if not pointer.startswith("gitdir:"):
        return []
    admin = (workspace / pointer.removeprefix("gitdir:").strip()).resolve()
    try:
        common = (admin / (admin / "commondir").read_text(encoding="utf-8").strip()).resolve()
    except (OSError, UnicodeDecodeError):
        common = admin
    found = [common] if common.is_dir() else []
    if admin.is_dir() and common not in (admin, *admin.parents):
        found.append(admin)
    return found


def _bwrap_path() -> str | None:
    return shutil.which("bwrap")


def sandbox_problem() -> str | None:
    """Why commands cannot run sandboxed here (with what to do), or None when they can."""
    return _probe(_bwrap_path())


@functools.lru_cache(maxsize=4)
def _probe(bwrap: str | None) -> str | None:
    if bwrap is None:
        return f"cairn runs commands in a sandbox, and bubblewrap is not installed; {INSTALL_HINT}"
    with tempfile.TemporaryDirectory(prefix="cairn-") as tmp:
        folder = Path(tmp).resolve()
        argv = [*sandbox_argv(bwrap, folder, folder, ()), "/bin/sh", "-c", "exit 0"]
        try:
            done = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=_PROBE_TIMEOUT,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            reason = getattr(exc, "strerror", None) or "it did not answer"
            return _unusable(reason)
    if done.returncode != 0:
        return _unusable(done.stderr.strip().splitlines()[-1][:200] if done.stderr.strip() else "")
    return None


def _unusable(reason: str) -> str:
    why = f" ({reason})" if reason else ""
    return (
        f"cairn runs commands in a sandbox, and bubblewrap cannot create one here{why}; allow "
        "unprivileged user namespaces (for example `sysctl kernel.unprivileged_userns_clone=1`) "
        "or let the room run commands unsandboxed in its scope, knowing isolation is unproven"
    )


def _die_with_parent() -> Callable[[], None] | None:
    """A child hook so a SIGKILLed runner takes its command with it instead of orphaning it."""
    if sys.platform != "linux":
        return None
    # Loaded here, in the parent: the forked child only makes the call, it loads nothing.
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)

    return hook


def _wait_unreaped(
    process: subprocess.Popen[bytes],
    timeout: float,
    should_stop: Callable[[], bool],
    on_tick: Callable[[], None],
) -> tuple[bool, bool]:
    """Wait for exit without reaping; (ended, stopped) — not ended on timeout or stop."""
    deadline = time.monotonic() + timeout
    delay = 0.001
    while not _has_exited(process):
        on_tick()
        if should_stop():
            return False, True
        if time.monotonic() >= deadline:
            return False, False
        time.sleep(delay)
        delay = min(delay * 2, 0.05)
    return True, False


def _has_exited(process: subprocess.Popen[bytes]) -> bool:
    if hasattr(os, "waitid"):
        return os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    return process.poll() is not None  # macOS: reaping early only risks a reused group id


class _OutputWatcher:
    """Hands what a command appended to its output file to a callback, as whole characters."""

    def __init__(self, output: IO[bytes], callback: Callable[[str], None] | None) -> None:
        self.output = output
        self.callback = callback
        self.position = 0
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def poll(self, final: bool = False) -> None:
        """Pass on what was written since the last poll (and, when final, what is left)."""
        if self.callback is None:
            return
        # pread: the command's own writes share the file's offset, which must stay at its end.
        fresh = os.pread(self.output.fileno(), 1 << 20, self.position)
        while fresh:
            self.position += len(fresh)
            text = self.decoder.decode(fresh)
            if text:
                self.callback(text)
            fresh = os.pread(self.output.fileno(), 1 << 20, self.position)
        if final:
            rest = self.decoder.decode(b"", final=True)
            if rest:
                self.callback(rest)


def _tail(output: IO[bytes]) -> str:
    size = output.seek(0, os.SEEK_END)
    output.seek(max(0, size - OUTPUT_TAIL_BYTES))
    text = output.read().decode("utf-8", errors="replace")
    # Cut output starts after a line break, so no secret survives as a half nobody can mask.
    return tail(text, len(text) - 1) if size > OUTPUT_TAIL_BYTES else text
