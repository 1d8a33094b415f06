"""Auditing a resolved package set against OSV advisories before anything is reused.

`OsvDirectory` reads a folder of OSV JSON advisories (cairn.testing ships a small one);
`OsvService` asks an OSV-compatible HTTP API (`/v1/querybatch`, then `/v1/vulns/{id}` for
each hit). An advisory affects a version through its explicit `versions` or its ECOSYSTEM or
SEMVER ranges. Severity is `database_specific.severity` when present, else the CVSS v3 base
score of its vector; an advisory with neither is recorded as UNKNOWN and does not block.
"""

from __future__ import annotations

import json
import math
import os
import re
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from cairn.deps.installer import InstallError, Package
from cairn.deps.requests import normalized_name

BLOCKING = frozenset({"HIGH", "CRITICAL"})
_OSV_ECOSYSTEM = {"pypi": "PyPI", "npm": "npm"}
_PEP440 = re.compile(
    r"v?(?:(\d+)!)?(\d+(?:\.\d+)*)"
    r"(?:[-_.]?(a|b|c|rc|alpha|beta|pre|preview)[-_.]?(\d*))?"
    r"(?:-(\d+)|[-_.]?(?:post|rev|r)[-_.]?(\d*))?"
    r"(?:[-_.]?dev[-_.]?(\d*))?(?:\+[a-z0-9.]+)?",
    re.I,
)
_SEMVER = re.compile(r"v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?")


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


_CVSS3 = {
    "AV": {"N": 0.85, "A": 0.62, "L": 0.55, "P": 0.2},
    "AC": {"L": 0.77, "H": 0.44},
    "UI": {"N": 0.85, "R": 0.62},
    "C": {"H": 0.56, "L": 0.22, "N": 0.0},
}
_CVSS3_PR = {"U": {"N": 0.85, "L": 0.62, "H": 0.27}, "C": {"N": 0.85, "L": 0.68, "H": 0.5}}


def cvss3_score(vector: str) -> float | None:
    """The CVSS v3.x base score of a vector such as `CVSS:3.1/AV:N/AC:L/...`, or None."""
    metrics = dict(part.split(":", 1) for part in vector.split("/")[1:] if ":" in part)
    try:
        scope = metrics["S"]
        impact_parts = [_CVSS3["C"][metrics[m]] for m in ("C", "I", "A")]
        exploitability = 8.22 * _CVSS3["AV"][metrics["AV"]] * _CVSS3["AC"][metrics["AC"]]
        exploitability *= _CVSS3_PR[scope][metrics["PR"]] * _CVSS3["UI"][metrics["UI"]]
    except KeyError:
        return None
    iss = 1 - math.prod(1 - c for c in impact_parts)
    changed = 7.52 * (iss - 0.029) - 3.25 * (iss - 0.02) ** 15  # scope changed
    impact = 6.42 * iss if scope == "U" else changed
    if impact <= 0:
        return 0.0
    total = impact + exploitability if scope == "U" else 1.08 * (impact + exploitability)
    return _round_up(min(total, 10.0))


def _round_up(value: float) -> float:
    # CVSS 3.1's Roundup: avoids floating-point surprises such as 4.000000001 -> 4.1.
    whole = round(value * 100_000)
    return whole / 100_000.0 if whole % 10_000 == 0 else (math.floor(whole / 10_000) + 1) / 10.0


def version_key(ecosystem: str, version: str) -> tuple[Any, ...] | None:
    """A sort key for a PEP 440 (pypi) or semver (npm) version, or None when it is neither."""
    if ecosystem == "npm":
        return _semver_key(version)
    return pep440_key(version)


def pep440_key(version: str) -> tuple[Any, ...] | None:
    """PEP 440 ordering: epoch, release, then dev < pre < final < post."""
    match = _PEP440.fullmatch(version.strip())
    if not match:
        return None
    epoch, release, pre_l, pre_n, post_a, post_b, dev = match.groups()
    parts = [int(p) for p in release.split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    letter = {"alpha": "a", "beta": "b", "c": "rc", "pre": "rc", "preview": "rc"}
    # An optional group that did not match is None; one that matched without digits is "".
    has_post = post_a is not None or post_b is not None
    post = post_a or post_b
    if pre_l:
        pre_key: tuple[Any, ...] = (0, letter.get(pre_l.lower(), pre_l.lower()), int(pre_n or 0))
    else:
        pre_key = (-1,) if dev is not None and not has_post else (1,)
    post_key = (0, int(post or 0)) if has_post else (-1,)
    dev_key = (0, int(dev or 0)) if dev is not None else (1,)
    return (int(epoch or 0), tuple(parts), pre_key, post_key, dev_key)


def _semver_key(version: str) -> tuple[Any, ...] | None:
    match = _SEMVER.fullmatch(version.strip())
    if not match:
        return None
    major, minor, patch, pre = match.groups()
    if pre is None:
        return (int(major), int(minor), int(patch), (1,))
    ids = tuple((0, int(i), "") if i.isdigit() else (1, 0, i) for i in pre.split("."))
    return (int(major), int(minor), int(patch), (0, ids))


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


def _in_range(ecosystem: str, key: tuple[Any, ...], spec: Mapping[str, Any]) -> bool:
    """OSV range events, applied in version order up to `key`: does the version end affected?"""
    events: list[tuple[tuple[Any, ...], str]] = []
    for event in spec.get("events", []):
        for kind, value in event.items():
            bound = (-math.inf,) if value == "0" else version_key(ecosystem, str(value))
            if bound is None:
                return False  # an unreadable bound: the service that wrote it must judge
            events.append((bound, kind))
    affected = False
    for bound, kind in sorted(events, key=lambda e: (_comparable(e[0]), e[1] != "introduced")):
        here, version = _comparable(bound), _comparable(key)
        if kind == "introduced" and here <= version:
            affected = True
        elif (kind in ("fixed", "limit") and here <= version) or (
            kind == "last_affected" and here < version
        ):
            affected = False
    return affected


def _comparable(key: tuple[Any, ...]) -> tuple[Any, ...]:
    # "introduced: 0" sorts before every real version.
    return (0,) if key == (-math.inf,) else (1, key)


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
