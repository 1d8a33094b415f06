"""Auditing a resolved package set against OSV advisories before anything is reused.

`OsvDirectory` reads a folder of OSV JSON advisories (cairn.testing ships a small one);
`OsvService` asks an OSV-compatible HTTP API (`/v1/querybatch`, then `/v1/vulns/{id}` for
each hit). An advisory affects a version through its explicit `versions` or its ECOSYSTEM or
SEMVER ranges. Severity is `database_specific.severity` when present, else the CVSS v3 base
score of its vector; an advisory with neither is recorded as UNKNOWN and does not block.
"""

from __future__ import annotations

import json
import os
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import semver
from cvss import CVSS3, CVSSError  # type: ignore[import-untyped]  # cvss ships no py.typed
from packaging.version import InvalidVersion, Version

from cairn.deps.installer import InstallError, Package
from cairn.deps.requests import normalized_name

BLOCKING = frozenset({"HIGH", "CRITICAL"})
_OSV_ECOSYSTEM = {"pypi": "PyPI", "npm": "npm"}
# A version in one ecosystem's own ordering: PEP 440 for PyPI, semver for npm.
VersionKey = Version | semver.Version
_Bound = tuple[int] | tuple[int, VersionKey | None]


@dataclass(frozen=True)
class Finding:
    """One advisory that affects one resolved package version."""

    package: str
    version: str
    advisory: str
    severity: str
    """CRITICAL, HIGH, MODERATE, LOW or UNKNOWN."""
    summary: str = ""

    @property
    def blocking(self) -> bool:
        return self.severity in BLOCKING


class Auditor(Protocol):
    """Finds advisories that affect a resolved package set."""

    name: str

    def audit(self, ecosystem: str, packages: Sequence[Package]) -> list[Finding]:
        """Every advisory finding for `packages` of `ecosystem` ("pypi" or "npm")."""
        ...


class OsvDirectory:
    """Advisories from a local folder of OSV JSON files (searched recursively).

    The folder is parsed once per process and parsed again only when its list of files, or a
    file's size, mtime or inode, changes: every cache hit is audited against it.
    """

    name = "osv-directory"

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder).absolute()

    def audit(self, ecosystem: str, packages: Sequence[Package]) -> list[Finding]:
        index = parsed_advisories(self.folder)
        found: list[Finding] = []
        for package in packages:
            key = (_OSV_ECOSYSTEM[ecosystem], _name(ecosystem, package.name))
            found += matching(ecosystem, package, index.get(key, []))
        return found


_Index = dict[tuple[str, str], list[dict[str, Any]]]
_Listing = tuple[tuple[str, int, int, int], ...]
_PARSED: dict[Path, tuple[_Listing, _Index]] = {}


def parsed_advisories(folder: Path) -> _Index:
    """The advisories under `folder` by (OSV ecosystem, normalized name); parsed when changed."""
    if not folder.is_dir():
        raise InstallError(
            "the configured OSV advisory folder does not exist; fix the auditor "
            "configuration so dependencies can be audited"
        )
    paths = sorted(folder.rglob("*.json"))
    listing = tuple((str(p), *_stamp(p.stat())) for p in paths)
    known = _PARSED.get(folder)
    if known is not None and known[0] == listing:
        return known[1]
    index: _Index = {}
    for path in paths:
        advisory = json.loads(path.read_text(encoding="utf-8"))
        for ecosystem, name in _affected_names(advisory):
            index.setdefault((ecosystem, name), []).append(advisory)
    _PARSED[folder] = (listing, index)
    return index


def _stamp(info: os.stat_result) -> tuple[int, int, int]:
    return info.st_size, info.st_mtime_ns, info.st_ino


