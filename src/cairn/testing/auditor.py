"""`FakeAuditor`: an `Auditor` that reports exactly the advisories it was given.

Use it to test what cairn does with a finding (quarantine, a blocked cache hit, the stored
verdict) without writing OSV files: `FakeAuditor([Advisory("npm", "left-pad", "1.3.0")])`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cairn.deps import Finding, Package


@dataclass(frozen=True)
class Advisory:
    """One advisory against one exact version of one package."""

    ecosystem: str
    """"pypi" or "npm"."""
    package: str
    version: str
    id: str = "FAKE-1"
    severity: str = "HIGH"
    """CRITICAL, HIGH, MODERATE, LOW or UNKNOWN; CRITICAL and HIGH block."""
    summary: str = ""


class FakeAuditor:
    """Finds the given advisories, and nothing else, in the packages it is shown."""

    name = "fake-auditor"

    def __init__(self, advisories: Iterable[Advisory] = ()) -> None:
        self.advisories = list(advisories)
        """Append to this to publish an advisory later (a new advisory for a ready entry)."""
        self.audited: list[tuple[str, list[Package]]] = []
        """Every call: (ecosystem, packages), in order."""

    def audit(self, ecosystem: str, packages: Sequence[Package]) -> list[Finding]:
        """A finding for each package version an advisory names."""
        self.audited.append((ecosystem, list(packages)))
        return [
            Finding(package.name, package.version, advisory.id, advisory.severity, advisory.summary)
            for package in packages
            for advisory in self.advisories
            if (advisory.ecosystem, advisory.package, advisory.version)
            == (ecosystem, package.name, package.version)
        ]
