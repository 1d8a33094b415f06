"""The jobs tests use cairn's own fixtures (`cairn`, `store`, `turns`: cairn.testing.plugin)."""

from __future__ import annotations

from cairn.testing.harness import Cairn

__all__ = ["Cairn"]  # test_engine_stages.py and test_gc.py import it from here
