"""A job's dependencies: materialized before the agent starts, installed once approved.

`preparing_dependencies` finds the workspace's dependency inputs (a `pyproject.toml` with its
`uv.lock`, a `package.json` with its `package-lock.json`), prepares each through the cache
(a fingerprint hit installs nothing) and hardlinks it into the workspace. Its content identity
is the baseline's dependency inputs, not the host's fingerprint: another host, with another
uv, re-materializes without making the agent's accepted work look stale. `install_approved`
adds one approved exact version: the updated inputs are prepared and audited *before* they
are written into the workspace, so a quarantined package leaves the workspace untouched.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from cairn.canonical import digest
from cairn.config import Config
from cairn.deps import (
    Auditor,
    DependencyCache,
    DependencyInputs,
    Installer,
    InstallError,
    OsvDirectory,
    OsvService,
    fingerprint,
    installer_kinds,
    locked_packages,
    read_inputs,
    with_dependency,
)
from cairn.deps.fingerprint import write_inputs
from cairn.deps.installer import configured_installer
from cairn.deps.requests import label
from cairn.engine import Evidence, Expect, Measurement, Result, RunRecord, StageDef
from cairn.engine.workflow import Upstream
from cairn.jobs.drive import Blocked, Drive
from cairn.jobs.fresh_baseline import REPOSITORY_CAUSE
from cairn.stages import Stage
from cairn.store import dependency_caches
from cairn.store.dependency_caches import CacheRecord, CacheStatus
from cairn.store.records import DependencyRequest
from cairn.workspace.commands import DEPENDENCY_MARKER
from cairn.workspace.git import run_git


def auditors_of(config: Config) -> list[Auditor]:
    """The advisory sources every prepared dependency set is checked against."""
    found: list[Auditor] = []
    if config.osv_dir is not None:
        found.append(OsvDirectory(config.osv_dir))
    if config.osv_url is not None:
        found.append(OsvService(config.osv_url))
    return found


def dependency_cache(drive: Drive) -> DependencyCache:
    return DependencyCache(drive.store, drive.config.deps_dir, auditors=auditors_of(drive.config))


@dataclass(frozen=True)
class Materialized:
    """One ecosystem's dependencies in the workspace."""

    packages: int
    """Packages materialized into the workspace."""
    expected: int
    """Packages in the cache entry built strictly from this lockfile (this platform's share)."""
    unlocked: int
    """Materialized packages the lockfile does not pin (always 0 unless something is wrong)."""


def materialize(
    drive: Drive, installer: Installer, inputs: DependencyInputs, record: CacheRecord | None = None
) -> Materialized:
    """Prepare `inputs` through the cache (unless `record` is its entry) and hardlink it in."""
    cache = dependency_cache(drive)
    record = record or cache.prepare(installer, inputs)
    present = cache.materialize(installer, record, drive.worktree.path)
    # This runner's next job with these inputs gets its layout by a rename (cairn.deps.spares).
    ahead = (installer, record, drive.worktree.path)
    threading.Thread(target=cache.link_ahead, args=ahead, name="link-ahead", daemon=True).start()
    pinned = set(locked_packages(inputs))
    return Materialized(len(present), record.package_count or 0, len(set(present) - pinned))


def _prepare(drive: Drive, upstream: Upstream) -> Result:
    """Materialize every set of dependency inputs the workspace holds (none is fine)."""
    found: list[Materialized] = []
    for kind in installer_kinds().values():
        inputs = read_inputs(drive.worktree.path, kind)
        if inputs is not None:
            # The inputs are the baseline's: what refuses them is fixed by a commit.
            with _blocking_on_failure(drive, in_repository=True):
                installer = configured_installer(drive.config, kind.ecosystem)
                found.append(materialize(drive, installer, inputs))
    materialized = sum(m.packages for m in found)
    expected = sum(m.expected for m in found)
    unlocked = sum(m.unlocked for m in found)
    return Result(
        _baseline_inputs(drive),
        Evidence.of(
            Measurement("dependency_sets", len(found)),
            Measurement("packages_materialized", materialized, Expect.all_of, expected),
            Measurement("packages_not_in_lockfile", unlocked, Expect.equals, 0),
        ),
    )


