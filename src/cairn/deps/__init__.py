"""Dependencies: exact-version requests, a constrained installer, and a fingerprinted cache.

An agent asks for one exact package version (`requests`); once a person approves it,
`add_dependency` records it in the job's declarations and lockfile through an `Installer`
(`get_installer("uv" | "npm")`) working on a temporary copy. `DependencyCache.prepare` then
builds, audits (`Auditor`: `OsvDirectory`, `OsvService`) and stores the result read-only under
its `fingerprint`, or reuses it without any install when the fingerprint is known;
`DependencyCache.materialize` hardlinks it into a workspace, checking each hardlink against
the entry's manifest and hashing the content in full only on a difference (`cairn cache verify`
always hashes it in full), or moves in a spare it linked ahead (`spares`).
"""

from __future__ import annotations

from cairn.deps.audit import Auditor, Finding, OsvDirectory, OsvService, bundled_advisories
from cairn.deps.cache import DependencyCache
from cairn.deps.fingerprint import DependencyInputs, Environment, fingerprint, read_inputs
from cairn.deps.installer import (
    Installer,
    InstallError,
    Package,
    QuarantinedError,
    add_dependency,
    get_installer,
    installer_kinds,
    locked_packages,
    with_dependency,
)
from cairn.deps.npm import NpmInstaller
from cairn.deps.tree import content_identity
from cairn.deps.uv import UvInstaller

__all__ = [
    "Auditor",
    "DependencyCache",
    "DependencyInputs",
    "Environment",
    "Finding",
    "InstallError",
    "Installer",
    "NpmInstaller",
    "OsvDirectory",
    "OsvService",
    "Package",
    "QuarantinedError",
    "UvInstaller",
    "add_dependency",
    "bundled_advisories",
    "content_identity",
    "fingerprint",
    "get_installer",
    "installer_kinds",
    "locked_packages",
    "read_inputs",
    "with_dependency",
]
