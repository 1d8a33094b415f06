"""Recipe identity: a hash of canonical JSON, so equal instructions always hash equal."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace; floats are refused (their repr is not canonical)."""
    return json.dumps(_checked(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def recipe_id(stage: str, inputs: dict[str, Any]) -> str:
    """The identity of the instructions for one stage: its name and its declared inputs."""
    return hashlib.sha256(canonical_json({"stage": stage, "inputs": inputs}).encode()).hexdigest()


def _checked(value: Any) -> Any:
    if isinstance(value, float):
        raise TypeError("recipes hold no floats; pass a string or an integer")
    if isinstance(value, dict):
        return {str(k): _checked(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_checked(v) for v in value]
    return value