class OsvService:
    """Advisories from an OSV-compatible HTTP service (for example https://api.osv.dev)."""

    name = "osv-service"

    def __init__(self, base_url: str, *, timeout: float = 20.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout

    def audit(self, ecosystem: str, packages: Sequence[Package]) -> list[Finding]:
        queries = [
            {
                "package": {"ecosystem": _OSV_ECOSYSTEM[ecosystem], "name": p.name},
                "version": p.version,
            }
            for p in packages
        ]
        answer = self._call("/v1/querybatch", {"queries": queries}) if queries else {}
        found: list[Finding] = []
        advisories: dict[str, dict[str, Any]] = {}
        for package, result in zip(packages, answer.get("results", []), strict=False):
            ids = [v["id"] for v in (result or {}).get("vulns", []) if "id" in v]
            for advisory_id in ids:
                if advisory_id not in advisories:
                    quoted = urllib.parse.quote(advisory_id, safe="")
                    advisories[advisory_id] = self._call(f"/v1/vulns/{quoted}", None)
            found += matching(ecosystem, package, [advisories[i] for i in ids])
        return found

    def _call(self, path: str, body: Any) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base_url + path, data=data, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                answer = json.loads(response.read())
        except (OSError, ValueError) as exc:
            raise InstallError(
                "the OSV advisory service could not be reached or answered nonsense "
                f"({type(exc).__name__}); dependencies stay unaudited and unused, try again later"
            ) from None
        return answer if isinstance(answer, dict) else {}


def matching(
    ecosystem: str, package: Package, advisories: Iterable[Mapping[str, Any]]
) -> list[Finding]:
    """The findings among `advisories` that affect this exact package version."""
    found = []
    for advisory in advisories:
        if any(_affects(ecosystem, package, a) for a in advisory.get("affected", [])):
            found.append(
                Finding(
                    package=package.name,
                    version=package.version,
                    advisory=str(advisory.get("id", "?")),
                    severity=severity(advisory),
                    summary=str(advisory.get("summary", ""))[:200],
                )
            )
    return found


def severity(advisory: Mapping[str, Any]) -> str:
    """CRITICAL/HIGH/MODERATE/LOW: the database's own rating, else CVSS v3, else UNKNOWN."""
    rated = (advisory.get("database_specific") or {}).get("severity")
    if isinstance(rated, str) and rated.strip():
        word = rated.strip().upper()
        return "MODERATE" if word == "MEDIUM" else word
    scores = [
        cvss3_score(s.get("score", ""))
        for s in advisory.get("severity", [])
        if str(s.get("type", "")).startswith("CVSS_V3")
    ]
    known = [s for s in scores if s is not None]
    if not known:
        return "UNKNOWN"
    worst = max(known)
    for floor, word in ((9.0, "CRITICAL"), (7.0, "HIGH"), (4.0, "MODERATE"), (0.1, "LOW")):
        if worst >= floor:
            return word
    return "NONE"


def verdict(auditors: Sequence[Auditor], findings: Sequence[Finding]) -> dict[str, Any]:
    """The audit record stored with a cache entry."""
    return {
        "auditors": [a.name for a in auditors],
        "findings": [asdict(f) for f in findings],
        "blocking": sorted({f.advisory for f in findings if f.blocking}),
    }


def quarantine_reason(ecosystem: str, findings: Sequence[Finding]) -> str | None:
    """A diagnosis naming each blocked package and advisory, or None when nothing blocks."""
    blocked = [f for f in findings if f.blocking]
    if not blocked:
        return None
    joiner = "@" if ecosystem == "npm" else "=="
    named = "; ".join(
        f"{f.package}{joiner}{f.version} has {f.severity} advisory {f.advisory}"
        for f in blocked[:5]
    )
    more = f" (and {len(blocked) - 5} more)" if len(blocked) > 5 else ""
    return (
        f"quarantined: {named}{more}. Ask for a version without the advisory, or have an admin "
        "review it; this cache entry is never used"
    )


def cvss3_score(vector: str) -> float | None:
    """The CVSS v3.x base score of a vector such as `CVSS:3.1/AV:N/AC:L/...`, or None."""
    try:
        return float(CVSS3(vector).base_score)
    except (CVSSError, TypeError, ValueError, AttributeError):
        return None


def version_key(ecosystem: str, version: str) -> VersionKey | None:
    """A sort key for a PEP 440 (pypi) or semver (npm) version, or None when it is neither."""
    if ecosystem == "npm":
        return semver_key(version)
    return pep440_key(version)


def pep440_key(version: str) -> Version | None:
    """The PEP 440 version (epoch, release, dev < pre < final < post, local), or None."""
    try:
        return Version(version)
    except (InvalidVersion, TypeError):
        return None


def semver_key(version: str) -> semver.Version | None:
    """The semver version (npm's `v1.2.3` spelling too; build metadata ignored), or None."""
    try:
        return semver.Version.parse(version.strip().removeprefix("v"))
    except (ValueError, TypeError):
        return None


def _affects(ecosystem: str, package: Package, affected: Mapping[str, Any]) -> bool:
    named = affected.get("package") or {}
    if named.get("ecosystem") != _OSV_ECOSYSTEM[ecosystem]:
        return False
    if _name(ecosystem, str(named.get("name", ""))) != _name(ecosystem, package.name):
        return False
    if package.version in affected.get("versions", []):
        return True
    key = version_key(ecosystem, package.version)
    return key is not None and any(
        _in_range(ecosystem, key, r)
        for r in affected.get("ranges", [])
        if r.get("type") in ("ECOSYSTEM", "SEMVER")
    )


def _in_range(ecosystem: str, version: VersionKey, spec: Mapping[str, Any]) -> bool:
    """OSV range events, applied in version order up to `version`: does it end affected?"""
    events: list[tuple[_Bound, str]] = []
    for event in spec.get("events", []):
        for kind, value in event.items():
            # "introduced: 0" sorts before every real version.
            bound = (0,) if value == "0" else (1, version_key(ecosystem, str(value)))
            if bound[-1] is None:
                return False  # an unreadable bound: the service that wrote it must judge
            events.append((bound, kind))
    here = (1, version)
    affected = False
    for bound, kind in sorted(events, key=lambda e: (e[0], e[1] != "introduced")):
        if kind == "introduced" and bound <= here:
            affected = True
        elif (kind in ("fixed", "limit") and bound <= here) or (
            kind == "last_affected" and bound < here
        ):
            affected = False
    return affected


def _affected_names(advisory: Mapping[str, Any]) -> set[tuple[str, str]]:
    names: set[tuple[str, str]] = set()
    for affected in advisory.get("affected", []):
        named = affected.get("package") or {}
        ecosystem = str(named.get("ecosystem"))
        if ecosystem in _OSV_ECOSYSTEM.values():
            ours = "pypi" if ecosystem == "PyPI" else "npm"
            names.add((ecosystem, _name(ours, str(named.get("name", "")))))
    return names


def _name(ecosystem: str, name: str) -> str:
    return normalized_name(ecosystem, name)


def bundled_advisories() -> Path:
    """The small folder of OSV advisories that ships in `cairn.testing` (for tests and demos)."""
    return Path(__file__).resolve().parent.parent / "testing" / "osv"
