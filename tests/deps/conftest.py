"""Fixtures for the dependency tests: real uv and npm (private homes and caches), and a fake.

Tests marked by using `uv_installer` / `npm_installer` talk to PyPI and the npm registry with
small real packages. Every installer gets its own download cache inside the test's tmp
folder, so no test is fast or slow because another one ran first. The fake installer and the
project builders are cairn's own (cairn.testing.installers, cairn.testing.repos).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from cairn.deps import DependencyCache, NpmInstaller, UvInstaller
from cairn.deps.installer import ToolRun, run_tool
from cairn.deps.uv import find_uv
from cairn.store import Store


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
def sqlite_store(sqlite_url: str) -> Iterator[Store]:
    """A SQLite store (the ledger contract runs on both backends, through `store`)."""
    opened = Store.open(sqlite_url)
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
