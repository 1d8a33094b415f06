"""Identities: canonical JSON hashed, so equal instructions and equal content always hash equal."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cairn.canonical import canonical_json, check, digest

__all__ = ["canonical_json", "digest", "recipe_id"]


def recipe_id(
    stage: str,
    inputs: Mapping[str, Any],
    *,
    upstream: Mapping[str, str | None] | None = None,
    settings: Mapping[str, Any] | None = None,
    tools: Mapping[str, str] | None = None,
) -> str:
    """The identity of the instructions for one stage, recorded before it runs.

    `upstream` maps earlier stages to their content identities, in workflow order, so a
    changed earlier result changes every later recipe.
    """
    # Upstream grows with every stage: its pairs are checked flatly rather than walked through
    # `check` on every recipe, which made a workflow of N stages cost O(N^2) Python calls.
    # The JSON, and so every recipe identity already recorded, stays byte for byte the same.
    pairs = [[str(name), _content_id(content)] for name, content in (upstream or {}).items()]
    document = {
        "stage": stage,
        "inputs": check(dict(inputs)),
        "upstream": pairs,
        "settings": check(dict(settings or {})),
        "tools": check(dict(tools or {})),
    }
    return digest(document, checked=True)


def _content_id(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    raise TypeError(f"content identities are strings, not {type(content).__name__}")
