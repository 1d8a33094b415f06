"""Line comments on a diff, gathered into the one review message `reply` sends the agent."""

from __future__ import annotations

import re
from collections.abc import Mapping

COMMENT = re.compile(r"^comment:(?P<path>[^\x00-\x1f]{1,500}):(?P<side>[ab])(?P<line>\d{1,9})$")
"""A comment field's name: `comment:PATH:bLINE` (the new side) or `comment:PATH:aLINE` (old)."""


def review_message(fields: Mapping[str, str]) -> str:
    """The review as one message: each line comment where it applies, then the general note."""
    notes: list[str] = []
    for name, value in fields.items():
        found = COMMENT.match(name)
        text = value.strip()
        if found is None or not text:
            continue
        where = "line" if found["side"] == "b" else "removed line"
        notes.append(f"{found['path']} {where} {found['line']}: {text}")
    general = fields.get("message", "").strip()
    parts = []
    if notes:
        parts.append("Comments on the diff:\n" + "\n".join(f"- {note}" for note in notes))
    if general:
        parts.append(general)
    return "\n\n".join(parts)
