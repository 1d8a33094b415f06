"""The jobs tests use cairn's `cairn` fixture (cairn.testing.plugin): an installation on both
store backends, with users, room `sample` and runs approved by policy.
"""

from __future__ import annotations

from cairn.testing.harness import Cairn

__all__ = ["Cairn"]  # test_engine_stages.py and test_gc.py import it from here
