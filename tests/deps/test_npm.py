"""The npm installer against the npm registry: record, prepare, require; and what it refuses."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from cairn.deps import DependencyCache, InstallError, NpmInstaller, add_dependency, read_inputs
from cairn.deps.npm import npm_version
from cairn.store.dependency_caches import CacheStatus
from cairn.testing.repos import npm_project


def require(workspace: Path, code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["node", "-e", code], capture_output=True, text=True, cwd=workspace, check=False
    )


def test_an_approved_npm_package_is_recorded_prepared_and_required(
    tmp_path: Path, npm_installer: NpmInstaller, cache: DependencyCache
) -> None:
    current = npm_version(npm_installer.npm, npm_installer.node)
    workspace = npm_project(tmp_path / "workspace", packageManager=f"npm@{current}")
    assert add_dependency(npm_installer, workspace, "is-number", "7.0.0") == 1
    declared = json.loads((workspace / "package.json").read_text())
    assert declared["dependencies"] == {"is-number": "7.0.0"}  # exact, no ^range
    assert all(workspace not in (f, *f.parents) for f in npm_installer.runner.folders)

    record = cache.prepare(npm_installer, read_inputs(workspace, npm_installer))
    assert (record.status, record.package_count) == (CacheStatus.ready, 1)
    assert len(cache.materialize(npm_installer, record, workspace)) == 1
    done = require(
        workspace, "const n = require('is-number'); console.log(n(7), require.resolve('is-number'))"
    )
    assert done.returncode == 0, done.stderr
    answer, where = done.stdout.split()
    assert answer == "true" and Path(where).is_relative_to(workspace)


def test_no_install_script_ever_runs(
    tmp_path: Path, npm_installer: NpmInstaller, cache: DependencyCache
) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    scripts = {
        stage: f"node -e \"require('fs').writeFileSync('{markers}/{stage}', 'ran')\""
        for stage in ("preinstall", "install", "postinstall", "prepare")
    }
    workspace = npm_project(tmp_path / "workspace", scripts=scripts)
    add_dependency(npm_installer, workspace, "is-number", "7.0.0")
    record = cache.prepare(npm_installer, read_inputs(workspace, npm_installer))
    cache.materialize(npm_installer, record, workspace)
    assert list(markers.iterdir()) == []
    assert all("--ignore-scripts" in c for c in npm_installer.runner.commands)

    # The control: the same inputs under a plain `npm ci` do run the project's scripts.
    control = tmp_path / "control"
    control.mkdir()
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(workspace / name, control / name)
    subprocess.run(
        ["npm", "ci", "--no-audit", "--no-fund", "--cache", str(tmp_path / "npm-cache")],
        cwd=control,
        capture_output=True,
        check=True,
    )
    assert {m.name for m in markers.iterdir()} >= {"preinstall", "postinstall"}


def test_the_repository_pin_of_npm_is_enforced(tmp_path: Path, npm_installer: NpmInstaller) -> None:
    refusals = {
        "npm@1.0.0": r"pins npm@1\.0\.0 .* but cairn's npm is",
        "pnpm@9.0.0": r"pins pnpm@9\.0\.0 .* installer for package\.json",
    }
    for pin, refusal in refusals.items():
        workspace = npm_project(tmp_path / pin, packageManager=pin)
        with pytest.raises(InstallError, match=refusal):
            add_dependency(npm_installer, workspace, "is-number", "7.0.0")
    assert npm_installer.runner.commands == []


def test_only_the_approved_registry_is_accepted(
    tmp_path: Path, npm_installer: NpmInstaller, cache: DependencyCache
) -> None:
    workspace = npm_project(tmp_path / "workspace", dependencies={"left-pad": "1.3.0"})
    lock = {
        "name": "demo",
        "lockfileVersion": 3,
        "packages": {
            "": {"name": "demo", "dependencies": {"left-pad": "1.3.0"}},
            "node_modules/left-pad": {
                "version": "1.3.0",
                "resolved": "git+ssh://git@github.com/stevemao/left-pad.git#abc",
                "integrity": "sha512-x",
            },
        },
    }
    (workspace / "package-lock.json").write_text(json.dumps(lock))
    with pytest.raises(InstallError, match="from outside the approved registry"):
        cache.prepare(npm_installer, read_inputs(workspace, npm_installer))
    lock["packages"]["node_modules/left-pad"]["resolved"] = "file:../left-pad"
    (workspace / "package-lock.json").write_text(json.dumps(lock))
    with pytest.raises(InstallError, match="from outside the approved registry"):
        cache.prepare(npm_installer, read_inputs(workspace, npm_installer))
    for spec in (
        "github:stevemao/left-pad",
        "file:../left-pad",
        "stevemao/left-pad",
        "https://x.test/a.tgz",
    ):
        declared = npm_project(tmp_path / spec.replace("/", "_"), dependencies={"left-pad": spec})
        with pytest.raises(InstallError, match="path, URL or git"):
            add_dependency(npm_installer, declared, "is-number", "7.0.0")
    assert npm_installer.runner.commands == []
