"""Fixtures for the dependency tests: real uv and npm (private homes and caches), and a fake.

Tests marked by using `uv_installer` / `npm_installer` talk to PyPI and the npm registry with
small real packages. Every installer gets its own download cache inside the test's tmp
folder, so no test is fast or slow because another one ran first.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from cairn.deps import DependencyCache, Environment, NpmInstaller, Package, UvInstaller
from cairn.deps.installer import ToolRun, run_tool
from cairn.deps.uv import find_uv
from cairn.store import Store

PYPROJECT = """\
[project]
name = "demo"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = []
"""
PACKAGE_JSON = {"name": "demo", "version": "1.0.0", "private": True}


def uv_path() -> str:
    """The uv cairn would use: it comes with the test extras, so it is never skipped."""
    return find_uv()


class CountingRunner:
    """Wraps the real command runner and remembers every package-manager command it ran."""

    def __init__(self) -> None:
        self.commands: list[list[str]] = []
        self.folders: list[Path] = []

    def __call__(
        self, argv: Sequence[str], cwd: Path, env: dict[str, str], timeout: float
    ) -> ToolRun:
        self.commands.append(list(argv))
        self.folders.append(Path(cwd))
        return run_tool(argv, cwd, env, timeout)


def require_npm() -> None:
    """Skip without npm, except in CI (CAIRN_REQUIRE_NPM=1), where its absence fails."""
    if shutil.which("npm") is None:
        if os.environ.get("CAIRN_REQUIRE_NPM") == "1":
            pytest.fail("npm is not installed and CAIRN_REQUIRE_NPM=1 (CI) requires it")
        pytest.skip("npm is not installed")


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    """A SQLite store (the ledger contract runs on both backends, through `store`)."""
    opened = Store.open(f"sqlite:///{tmp_path}/cairn.db", create=True)
    yield opened
    opened.close()


@pytest.fixture
def cache(sqlite_store: Store, tmp_path: Path) -> DependencyCache:
    return DependencyCache(sqlite_store, tmp_path / "deps")


@pytest.fixture
def uv_installer(tmp_path: Path) -> UvInstaller:
    """A real uv installer with a private download cache and a counting runner."""
    return UvInstaller(uv=uv_path(), download_cache=tmp_path / "uv-cache", runner=CountingRunner())


@pytest.fixture
def npm_installer(tmp_path: Path) -> NpmInstaller:
    require_npm()
    return NpmInstaller(download_cache=tmp_path / "npm-cache", runner=CountingRunner())


def python_project(folder: Path, extra: str = "") -> Path:
    """A pyproject.toml-only project (no dependencies yet) in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text(PYPROJECT + extra)
    return folder


def npm_project(folder: Path, **fields: object) -> Path:
    """A package.json-only project in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "package.json").write_text(json.dumps(PACKAGE_JSON | fields, indent=2) + "\n")
    return folder


def snapshot(folder: Path) -> dict[str, tuple[str, int, str]]:
    """Every path under `folder`: (kind, mode, sha256 or link target); byte-identity checks."""
    found = {}
    for path in sorted(folder.rglob("*")):
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            found[str(path.relative_to(folder))] = ("link", 0, os.readlink(path))
        elif path.is_file():
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            found[str(path.relative_to(folder))] = ("file", stat.S_IMODE(info.st_mode), digest)
        else:
            found[str(path.relative_to(folder))] = ("dir", stat.S_IMODE(info.st_mode), "")
    return found


class FakeInstaller:
    """An installer that writes a tiny `node_modules` itself: cache mechanics without network."""

    name = "fake"
    ecosystem = "npm"
    declarations = "package.json"
    lockfile = "package-lock.json"
    config: tuple[str, ...] = ()
    target = "node_modules"

    def __init__(self, links: dict[str, str] | None = None, delay: float = 0.0) -> None:
        self.links = links or {}
        self.delay = delay
        self.prepared = 0

    def environment(self) -> Environment:
        return Environment("fake 1.0", "node v0", "test", "https://registry.example/")

    def add(self, inputs_dir: Path, name: str, version: str) -> None:
        raise NotImplementedError

    def prepare(self, inputs_dir: Path, entry_dir: Path) -> None:
        import time

        self.prepared += 1
        time.sleep(self.delay)
        lock = json.loads((inputs_dir / self.lockfile).read_text())
        for key, entry in lock["packages"].items():
            if key:
                package = entry_dir / key  # keys are "node_modules/<name>"
                package.mkdir(parents=True)
                (package / "package.json").write_text(json.dumps({"version": entry["version"]}))
                (package / "index.js").write_text(f"module.exports = {entry['version']!r};\n")
        (entry_dir / self.target).mkdir(exist_ok=True)
        for name, pointed in self.links.items():
            os.symlink(pointed, entry_dir / self.target / name)

    def resolved(self, root: Path) -> list[Package]:
        found = []
        for manifest in sorted((root / self.target).glob("*/package.json")):
            version = json.loads(manifest.read_text())["version"]
            found.append(Package(manifest.parent.name, version))
        return found


def fake_project(folder: Path, packages: dict[str, str]) -> Path:
    """A package.json + package-lock.json project the FakeInstaller understands."""
    npm_project(folder, dependencies=packages)
    lock = {
        "lockfileVersion": 3,
        "packages": {"": {"name": "demo"}}
        | {f"node_modules/{n}": {"version": v} for n, v in packages.items()},
    }
    (folder / "package-lock.json").write_text(json.dumps(lock))
    return folder
