"""Which dependency requests may be put to a person at all."""

from __future__ import annotations

import re

from cairn.agents.base import DependencyAsk

ECOSYSTEMS = ("pypi", "npm")
_EXACT_VERSION = re.compile(r"^[0-9][0-9A-Za-z.+-]*$")


def dependency_problem(ask: DependencyAsk) -> str | None:
    """Why a dependency request cannot be put to a person, or None when it can."""
    if ask.ecosystem not in ECOSYSTEMS:
        return f"unknown ecosystem {ask.ecosystem!r}; use one of {', '.join(ECOSYSTEMS)}"
    if not ask.name or len(ask.name) > 214 or any(c.isspace() for c in ask.name):
        return "the package name is empty, too long or contains spaces"
    if not _EXACT_VERSION.match(ask.version):
        return f"{ask.version!r} is not one exact version (ranges, URLs and paths are refused)"
    return None


def label(ecosystem: str, name: str, version: str) -> str:
    """How a person reads one exact package version: `pypi rich==13.7.1`, `npm left-pad@1.3.0`."""
    joiner = "@" if ecosystem == "npm" else "=="
    return f"{ecosystem} {name}{joiner}{version}"
