"""`FakeInstaller`: an npm-shaped installer that writes `node_modules` itself, without network.

It reads the packages from a `package-lock.json` (`fake_project` writes one) and gives each a
`package.json` and an `index.js`, so the dependency cache's mechanics (fingerprints, staging,
hardlinks, quarantine, spares) run for real in milliseconds.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from cairn.deps import Environment, Package
from cairn.testing.repos import npm_project


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
        """Symlinks to add under `node_modules`, name -> target (to test escaping links)."""
        self.delay = delay
        """Seconds each `prepare` takes (to test concurrent builds)."""
        self.prepared = 0
        """How many times `prepare` ran: 0 more after a cache hit."""

    def environment(self) -> Environment:
        """A fixed toolchain description (part of every fingerprint)."""
        return Environment("fake 1.0", "node v0", "test", "https://registry.example/")

    def add(self, inputs_dir: Path, name: str, version: str) -> None:
        """Not supported: write the lockfile with `fake_project` instead."""
        raise NotImplementedError("FakeInstaller reads the lockfile fake_project writes")

    def prepare(self, inputs_dir: Path, entry_dir: Path) -> None:
        """Write each locked package into `entry_dir/node_modules`, then the configured links."""
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
        """The packages installed under `root/node_modules`."""
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