def _prepared_now(drive: Drive, prior: RunRecord) -> str | None:
    """Still good when the baseline's inputs are the same and every set is materialized here.

    Re-verified on resume: each materialized folder names the fingerprint of the workspace's
    current inputs on this host, and that cache entry is still ready (not quarantined since).
    """
    if _baseline_inputs(drive) != prior.content_id:
        return None
    cache = dependency_cache(drive)
    for kind in installer_kinds().values():
        inputs = read_inputs(drive.worktree.path, kind)
        if inputs is None:
            continue
        try:
            key = fingerprint(
                inputs, configured_installer(drive.config, kind.ecosystem).environment()
            )
            marker = (drive.worktree.path / kind.target / DEPENDENCY_MARKER).read_text()
        except (OSError, InstallError):
            return None
        with drive.store.read() as conn:
            record = dependency_caches.find(conn, key, cache.host)
        if marker.strip() != key or record is None or record.status is not CacheStatus.ready:
            return None
    return prior.content_id


def _baseline_inputs(drive: Drive) -> str:
    """The identity of the dependency input files as the baseline commit has them."""
    kinds = installer_kinds().values()
    names = tuple(sorted({n for k in kinds for n in (k.declarations, k.lockfile, *k.config)}))
    listed = _listed(str(drive.mirror.path), drive.job.baseline or "", names)
    return digest({"dependency_inputs": sorted(e for e in listed.split("\0") if e)})


@functools.lru_cache(maxsize=64)
def _listed(mirror: str, commit: str, names: tuple[str, ...]) -> str:
    """The entries `commit` has for `names` at its top: a commit never changes, so asked once."""
    return run_git("ls-tree", "-z", "--full-tree", commit, "--", *names, cwd=mirror)


def missing_declarations(drive: Drive, ecosystem: str, what: str) -> Blocked | None:
    """The block for a package that cannot be installed whatever a person decides, or None.

    Checked before anyone is asked to approve it: without the ecosystem's declarations file
    there is nothing to record the package in. The cause lies in the repository, so resuming
    after the owner commits one takes a fresh baseline.
    """
    installer = configured_installer(drive.config, ecosystem)
    if read_inputs(drive.worktree.path, installer, require_lockfile=False) is not None:
        return None
    return Blocked(
        f"the repository has no {installer.declarations}, so cairn cannot install {what}; "
        f"commit one to {drive.room.base_branch} (resumed, the job then takes a fresh baseline)",
        Evidence.of(REPOSITORY_CAUSE, Measurement("declarations", False, Expect.equals, True)),
        next_actions=[drive.resume_step()],
    )


def install_approved(drive: Drive, asked: DependencyRequest) -> str:
    """Add an approved exact version to the job's inputs and environment; the agent's note."""
    what = label(asked.ecosystem, asked.name, asked.version)
    blocked = missing_declarations(drive, asked.ecosystem, what)
    if blocked is not None:
        raise blocked
    workspace = drive.worktree.path
    with _blocking_on_failure(drive, f"{what} was approved, but "):
        installer = configured_installer(drive.config, asked.ecosystem)
        updated = with_dependency(installer, workspace, asked.name, asked.version)
        # Built and audited from the updated inputs first: a refusal leaves the workspace as is.
        record = dependency_cache(drive).prepare(installer, updated)
        write_inputs(workspace, updated)
        done = materialize(drive, installer, updated, record)
    return (
        f"dependency {what} was approved and installed: {installer.declarations} and "
        f"{installer.lockfile} now pin it, and {installer.target}/ holds {done.packages} "
        "packages (read-only)"
    )


@contextlib.contextmanager
def _blocking_on_failure(
    drive: Drive, prefix: str = "", *, in_repository: bool = False
) -> Iterator[None]:
    """An installer refusal inside blocks the job, saying what to do next."""
    try:
        yield
    except InstallError as exc:
        refused = Measurement("installed", False, Expect.equals, True)
        then = "the job then takes a fresh baseline" if in_repository else "it goes on from here"
        raise Blocked(
            f"{prefix}{exc}. Fix the cause (resumed, {then})",
            Evidence.of(refused, REPOSITORY_CAUSE) if in_repository else Evidence.of(refused),
            next_actions=[*exc.next_actions, drive.resume_step()],
        ) from exc


DEPENDENCIES: StageDef[Drive] = StageDef(
    name=Stage.preparing_dependencies.value,
    run=_prepare,
    required=("packages_materialized", "packages_not_in_lockfile"),
    content_now=_prepared_now,
)
