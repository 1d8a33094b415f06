"""The constrained installer: one Protocol, a registry by short name, and how tools are run.

An installer never touches a checkout: `add` edits a temporary copy of the dependency inputs,
`prepare` builds from another temporary copy, and both run the package manager with a private
HOME and cache, the approved source only, no install scripts and no builds from source.
"""

from __future__ import annotations

import abc
import contextlib
import functools
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import tempfile
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, Self, TypedDict

from cairn.agents.base import DependencyAsk
from cairn.deps.fingerprint import (
    DependencyInputs,
    Environment,
    InputFiles,
    inputs_copy,
    read_inputs,
    write_inputs,
)
from cairn.deps.requests import dependency_problem, label, normalized_name
from cairn.errors import UsageError, WorkspaceError
from cairn.next_action import Action, NextAction
from cairn.sanitize import Sanitizer

if TYPE_CHECKING:
    from cairn.config import Config
    from cairn.deps.npm import NpmInstaller
    from cairn.deps.uv import UvInstaller

OUTPUT_TAIL_CHARS = 16_000
DEFAULT_TIMEOUT = 900.0
# Only these reach a package manager: no UV_*/npm_config_* from the runner's environment, no
# tokens. The network settings are the host's: the proxy and the certificate authorities the
# host trusts (a TLS-inspecting proxy needs both).
_PASSED_THROUGH = (
    "PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ",
    "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS",
)  # fmt: skip


class InstallError(WorkspaceError):
    """The installer refused the inputs or could not prepare them (the message says why)."""


class QuarantinedError(InstallError):
    """A cache entry is quarantined: a high-risk advisory, or content changed after it was built."""

    next_actions = (NextAction(Action.prune_cache),)  # a quarantined entry is only pruned


@dataclass(frozen=True)
class Package:
    """One resolved package version."""

    name: str
    version: str


@dataclass(frozen=True)
class ToolRun:
    """How one package-manager command ended."""

    exit_code: int | None
    """None when it ran out of time."""
    output: str
    """The tail of its combined output: for diagnosis only, never shown unmasked."""


Runner = Callable[[Sequence[str], Path, dict[str, str], float], ToolRun]


class Installer(InputFiles, Protocol):
    """A package manager driven within cairn's rules (uv for PyPI, npm for npm)."""

    @property
    def name(self) -> str:
        """The short name it is registered as: `uv` or `npm`."""
        ...

    @property
    def target(self) -> str:
        """The folder materialized into a workspace: `.venv` or `node_modules`."""
        ...

    def environment(self) -> Environment:
        """Tool, interpreter, platform and approved source: the non-file part of a fingerprint."""
        ...

    def add(self, inputs_dir: Path, name: str, version: str) -> None:
        """Record one approved exact version in the declarations and lockfile in `inputs_dir`."""
        ...

    def prepare(self, inputs_dir: Path, entry_dir: Path) -> None:
        """Build `entry_dir/<target>` from a temporary copy of the inputs in `inputs_dir`."""
        ...

    def resolved(self, root: Path) -> list[Package]:
        """The packages installed in `root/<target>` (an entry or a materialized workspace)."""
        ...


def installer_kinds() -> dict[str, type[UvInstaller] | type[NpmInstaller]]:
    """The registered installers by short name, in the order a workspace's inputs are prepared."""
    # Imported here, not at the top: both implementations build on this module.
    from cairn.deps.npm import NpmInstaller
    from cairn.deps.uv import UvInstaller

    return {"uv": UvInstaller, "npm": NpmInstaller}


def get_installer(name: str, **options: Any) -> Installer:
    """The installer registered as `name` ("uv" or "npm"), built with `options`."""
    kinds = installer_kinds()
    found = kinds.get(name) if isinstance(name, str) else None
    if found is None:
        raise _unknown("installer", name, sorted(kinds))
    return found(**options)


def configured_installer(config: Config, ecosystem: str) -> Installer:
    """The installer registered for `ecosystem` ("pypi" or "npm"), built from `config`."""
    kinds = {kind.ecosystem: kind for kind in installer_kinds().values()}
    found = kinds.get(ecosystem) if isinstance(ecosystem, str) else None
    if found is None:
        raise _unknown("ecosystem", ecosystem, sorted(kinds))
    return found.from_config(config)


