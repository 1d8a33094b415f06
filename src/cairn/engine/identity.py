"""Identities: canonical JSON hashed, so equal instructions and equal content always hash equal."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace. Floats are refused: their repr is not canonical."""
    return json.dumps(_checked(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(value: Any) -> str:
    """SHA-256 of the canonical JSON of `value`."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


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
    # _checked on every recipe, which made a workflow of N stages cost O(N^2) Python calls.
    # The JSON, and so every recipe identity already recorded, stays byte for byte the same.
    pairs = [[str(name), _content_id(content)] for name, content in (upstream or {}).items()]
    document = {
        "stage": stage,
        "inputs": _checked(dict(inputs)),
        "upstream": pairs,
        "settings": _checked(dict(settings or {})),
        "tools": _checked(dict(tools or {})),
    }
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _content_id(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    raise TypeError(f"content identities are strings, not {type(content).__name__}")


def _checked(value: Any) -> Any:
    if isinstance(value, float):
        raise TypeError("identities hold no floats; pass a string or an integer")
    if isinstance(value, Mapping):
        return {str(k): _checked(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_checked(v) for v in value]
    if value is None or isinstance(value, str | int | bool):
        return value
    raise TypeError(f"identities hold JSON values only, not {type(value).__name__}")
