"""Fixtures for the security tests: an installation (tests/jobs) and the CLI (tests/acceptance).

- `cairn`: the jobs harness (`jobs.conftest.Cairn`) on both store backends, runs auto-approved.
- `cli`: the acceptance harness, the real `cairn` command in a temporary home.
- `workspace`, `outside` (tests/agents): a bare workspace, and a folder beside it holding a
  file that must never change.
"""

from __future__ import annotations

from acceptance.conftest import cli, template_home  # noqa: F401  (fixtures, re-exported)
from agents.conftest import outside, workspace  # noqa: F401  (fixtures, re-exported)
from jobs.conftest import cairn  # noqa: F401  (fixture, re-exported)