def _unknown(what: str, name: object, valid: Sequence[str]) -> UsageError:
    # The name may come from anywhere: shown only when it is short and plain.
    shown = name if isinstance(name, str) and re.fullmatch(r"[\w.-]{1,20}", name) else None
    said = f"unknown {what} {shown!r}" if shown else f"no known {what} was named"
    return UsageError(f"{said}; valid {what}s: {', '.join(valid)}")


def add_dependency(installer: Installer, workspace: Path, name: str, version: str) -> int:
    """Record an approved `name==version` in the job workspace's declarations and lockfile.

    The package manager edits a temporary copy; only the two resulting files are written back
    into the workspace (the job's own change). Returns the lockfile's package count.
    """
    updated = with_dependency(installer, workspace, name, version)
    write_inputs(workspace, updated)
    return len(locked_packages(updated))


def with_dependency(
    installer: Installer, workspace: Path, name: str, version: str
) -> DependencyInputs:
    """The workspace's declarations and lockfile with `name==version` added; nothing written.

    The package manager edits a temporary copy of the inputs, never the workspace.
    """
    current = read_inputs(workspace, installer, require_lockfile=False)
    if current is None:
        raise InstallError(
            f"the repository has no {installer.declarations}, so cairn cannot record "
            f"{label(installer.ecosystem, name, version)}; add one to the repository first"
        )
    with inputs_copy(current) as copy:
        installer.add(copy, name, version)
        updated = read_inputs(copy, installer)
    assert updated is not None, "add leaves a lockfile behind"
    if Package(normalized_name(installer.ecosystem, name), version) not in locked_packages(updated):
        raise InstallError(
            f"the lockfile does not pin {label(installer.ecosystem, name, version)} after "
            "adding it; nothing was recorded"
        )
    kept = {n: updated.files[n] for n in (installer.declarations, installer.lockfile)}
    return DependencyInputs(updated.ecosystem, {**current.files, **kept})


def locked_packages(inputs: DependencyInputs) -> list[Package]:
    """The packages the lockfile pins (the project itself and local links excluded)."""
    if inputs.ecosystem == "npm":
        packages = json.loads(inputs.files["package-lock.json"]).get("packages", {})
        return [
            Package(str(p.get("name") or key.rsplit("node_modules/", 1)[-1]), str(p["version"]))
            for key, p in packages.items()
            if key and not p.get("link") and "version" in p
        ]
    locked = tomllib.loads(inputs.files["uv.lock"].decode("utf-8")).get("package", [])
    return [
        Package(normalized_name("pypi", p["name"]), str(p["version"]))
        for p in locked
        if "registry" in p.get("source", {})
    ]


def check_request(ecosystem: str, name: str, version: str) -> None:
    """Refuse anything but one valid name and one exact version (no URLs, paths or VCS)."""
    problem = dependency_problem(DependencyAsk(ecosystem, name, version, "approved"))
    if problem:
        raise UsageError(f"cairn will not install this package: {problem}")


def tool_environment(home: Path, extra: dict[str, str]) -> dict[str, str]:
    """A package manager's environment: an allowlist, a private HOME and TMPDIR, and `extra`."""
    env = {name: os.environ[name] for name in _PASSED_THROUGH if name in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    return env | {"HOME": str(home), "TMPDIR": str(home)} | extra


@functools.lru_cache(maxsize=1)
def host_platform() -> str:
    """Operating system, machine and C library, e.g. `Linux x86_64 glibc 2.36`."""
    libc, libc_version = platform.libc_ver()
    return " ".join(p for p in (platform.system(), platform.machine(), libc, libc_version) if p)


def run_tool(argv: Sequence[str], cwd: Path, env: dict[str, str], timeout: float) -> ToolRun:
    """Run one package-manager command; on timeout its whole process group is killed."""
    with subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    ) as process:
        try:
            output, _ = process.communicate(timeout=timeout)
            code: int | None = process.returncode
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
            code = None
    return ToolRun(code, output.decode("utf-8", "replace")[-OUTPUT_TAIL_CHARS:])


def private_home() -> tempfile.TemporaryDirectory[str]:
    """A throwaway HOME (and cache, unless one is configured) for one package-manager run."""
    return tempfile.TemporaryDirectory(prefix="cairn-home-")


