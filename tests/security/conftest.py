"""Fixtures for the security tests: an installation (tests/jobs) and the CLI (tests/acceptance).

- `cairn`: the jobs harness (`jobs.conftest.Cairn`) on both store backends, runs auto-approved.
- `cli`: the acceptance harness, the real `cairn` command in a temporary home.
- `outside`: a folder beside the workspace holding a file that must never change.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from acceptance.conftest import cli, template_home  # noqa: F401  (fixtures, re-exported)
from jobs.conftest import cairn  # noqa: F401  (fixture, re-exported)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text("keep me\n")
    return folder
