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
    return digest(
        {
            "stage": stage,
            "inputs": dict(inputs),
            "upstream": [[name, content] for name, content in (upstream or {}).items()],
            "settings": dict(settings or {}),
            "tools": dict(tools or {}),
        }
    )


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
