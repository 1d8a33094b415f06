"""The packaging test: `pip install .` into a fresh venv gives a cairn that does its job.

Not editable and without the test extras, the way a user installs it, with uv held at the
lowest version pyproject.toml allows: the rest of the suite runs the newest. It needs PyPI
and takes about a minute.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
import venv
from collections.abc import Callable
from pathlib import Path

import pytest

from cairn.locks import locked
from cairn.testing.repos import make_sample_repo

from .conftest import CALL_TIMEOUT, base_env

pytestmark = [pytest.mark.acceptance, pytest.mark.packaging]
ROOT = Path(__file__).resolve().parents[2]
INSTALL_TIMEOUT = 600.0
PACKAGE_DATA = ["store/migrations/env.py", "testing/demo_script.yaml"]
ASKS_FOR_SIX = """
steps:
  - request_dependency: {ecosystem: pypi, name: six, version: "1.16.0", reason: "py2/3 shims"}
  - run: "python -c 'import six; open(\\"six-version.txt\\", \\"w\\").write(six.__version__)'"
  - finish: {summary: "Recorded the version of six"}
"""


def lowest_uv() -> str:
    """The lower bound of the uv that pyproject.toml declares as a runtime dependency."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (spec,) = [d for d in project["dependencies"] if re.match(r"uv\b", d)]
    found = re.search(r">=\s*(\d+\.\d+\.\d+)\b", spec)
    assert found, f"uv needs a full lower bound (X.Y.Z) to test against: {spec}"
    return found.group(1)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin folder of a fresh venv holding `pip install <repo>` (uv at its lowest)."""
    # Built once per run: xdist workers share their parent folder, and the lock makes the
    # others wait for (and reuse) the first one's venv; one pip builds this tree at a time.
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    with locked(shared / "packaging.lock"):
        folder = shared / "packaging"
        if not (folder / "installed").exists():
            shutil.rmtree(folder, ignore_errors=True)  # a half-built one from a failed build
            folder.mkdir()
            _install_into(folder)
            (folder / "installed").touch()
    return folder / "venv" / "bin"


def _install_into(folder: Path) -> None:
    venv.create(folder / "venv", with_pip=True)
    bin_dir = folder / "venv" / "bin"
    constraints = folder / "constraints.txt"
    constraints.write_text(f"uv=={lowest_uv()}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON"))}
    subprocess.run(
        [bin_dir / "python", "-m", "pip", "install", "-q", "-c", constraints, str(ROOT)],
        check=True,
        env=env,
        cwd=folder,
        timeout=INSTALL_TIMEOUT,
        capture_output=True,
    )


def test_the_installed_package_holds_its_data_and_its_uv(installed: Path) -> None:
    code = (
        "import cairn, pathlib, sys; from cairn.deps.uv import find_uv; "
        "root = pathlib.Path(cairn.__file__).parent; "
        "print(root); print(find_uv()); "
        "print(*sorted(str(p.relative_to(root)) for p in root.rglob('*') if p.is_file()), "
        "sep='\\n')"
    )
    lines = subprocess.run(
        [installed / "python", "-I", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=CALL_TIMEOUT,
    ).stdout.splitlines()
    root, uv, files = Path(lines[0]), Path(lines[1]), set(lines[2:])
    assert ROOT not in root.parents, "cairn came from the venv, not from this checkout"
    assert uv.parent == installed, "uv beside cairn, from its runtime dependency"
    assert set(PACKAGE_DATA) <= files
    assert any(re.fullmatch(r"store/migrations/versions/\w+\.py", f) for f in files)
    assert any(re.fullmatch(r"testing/osv/[^/]+\.json", f) for f in files)
    version = subprocess.run([uv, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.split()[1] == lowest_uv()


def test_an_installed_cairn_installs_an_approved_python_package(
    installed: Path, tmp_path: Path
) -> None:
    cairn = _cairn(installed, tmp_path)
    cairn("init", "--run-approval", "auto", "--auto-kinds", "interactive")
    cairn("user", "add", "alice")
    repo = make_sample_repo(tmp_path / "repo")
    cairn("room", "create", "sample", "--repo", str(repo))
    script = tmp_path / "agent.yaml"
    script.write_text(ASKS_FOR_SIX)
    cairn("submit", "sample", "Use six", "--agent", f"script:{script}", "--as", "alice")
    cairn("work", "--until-idle")
    assert "awaiting_dependency_approval" in cairn("show", "1").stdout
    cairn("approve", "1", "--reason", "exact pin reviewed")
    cairn("work", "--until-idle")
    assert "awaiting_review" in cairn("show", "1").stdout
    cairn("approve", "1")
    cairn("work", "--until-idle")
    shown = cairn("show", "1").stdout
    assert "completed" in shown, shown
    merged = subprocess.run(
        ["git", "show", "main:six-version.txt"], cwd=repo, capture_output=True, text=True
    )
    assert merged.stdout == "1.16.0", "the job imported the six it installed"
    declared = subprocess.run(
        ["git", "show", "main:pyproject.toml"], cwd=repo, capture_output=True, text=True
    ).stdout
    assert "six==1.16.0" in declared


def _cairn(bin_dir: Path, tmp: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run the installed cairn, with nothing of the test venv on PATH (no uv, no python)."""
    env = base_env(tmp / "home", tmp)
    mine = str(Path(sys.executable).parent)
    rest = [p for p in env["PATH"].split(os.pathsep) if p != mine]
    env["PATH"] = os.pathsep.join([str(bin_dir), *rest])
    env = {k: v for k, v in env.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [bin_dir / "cairn", *args],
            env=env,
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, f"cairn {' '.join(args)}: {done.stdout}{done.stderr}"
        return done

    return run
