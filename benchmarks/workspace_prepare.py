"""Preparing a workspace's dependencies: cold install, warm install, and cairn's fingerprint hit.

Builds two realistic projects against the real registries, then measures in one run:

- cold: `uv sync --frozen` / `npm ci` into a fresh workspace with an empty package cache;
- warm: the same into another fresh workspace, the package manager's cache now full;
- cairn hit: a new job's workspace with the same lockfile, through `cairn.deps` (read inputs,
  fingerprint, ledger lookup, advisory re-check), as a runner that used the entry before does
  it: its spare, linked ahead off the job's path (`link_ahead`, timed on its own), is checked
  path by path and moved in by a rename (`cairn.deps.spares`);
- `cairn_hit_linking`: the same with no spare, hardlinks made on the spot, each checked
  against the entry's manifest; `cairn_hit_new_process` is that timed inside a fresh Python
  process (probes, advisory folder and manifest not yet seen; interpreter start-up left out);
- link floor: `cp -al` of the entry's folder, no checks at all: what hardlinking that many
  files and folders costs on this file system, for any tool.

For uv, `cold` and `warm` are plain `uv sync` (no bytecode, about half the files of a cairn
entry); `cold_compiled` and `warm_compiled` add `--compile-bytecode`, the same output as a
cairn entry. Prints the
medians, the ratios and whether each target is met. Run:
`.venv/bin/python benchmarks/workspace_prepare.py` (needs uv, npm, cp and network). Not part of
the test suite.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from cairn.deps import (
    DependencyCache,
    Installer,
    NpmInstaller,
    OsvDirectory,
    UvInstaller,
    bundled_advisories,
    read_inputs,
)
from cairn.store import Store

PYTHON_DEPENDENCIES = [
    "requests==2.32.3", "rich==13.9.4", "pydantic==2.10.4", "httpx==0.28.1", "click==8.1.8",
    "jinja2==3.1.5", "pyyaml==6.0.2", "attrs==24.3.0", "python-dateutil==2.9.0.post0",
    "sqlalchemy==2.0.36", "pytest==8.3.4", "tomli-w==1.1.0", "packaging==24.2",
]  # fmt: skip
NPM_DEPENDENCIES = {
    "express": "4.21.2", "eslint": "8.57.1", "mocha": "10.8.2", "lodash": "4.17.21",
    "axios": "1.7.9", "commander": "12.1.0", "chalk": "4.1.2", "webpack-cli": "5.1.4",
}  # fmt: skip
REPEATS = 5
Measure = Callable[[int], float]
"""Round n's measurement, in seconds."""
# The targets: cairn's hit is at least this many times faster than each baseline.
PYTHON_TARGETS = {"warm": 1.5, "warm_compiled": 1.5, "cold": 10.0, "cold_compiled": 10.0}
NPM_TARGETS = {"warm": 5.0, "cold": 10.0}
# A hit in a new runner process: prepare and materialize, timed inside the child.
HIT_IN_NEW_PROCESS = """
import json, shutil, sys, time
from pathlib import Path
from cairn.deps import DependencyCache, OsvDirectory, bundled_advisories, get_installer
from cairn.deps import read_inputs
from cairn.store import Store

spec = json.loads(sys.argv[1])
store = Store.open(spec["store"])
cache = DependencyCache(store, Path(spec["root"]), auditors=[OsvDirectory(bundled_advisories())])
installer = get_installer(spec["installer"], **spec["options"])
workspace = Path(spec["workspace"])
start = time.perf_counter()
workspace.mkdir(parents=True)
for name in spec["names"]:
    shutil.copyfile(Path(spec["project"]) / name, workspace / name)
record = cache.prepare(installer, read_inputs(workspace, installer))
cache.materialize(installer, record, workspace)
print(time.perf_counter() - start)
"""


def main() -> None:
    uv = str(Path(sys.executable).parent / "uv") if shutil.which("uv") is None else "uv"
    with tempfile.TemporaryDirectory(prefix="cairn-bench-") as tmp:
        root = Path(tmp)
        store = Store.open(f"sqlite:///{root / 'cairn.db'}", create=True)
        auditors = [OsvDirectory(bundled_advisories())]
        cache = DependencyCache(store, root / "deps", auditors=auditors)
        rows = [
            measure_python(root / "py", uv, cache),
            measure_npm(root / "npm", cache),
        ]
        store.close()
    report(rows)


