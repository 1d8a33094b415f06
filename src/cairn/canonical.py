"""Canonical JSON and its SHA-256: the one way cairn turns a value into a stable identity.

A leaf module (standard library only): the engine's recipes, the decision chain and the agent
stage's inputs all hash through it, so equal values always hash equal wherever they are hashed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from enum import Enum
from typing import Any


class Form(Enum):
    """How a value is written before it is hashed."""

    compact = ((",", ":"), False)
    """Sorted keys, no whitespace, text as UTF-8. Floats are refused: their repr is not canonical.
    Recipe identities and the decision chain use it."""
    spaced = ((", ", ": "), True)
    """Exactly `json.dumps(value, sort_keys=True)`: ", " and ": ", ASCII escapes, floats kept,
    nothing checked. Only for identities first recorded this way (an agent's settings inside the
    agent stage's recipe): written any other way, every recipe already stored would change."""

    def __init__(self, separators: tuple[str, str], ascii_only: bool) -> None:
        self.separators = separators
        self.ascii_only = ascii_only


def canonical_json(value: Any, form: Form = Form.compact, *, checked: bool = False) -> str:
    """`value` as JSON in `form`; `checked` says the caller already ran `check` on it."""
    if form is Form.compact and not checked:
        value = check(value)
    return json.dumps(
        value, sort_keys=True, separators=form.separators, ensure_ascii=form.ascii_only
    )


def digest(value: Any, form: Form = Form.compact, *, checked: bool = False) -> str:
    """SHA-256 (hex) of the canonical JSON of `value`."""
    return hashlib.sha256(canonical_json(value, form, checked=checked).encode()).hexdigest()


def check(value: Any) -> Any:
    """`value` as plain JSON values (keys as strings, tuples as lists); raises TypeError on the
    rest, floats included."""
    if isinstance(value, float):
        raise TypeError("identities hold no floats; pass a string or an integer")
    if isinstance(value, Mapping):
        return {str(k): check(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [check(v) for v in value]
    if value is None or isinstance(value, str | int | bool):
        return value
    raise TypeError(f"identities hold JSON values only, not {type(value).__name__}")