def failure(
    what: str, run: ToolRun, known: Sequence[tuple[str, str]], paths: dict[str, Path]
) -> InstallError:
    """An InstallError for a failed command: a known cause in plain words, else its masked error.

    `known` pairs a pattern of the tool's output with what to tell a person; `paths` are masked.
    """
    if run.exit_code is None:
        return InstallError(f"{what} took too long and was stopped; try again later")
    # Tool output may name local paths or carry a token: whatever is quoted from it is masked.
    sanitizer = Sanitizer(paths={f"<{k}>": v for k, v in paths.items()}, environ={})
    for pattern, message in known:
        match = re.search(pattern, run.output)
        if match:
            return InstallError(sanitizer.clean(message.format(*match.groups())))
    lines = [ln.strip() for ln in run.output.splitlines() if ln.strip()]
    errors = [ln for ln in lines if re.match(r"(error|npm error|ERR!)", ln, re.I)]
    detail = sanitizer.clean((errors or lines or ["no output"])[0], 300)
    return InstallError(f"{what} failed (exit {run.exit_code}): {detail}")


class ToolOptions(TypedDict, total=False):
    """What every package-manager installer takes besides its tool and approved source."""

    download_cache: Path | None
    """A download cache kept between runs; None gives each run a throwaway one."""
    runner: Runner
    timeout: float
    """Seconds one package-manager command may take."""


class ToolInstaller(abc.ABC):
    """What the uv and npm installers share: options, the steps of `add` and `prepare` around
    their own tool's commands, and refusing sources not approved.

    Each one is an `Installer` (mypy checks it where `get_installer` returns one).
    """

    name: ClassVar[str]
    ecosystem: ClassVar[str]
    declarations: ClassVar[str]
    lockfile: ClassVar[str]
    config: ClassVar[tuple[str, ...]]
    target: ClassVar[str]
    no_lockfile: ClassVar[str]
    """What to tell a person whose project has declarations but no lockfile."""

    def __init__(
        self,
        *,
        download_cache: Path | None = None,
        runner: Runner = run_tool,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.download_cache = download_cache
        self.runner = runner
        self.timeout = timeout

    @classmethod
    def from_config(cls, config: Config) -> Self:
        """The installer with the configured tool, approved source and download cache."""
        return cls(download_cache=config.downloads_dir / cls.name, **cls._configured(config))

    @classmethod
    @abc.abstractmethod
    def _configured(cls, config: Config) -> dict[str, Any]:
        """This installer's own options as `config` sets them: its tool and approved source."""

    @abc.abstractmethod
    def _declared_problem(self, declarations: Path) -> str | None:
        """Why the declarations take a package from anywhere but the approved source, or None."""

    @abc.abstractmethod
    def _locked_problem(self, lockfile: Path) -> str | None:
        """Why the lockfile takes a package from anywhere but the approved source, or None."""

    def add(self, inputs_dir: Path, name: str, version: str) -> None:
        """Pin exactly `name` at `version` in the project's declarations and lockfile."""
        check_request(self.ecosystem, name, version)
        self._check_inputs(inputs_dir)
        with private_home() as home:
            self._add(inputs_dir, name, version, Path(home))
        # The tool rewrote both files: what it wrote must still name only the approved source.
        self._check_sources(inputs_dir)

    def prepare(self, inputs_dir: Path, entry_dir: Path) -> None:
        """Install the locked set into `entry_dir`, working on a private copy of the two files."""
        self._check_inputs(inputs_dir)
        if not (inputs_dir / self.lockfile).exists():
            raise InstallError(self.no_lockfile)
        with private_home() as home:
            work = Path(home) / "project"
            work.mkdir()
            for name in (self.declarations, self.lockfile):
                shutil.copyfile(inputs_dir / name, work / name)
            self._prepare(work, entry_dir, Path(home))

    @abc.abstractmethod
    def _add(self, inputs_dir: Path, name: str, version: str, home: Path) -> None:
        """Run the tool's own command that pins the package, in the project's inputs."""

    @abc.abstractmethod
    def _prepare(self, work: Path, entry_dir: Path, home: Path) -> None:
        """Run the tool's own commands that install the locked set from `work` into `entry_dir`."""

    @abc.abstractmethod
    def _check_pin(self, inputs_dir: Path) -> None:
        """Refuse a project that pins a package manager, or a version of it, cairn does not run."""

    def _check_inputs(self, inputs_dir: Path) -> None:
        self._check_pin(inputs_dir)
        self._check_sources(inputs_dir)

    def _check_sources(self, inputs_dir: Path) -> None:
        problem = self._declared_problem(inputs_dir / self.declarations)
        if problem is None and (inputs_dir / self.lockfile).exists():
            problem = self._locked_problem(inputs_dir / self.lockfile)
        if problem:
            raise InstallError(problem)