def measure_python(base: Path, uv: str, cache: DependencyCache) -> dict[str, object]:
    project = base / "project"
    project.mkdir(parents=True)
    deps = ", ".join(f'"{d}"' for d in PYTHON_DEPENDENCIES)
    (project / "pyproject.toml").write_text(
        f'[project]\nname = "bench"\nversion = "0.1.0"\nrequires-python = ">=3.11"\n'
        f"dependencies = [{deps}]\n"
    )
    # Locking fills its own cache: the cold install below starts from an empty one.
    lock_env = tool_env(base / "home", UV_CACHE_DIR=str(base / "uv-lock-cache"))
    run([uv, "lock", "--no-config", "--python", sys.executable], project, lock_env)

    def uv_sync(workspace: Path, *extra: str, downloads: str = "uv-cache") -> None:
        env = tool_env(base / "home", UV_CACHE_DIR=str(base / downloads))
        copy_inputs(project, workspace, ("pyproject.toml", "uv.lock"))
        args = [uv, "sync", "--no-config", "--frozen", "--no-install-project", *extra]
        run([*args, "--python", sys.executable], workspace, env)

    compiled = ("--compile-bytecode",)
    cold = {  # each from an empty download cache of its own
        "cold": timed(lambda: uv_sync(base / "cold")),
        "cold_compiled": timed(lambda: uv_sync(base / "cold-pyc", *compiled, downloads="pyc")),
    }
    warm: dict[str, Measure] = {
        "warm": lambda n: timed(lambda: uv_sync(base / f"warm-{n}")),
        "warm_compiled": lambda n: timed(lambda: uv_sync(base / f"warm-pyc-{n}", *compiled)),
    }
    installer = UvInstaller(uv=shutil.which(uv) or uv, download_cache=base / "cairn-uv-cache")
    options = {"uv": installer.uv, "python": installer.python}
    return measure_cairn(
        "python (uv)", project, base, installer, cache, options, cold, warm, PYTHON_TARGETS
    )


def measure_npm(base: Path, cache: DependencyCache) -> dict[str, object]:
    project = base / "project"
    project.mkdir(parents=True)
    manifest = {"name": "bench", "version": "1.0.0", "private": True}
    (project / "package.json").write_text(json.dumps(manifest | {"dependencies": NPM_DEPENDENCIES}))
    flags = ["--ignore-scripts", "--no-audit", "--no-fund"]
    lock_env = tool_env(base / "home", npm_config_cache=str(base / "npm-lock-cache"))
    run(["npm", "install", "--package-lock-only", *flags], project, lock_env)
    env = tool_env(base / "home", npm_config_cache=str(base / "npm-cache"))

    def npm_ci(workspace: Path) -> None:
        copy_inputs(project, workspace, ("package.json", "package-lock.json"))
        run(["npm", "ci", *flags], workspace, env)

    cold = {"cold": timed(lambda: npm_ci(base / "cold"))}
    warm: dict[str, Measure] = {"warm": lambda n: timed(lambda: npm_ci(base / f"warm-{n}"))}
    installer = NpmInstaller(download_cache=base / "cairn-npm-cache")
    options = {"npm": installer.npm, "node": installer.node}
    return measure_cairn("npm", project, base, installer, cache, options, cold, warm, NPM_TARGETS)


