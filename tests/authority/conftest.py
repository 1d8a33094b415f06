"""A team under the strict default policy, on both store backends, and jobs placed at gates.

Fixtures:

- `team`: a `Cairn` (cairn.testing.harness) whose group `default` keeps the default
  policy (every run and dependency waits for an admin). People: admins `admin` and `bob`,
  member `alice`, and `carol`, who belongs only to group `others`. Room `sample` belongs to
  `default`.
- `cli`: the real `cairn` command (tests/acceptance's harness) on a home made by a plain
  `cairn init` (the strict default policy) plus member `alice`; no room yet.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from acceptance.conftest import Cli, base_env
from cairn.stages import Stage
from cairn.store import Store, identity
from cairn.testing.harness import Cairn, make_cairn
from cairn.testing.repos import make_sample_repo

WRITE_B = 'steps:\n  - write: {path: b.txt, content: "b\\n"}\n  - finish: {summary: added b}\n'
ASKS_FOR_RICH = """
steps:
  - write: {path: a.txt, content: "a\\n"}
  - request_dependency: {ecosystem: pypi, name: termcolor, version: "2.4.0", reason: "colour"}
  - write: {path: a2.txt, content: "after the decision\\n"}
  - finish: {summary: "a.txt and a2.txt"}
"""
STAGE_OF_GATE = {
    "run": Stage.awaiting_run_approval,
    "dependency": Stage.awaiting_dependency_approval,
    "integration": Stage.awaiting_review,
}


@pytest.fixture
def team(store: Store, tmp_path: Path, package_downloads: Path) -> Cairn:
    installation = make_cairn(store, tmp_path, policy=None, package_downloads=package_downloads)
    with store.begin() as conn:
        others = identity.add_group(conn, "others")
        identity.set_membership(conn, others.id, identity.add_user(conn, "carol").id, "admin")
    return installation


@pytest.fixture(scope="session")
def strict_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home made once per session by a plain `cairn init` and `cairn user add alice`."""
    tmp = tmp_path_factory.mktemp("strict")
    made = Cli(home=tmp / "home", tmp=tmp, repo=tmp, env=base_env(tmp / "home", tmp))
    made("init")
    made("user", "add", "alice")
    return made.home


@pytest.fixture
def cli(tmp_path: Path, strict_home: Path) -> Cli:
    home = tmp_path / "home"
    shutil.copytree(strict_home, home)
    repo = make_sample_repo(tmp_path / "repo")
    made = Cli(home=home, tmp=tmp_path, repo=repo, env=base_env(home, tmp_path))
    made.private = sorted({str(tmp_path), str(tmp_path.resolve())}, key=len, reverse=True)
    return made
