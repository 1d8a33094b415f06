"""Which dependency requests may be put to a person at all.

An agent is not trusted, so its request is checked before anyone is asked: a known ecosystem,
a name valid there, and one exact version (no ranges, URLs, paths, VCS or local references).
Refusals never repeat what the agent sent: it may carry a secret or a local path.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from cairn.agents.base import DependencyAsk

ECOSYSTEMS = ("pypi", "npm")
_MAX_NAME = {"pypi": 200, "npm": 214}
_MAX_VERSION = 64

# PEP 508 names: letters and digits, with `.`, `_`, `-` inside.
_PYPI_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
# npm's rules for new packages: lowercase, URL-safe, not starting with `.` or `_`, an optional
# `@scope/` with the same rules.
_NPM_NAME = re.compile(r"(?:@[a-z0-9~-][a-z0-9._~-]*/)?[a-z0-9~-][a-z0-9._~-]*")
_NPM_RESERVED = frozenset({"node_modules", "favicon.ico"})
# One PEP 440 public version: no `+local` part, no wildcard, no operator.
_PYPI_VERSION = re.compile(
    r"(?:[0-9]+!)?[0-9]+(?:\.[0-9]+)*(?:(?:a|b|rc)[0-9]+)?(?:\.post[0-9]+)?(?:\.dev[0-9]+)?"
)
# One semver version; build metadata (`+...`) is refused because npm ignores it when resolving.
_SEMVER_ID = r"(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
_NPM_VERSION = re.compile(
    rf"(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)(?:-{_SEMVER_ID}(?:\.{_SEMVER_ID})*)?"
)
_VERSION_HELP = (
    "is not one exact version; ranges (>=, ~=, ^, *), URLs, paths, git references and local "
    "versions (+local) are refused. Ask for one published version, for example {example}"
)
_EXAMPLES = {"pypi": "rich 13.7.1", "npm": "left-pad 1.3.0"}


def dependency_problem(
    ask: DependencyAsk, *, mask: Callable[[str], str] | None = None
) -> str | None:
    """Why a dependency request cannot be put to a person, or None when it can.

    With `mask` (a sanitizer's), a name or version that carries a secret is refused too.
    """
    fields = (ask.ecosystem, ask.name, ask.version, ask.reason)
    if not all(isinstance(value, str) for value in fields):
        return "the request must give ecosystem, name, version and reason as text"
    if ask.ecosystem not in ECOSYSTEMS:
        return f"unknown ecosystem; use one of {', '.join(ECOSYSTEMS)}"
    problem = _name_problem(ask.ecosystem, ask.name) or _version_problem(ask.ecosystem, ask.version)
    if problem:
        return problem
    if not ask.reason.strip():
        return "the request gives no reason; say why the package is needed"
    if mask is not None and (mask(ask.name) != ask.name or mask(ask.version) != ask.version):
        return "the package name or version carries a secret or a local path"
    return None


def _name_problem(ecosystem: str, name: str) -> str | None:
    if not name or len(name) > _MAX_NAME[ecosystem]:
        return f"the package name is empty or longer than {_MAX_NAME[ecosystem]} characters"
    if ecosystem == "pypi" and not _PYPI_NAME.fullmatch(name):
        return (
            "the package name is not a valid PyPI name (PEP 508: letters, digits and . _ - "
            "inside, starting and ending with a letter or digit)"
        )
    if ecosystem == "npm" and (not _NPM_NAME.fullmatch(name) or name in _NPM_RESERVED):
        return (
            "the package name is not a valid npm name (lowercase letters, digits and - . _ ~, "
            "not starting with . or _, optionally @scope/name)"
        )
    return None


def _version_problem(ecosystem: str, version: str) -> str | None:
    pattern = _PYPI_VERSION if ecosystem == "pypi" else _NPM_VERSION
    if len(version) > _MAX_VERSION or not pattern.fullmatch(version):
        return "the version " + _VERSION_HELP.format(example=_EXAMPLES[ecosystem])
    return None


def normalized_name(ecosystem: str, name: str) -> str:
    """The name a person approves: PEP 503 normalized for PyPI (`PyYAML` -> `pyyaml`)."""
    if ecosystem == "pypi":
        return re.sub(r"[-_.]+", "-", name).lower()
    return name


def label(ecosystem: str, name: str, version: str) -> str:
    """How a person reads one exact package version: `pypi rich==13.7.1`, `npm left-pad@1.3.0`."""
    joiner = "@" if ecosystem == "npm" else "=="
    return f"{ecosystem} {name}{joiner}{version}"