def measure_cairn(
    label: str,
    project: Path,
    base: Path,
    installer: Installer,
    cache: DependencyCache,
    options: dict[str, str],
    cold: dict[str, float],
    warm: dict[str, Measure],
    targets: dict[str, float],
) -> dict[str, object]:
    """cairn's first preparation (a build), then rounds of everything else.

    Each round links a spare ahead, then times a cairn hit (taking it), a hit with no spare,
    each warm baseline, a hit in a new process and the link floor one after the other, so a
    machine that gets busier or quieter meanwhile weighs on all of them alike; each is
    reported as its median over the rounds.
    """
    names = (installer.declarations, installer.lockfile)

    def prepare(workspace: Path) -> None:
        copy_inputs(project, workspace, names)
        record = cache.prepare(installer, read_inputs(workspace, installer))
        cache.materialize(installer, record, workspace)

    first = timed(lambda: prepare(base / "cairn-first"))
    record = cache.prepare(installer, read_inputs(base / "cairn-first", installer))
    spec = {
        "store": cache.store.engine.url.render_as_string(hide_password=False),
        "root": str(cache.root),
        "installer": installer.name,
        "options": options,
        "project": str(project),
        "names": names,
    }

    def new_process(n: int) -> float:
        workspace = {"workspace": str(base / f"cairn-hit-new-process-{n}")}
        argv = [sys.executable, "-c", HIT_IN_NEW_PROCESS, json.dumps(spec | workspace)]
        done = subprocess.run(argv, check=True, capture_output=True, text=True)
        return float(done.stdout.split()[-1])

    entry = cache.entry_path(record.fingerprint) / installer.target
    path = {"PATH": os.environ.get("PATH", os.defpath)}
    rounds: dict[str, Measure] = {
        "link_ahead": lambda n: timed(lambda: cache.link_ahead(installer, record, base)),
        "cairn_hit": lambda n: timed(lambda: prepare(base / f"cairn-hit-{n}")),
        "cairn_hit_linking": lambda n: timed(lambda: prepare(base / f"cairn-linking-{n}")),
        **warm,
        "cairn_hit_new_process": new_process,
        "link_floor": lambda n: timed(
            lambda: run(["cp", "-al", str(entry), str(base / f"floor-{n}")], base, path)
        ),
    }
    times: dict[str, list[float]] = {key: [] for key in rounds}
    for n in range(REPEATS):
        for key, measure in rounds.items():
            times[key].append(measure(n))
    return {
        "label": label,
        "packages": record.package_count,
        "size_mib": (record.size_bytes or 0) / 2**20,
        "files": sum(len(files) for _, _, files in os.walk(cache.entry_path(record.fingerprint))),
        **cold,
        "cairn_first": first,
        **{key: statistics.median(seconds) for key, seconds in times.items()},
        "targets": targets,
    }


def report(rows: list[dict[str, object]]) -> None:
    for row in rows:
        hit = float(row["cairn_hit"])  # type: ignore[arg-type]
        print(f"\n{row['label']}: {row['packages']} packages, {row['files']} files, "
              f"{row['size_mib']:.1f} MiB")  # fmt: skip
        for key in ("cold", "cold_compiled", "warm", "warm_compiled", "cairn_first", "cairn_hit",
                    "link_ahead", "cairn_hit_linking", "cairn_hit_new_process",
                    "link_floor"):  # fmt: skip
            if key in row:
                seconds = float(row[key])  # type: ignore[arg-type]
                ratio = f"{seconds / hit:6.1f}x the cairn hit" if key != "cairn_hit" else ""
                print(f"  {key:<24} {seconds:8.3f} s  {ratio}")
        linking = float(row["cairn_hit_linking"])  # type: ignore[arg-type]
        for key, wanted in row["targets"].items():  # type: ignore[attr-defined]
            baseline = float(row[key])  # type: ignore[arg-type]
            verdict = "met" if baseline / hit >= wanted else "NOT met"
            print(f"  target: hit {wanted:g}x faster than {key}: {baseline / hit:.1f}x, {verdict}"
                  f" (with no spare: {baseline / linking:.1f}x)")  # fmt: skip


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def copy_inputs(project: Path, workspace: Path, names: tuple[str, ...]) -> None:
    workspace.mkdir(parents=True)
    for name in names:
        shutil.copyfile(project / name, workspace / name)


def tool_env(home: Path, **extra: str) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    keep = ("PATH", "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "HTTPS_PROXY")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    return env | {"HOME": str(home), "npm_config_update_notifier": "false"} | extra


def run(argv: list[str], cwd: Path, env: dict[str, str]) -> None:
    subprocess.run(argv, cwd=cwd, env=env, check=True, capture_output=True)


if __name__ == "__main__":
    main()
