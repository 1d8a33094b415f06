"""The uv installer: PyPI wheels for projects with `pyproject.toml` and `uv.lock`.

uv always runs with `--no-config` (the repository's or the user's uv settings cannot add an
index, a cache folder or build options), the approved index only, `--no-build` (wheels only,
no build hooks), a private HOME, and the interpreter cairn was configured with. An entry is a
relocatable venv (`uv venv --relocatable`) holding copies, not links, of the wheels' files,
with bytecode compiled, so it stays valid wherever it is hardlinked to.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion

from cairn.deps.fingerprint import Environment, without_credentials
from cairn.deps.installer import (
    InstallError,
    Package,
    ToolInstaller,
    ToolOptions,
    ToolRun,
    failure,
    host_platform,
    tool_environment,
)
from cairn.deps.requests import normalized_name

if TYPE_CHECKING:
    from cairn.config import Config

PYPI = "https://pypi.org/simple"
_KNOWN_FAILURES = (
    (r"Because (\S+?)==(\S+?) has no usable wheels",
     "pypi {}=={} publishes no wheel for this platform, and cairn never builds packages from "
     "source; ask for a version that ships a wheel"),
    (r"Distribution `([^=`\s]+)==([^ `]+)[^`]*` can't be installed because it is marked as "
     r"`--no-build`",
     "pypi {}=={} publishes no wheel for this platform, and cairn never builds packages from "
     "source; ask for a version that ships a wheel"),
    (r"Because there is no version of (\S+?)==(\S+?) and",
     "pypi {}=={} does not exist on the approved index; check the name and version"),
    (r"(Because [^\n]*?unsatisfiable\.)",
     "uv could not fit the approved version with the project's other requirements: {}"),
)  # fmt: skip
_SHOWN_PIN = re.compile(r"[\w.,=<>!~* ]{1,40}")
# `[tool.uv.sources]` may only route a package to a named (and approved) index.
_INDEX_SOURCE = {"index", "marker", "extra", "group"}


class UvInstaller(ToolInstaller):
    """Prepares PyPI dependencies with uv (see the module docstring for the rules)."""

    name = "uv"
    ecosystem = "pypi"
    declarations = "pyproject.toml"
    lockfile = "uv.lock"
    config = ("uv.toml",)
    target = ".venv"
    no_lockfile = "the project has no uv.lock; run `uv lock` and commit it"

    def __init__(
        self,
        *,
        uv: str | Path | None = None,
        python: str | Path | None = None,
        index_url: str = PYPI,
        **options: Unpack[ToolOptions],
    ) -> None:
        super().__init__(**options)
        self.uv = str(uv or find_uv())
        self.python = str(python or sys.executable)
        self.index_url = index_url.rstrip("/")

    @classmethod
    def _configured(cls, config: Config) -> dict[str, Any]:
        return {"uv": config.uv_command, "index_url": config.pypi_index}

    def environment(self) -> Environment:
        implementation, version, base = python_facts(self.python)
        return Environment(
            tool=f"uv {uv_version(self.uv)}",
            runtime=f"{implementation} {version}",
            platform=host_platform(),
            source=without_credentials(self.index_url),
            outside_links=(base,),
        )

    def _add(self, inputs_dir: Path, name: str, version: str, home: Path) -> None:
        args = ["add", "--no-sync", "--no-build", f"{name}=={version}"]
        self._run(args, inputs_dir, home, "uv add")

    def _prepare(self, work: Path, entry_dir: Path, home: Path) -> None:
        venv = entry_dir / self.target
        self._run(["venv", "--relocatable", str(venv)], work, home, "uv venv")
        sync = ["sync", "--frozen", "--no-build", "--no-install-project"]
        sync += ["--no-install-workspace", "--compile-bytecode", "--link-mode", "copy"]
        self._run(sync, work, home, "uv sync", {"UV_PROJECT_ENVIRONMENT": str(venv)})

    def resolved(self, root: Path) -> list[Package]:
        found = []
        site = root / self.target / "lib"
        for metadata in sorted(site.glob("python*/site-packages/*.dist-info/METADATA")):
            headers = _headers(metadata)
            if "name" in headers and "version" in headers:
                found.append(Package(normalized_name("pypi", headers["name"]), headers["version"]))
        return found

    def _run(
        self, args: list[str], cwd: Path, home: Path, what: str, extra: dict[str, str] | None = None
    ) -> ToolRun:
        cache = self.download_cache or home / "uv-cache"
        env = tool_environment(
            home,
            {
                "UV_CACHE_DIR": str(cache),
                "UV_PYTHON_DOWNLOADS": "never",
                "UV_NO_PROGRESS": "1",
                **(extra or {}),
            },
        )
        argv = [self.uv, args[0], "--no-config", "--python", self.python]
        argv += ["--index-url", self.index_url, *args[1:]]
        run = self.runner(argv, cwd, env, self.timeout)
        if run.exit_code != 0:
            raise failure(what, run, _KNOWN_FAILURES, {"home": home, "project": cwd})
        return run

    def _check_pin(self, inputs_dir: Path) -> None:
        pin = required_version(inputs_dir)
        if pin is None:
            return
        current = uv_version(self.uv)
        if not satisfies(pin, current):
            shown = pin if _SHOWN_PIN.fullmatch(pin) else "a version"
            raise InstallError(
                f"the repository pins uv {shown} ([tool.uv] required-version), but cairn's uv "
                f"is {current}; install a uv that satisfies the pin, or change the pin"
            )

    def _declared_problem(self, declarations: Path) -> str | None:
        return declared_problem(declarations, self.index_url)

    def _locked_problem(self, lockfile: Path) -> str | None:
        return source_problem(lockfile, self.index_url)


def declared_problem(pyproject: Path, index_url: str) -> str | None:
    """Why pyproject.toml names a source other than the approved index, or None."""
    try:
        document = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        uv = document.get("tool", {}).get("uv", {})
        urls = [uv.get("index-url"), *uv.get("extra-index-url", []), *uv.get("find-links", [])]
        urls += [index.get("url") for index in uv.get("index", [])]
        sources = [s for spec in uv.get("sources", {}).values() for s in _listed(spec)]
        requirements = _requirements(document)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, AttributeError, TypeError):
        return "the project's pyproject.toml is missing or malformed; fix it and try again"
    approved = without_credentials(index_url).rstrip("/")
    if any(u is not None and without_credentials(str(u)).rstrip("/") != approved for u in urls):
        return (
            "pyproject.toml names a package index cairn has not approved; use the approved "
            "index only (or ask an admin to configure that index)"
        )
    direct = [r for r in requirements if "@" in r.split(";")[0]]
    if direct or any(not isinstance(s, dict) or set(s) - _INDEX_SOURCE for s in sources):
        return (
            "pyproject.toml takes a package from a URL, path or git source; cairn installs "
            "packages from the approved index only"
        )
    return None


def _listed(value: object) -> list[object]:
    return value if isinstance(value, list) else [value]


def _requirements(document: dict[str, Any]) -> list[str]:
    project = document.get("project", {})
    found = list(project.get("dependencies", []))
    found += [r for group in project.get("optional-dependencies", {}).values() for r in group]
    found += [r for g in document.get("dependency-groups", {}).values() for r in g]
    return [r for r in found if isinstance(r, str)]


def source_problem(lockfile: Path, index_url: str) -> str | None:
    """Why a uv.lock takes a package from somewhere other than the approved index, or None."""
    try:
        locked = tomllib.loads(lockfile.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return "the project's uv.lock is missing or unreadable; run `uv lock` and commit it"
    approved = without_credentials(index_url).rstrip("/")
    for package in locked.get("package", []):
        source = package.get("source", {})
        name = normalized_name("pypi", str(package.get("name", "?")))[:100]
        if "registry" in source:
            if without_credentials(str(source["registry"])).rstrip("/") != approved:
                return (
                    f"uv.lock takes {name} from an index cairn has not approved; use the "
                    "approved index only (or ask an admin to configure that index)"
                )
        elif not _local_member(source):
            kind = next(iter(source), "unknown")
            return (
                f"uv.lock takes {name} from a {kind} source; cairn installs packages from the "
                "approved index only (no URLs, paths or VCS)"
            )
    return None


def _local_member(source: dict[str, object]) -> bool:
    # The project itself and its workspace members: never installed (--no-install-workspace).
    for kind in ("virtual", "editable"):
        where = source.get(kind)
        if isinstance(where, str):
            parts = Path(where).parts
            return not Path(where).is_absolute() and ".." not in parts
    return False


def required_version(inputs_dir: Path) -> str | None:
    """The repository's uv pin: `[tool.uv] required-version` (or `required-version` in uv.toml)."""
    for name, path in (("pyproject.toml", ("tool", "uv")), ("uv.toml", ())):
        try:
            document = tomllib.loads((inputs_dir / name).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            continue
        for part in path:
            document = document.get(part, {}) if isinstance(document, dict) else {}
        pin = document.get("required-version") if isinstance(document, dict) else None
        if isinstance(pin, str) and pin.strip():
            return pin.strip()
    return None


def satisfies(spec: str, version: str) -> bool:
    """Whether `version` satisfies a PEP 440 specifier such as `>=0.5,<1` or `==0.13.*`."""
    clauses = [clause.strip() for clause in spec.split(",")]
    if not all(clauses):
        return False
    # A bare version pins exactly that version, as uv reads `required-version = "0.13.9"`.
    written = ",".join(c if c[0] in "=!~<>" else f"=={c}" for c in clauses)
    try:
        return SpecifierSet(written, prereleases=True).contains(version)
    except (InvalidSpecifier, InvalidVersion):
        return False


def _headers(metadata: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    with metadata.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if not line.strip():
                break
            key, sep, value = line.partition(":")
            if sep and key.lower() in ("name", "version"):
                found.setdefault(key.lower(), value.strip())
    return found


def find_uv() -> str:
    """The uv that ships with cairn's environment, else the first on PATH."""
    try:
        from uv import find_uv_bin  # the `uv` package from PyPI, when installed

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
    if found is None:
        raise InstallError(
            "uv is not installed; install it (for example `pip install uv`) to prepare "
            "Python dependencies"
        )
    return found


@functools.lru_cache(maxsize=16)
def uv_version(uv: str) -> str:
    """`uv --version` as a bare version, e.g. `0.13.9`."""
    return _probe([uv, "--version"], "uv").split()[1]


@functools.lru_cache(maxsize=16)
def python_facts(python: str) -> tuple[str, str, str]:
    """(implementation, version, real path of the base interpreter) of `python`."""
    code = (
        "import os, platform, sys; print(platform.python_implementation()); "
        "print(platform.python_version()); "
        "print(os.path.realpath(getattr(sys, '_base_executable', sys.executable)))"
    )
    lines = _probe([python, "-I", "-c", code], "the Python interpreter").splitlines()
    return lines[0], lines[1], lines[2]


def _probe(argv: Sequence[str], what: str) -> str:
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=60, check=True, env={}
        )
    except (OSError, subprocess.SubprocessError):
        raise InstallError(f"{what} could not be run; check that it is installed") from None
    return done.stdout.strip()
