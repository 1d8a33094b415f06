"""Fixtures for the security tests: an installation (cairn's plugin) and the CLI (tests/acceptance).

- `cairn`: cairn.testing's installation (`cairn.testing.harness.Cairn`) on both store
  backends, runs auto-approved; it comes from cairn's pytest plugin.
- `cli`: the acceptance harness, the real `cairn` command in a temporary home.
- `workspace`, `outside` (tests/agents): a bare workspace, and a folder beside it holding a
  file that must never change.
"""

from __future__ import annotations

from acceptance.conftest import cli, template_home  # noqa: F401  (fixtures, re-exported)
from agents.conftest import outside, workspace  # noqa: F401  (fixtures, re-exported)
