"""One CLI turn as a process: in cairn's bubblewrap sandbox, its output read as it comes.

The sandbox is the one agents' commands run in (`cairn.workspace.commands`): the file system
read-only, the workspace writable with its `.git` read-only, cairn's home hidden, no
capabilities, and nothing left running after the turn. Two more folders are writable: the
job's own CLI state folder (HOME, TMPDIR and the CLI's config folder), and nothing else. The
network is `network_plan`'s: the model endpoint only, through cairn's egress proxy.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cairn.errors import WorkspaceError
from cairn.workspace import commands, egress
from cairn.workspace.boundary import check_no_new_escapes, escaping_links

_FOLDER_PATH_LIMIT = 80
"""The longest socket folder a turn's egress uses (a socket's file name follows, within the
100 bytes `Egress` allows a socket path)."""


@dataclass(frozen=True)
class NetworkPlan:
    """How the sandbox reaches the model endpoint, and nothing else."""

    share_host: bool
    """Share the host's network (only where no sandbox can be had and the room allows it)."""
    bwrap_args: tuple[str, ...] = ()
    inner_prefix: tuple[str, ...] = ()
    environment: Mapping[str, str] = field(default_factory=dict)
    endpoint: str = ""
    """The endpoint URL as the CLI inside the sandbox reaches it."""


@contextlib.contextmanager
def network_plan(endpoint: str, folder: Path) -> Iterator[NetworkPlan]:
    """The sandbox's network for a turn that talks to `endpoint`, for the length of the turn:
    that endpoint only.

    The allowlisting proxy of `cairn.workspace.egress` runs outside the sandbox, its sockets
    in `folder` (cairn's own, made for the turn and removed after it; a temporary folder
    instead when `folder` is too deep for a socket's path). Where no sandbox can be had (a
    room that allows running unsandboxed) the host's network is shared: nothing to bridge.
    """
    if commands.sandbox_problem() is not None:
        yield NetworkPlan(share_host=True, endpoint=endpoint)
        return
    if len(str(folder.absolute())) > _FOLDER_PATH_LIMIT:
        folder = Path(tempfile.mkdtemp(prefix="cairn-egress-"))
    try:
        with egress.Egress([endpoint], folder) as bridge:
            yield NetworkPlan(
                False,
                tuple(bridge.bwrap_args),
                tuple(bridge.inner_prefix),
                dict(bridge.environment),
                bridge.url_inside(endpoint),
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@dataclass(frozen=True)
class CliRun:
    exit_code: int | None
    """None when the turn ran out of time or was stopped."""
    stopped: bool
    sandboxed: bool


def run_cli(
    argv: Sequence[str],
    *,
    workspace: Path,
    state_dir: Path,
    environment: Mapping[str, str],
    network: NetworkPlan,
    hidden: Sequence[Path],
    on_line: Callable[[str], None],
    timeout: float,
    should_stop: Callable[[], bool],
    allow_unsandboxed: bool,
) -> CliRun:
    """Run the CLI in the sandbox; every line it prints goes to `on_line` as it comes.

    Raises WorkspaceError when no sandbox can be had and the room does not allow running
    unsandboxed, and BoundaryError when the turn left a link that leads out of the workspace.
    """
    problem = commands.sandbox_problem()
    if problem is not None and not allow_unsandboxed:
        raise WorkspaceError(problem)
    lines = _Lines(on_line)
    policy = commands.SandboxPolicy(
        network=network.share_host,
        environment={**environment, **network.environment},
        read_only_binds=_runtime_folders(argv),
        on_output=lines.feed,
    )
    full = [*network.inner_prefix, *argv]
    if problem is None:
        bwrap = shutil.which("bwrap")
        assert bwrap is not None, "sandbox_problem found it"
        # The state folder is the sandbox's private temporary folder: writable, HOME, TMPDIR.
        prefix = commands.sandbox_argv(bwrap, workspace, state_dir, hidden, policy)
        full = [*prefix[:-1], *network.bwrap_args, "--", *full]
    before = escaping_links(workspace)
    # The same runner as agents' commands: own process group, output to a file, killed whole.
    code, _tail, stopped = commands._run(full, workspace, state_dir, timeout, should_stop, policy)
    lines.flush()
    check_no_new_escapes(before, escaping_links(workspace))
    return CliRun(code, stopped, problem is None)


def _runtime_folders(argv: Sequence[str]) -> tuple[Path, ...]:
    """What the CLI and cairn's MCP server run from, readable even inside a hidden folder."""
    binary = Path(argv[0]).resolve()
    package = Path(__file__).resolve().parents[2]  # the folder `cairn` is imported from
    return (binary.parent.parent, Path(sys.prefix).resolve(), package)


class _Lines:
    """Splits streamed output into whole lines for a callback."""

    def __init__(self, callback: Callable[[str], None]) -> None:
        self.callback = callback
        self.pending = ""

    def feed(self, text: str) -> None:
        self.pending += text
        *whole, self.pending = self.pending.split("\n")
        for line in whole:
            self.callback(line)

    def flush(self) -> None:
        if self.pending:
            self.callback(self.pending)
            self.pending = ""
