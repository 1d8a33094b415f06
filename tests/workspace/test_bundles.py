"""Bundles written with one git process: what `git bundle` reads, and only the job's objects."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from cairn.errors import WorkspaceError
from cairn.testing.repos import SAMPLE_IDENTITY, commit_file
from cairn.workspace.bundles import bundle
from cairn.workspace.mirror import Mirror

from .gitcli import plain_git

REF = "refs/cairn/checkpoints/job-1"
LINES = "".join(f"line {n} of a file long enough to be sent as a delta\n" for n in range(3000))


def _job_commit(mirror: Mirror, baseline: str, path: str, content: bytes) -> str:
    """A commit on top of `baseline` in the mirror that changes `path`, named by no ref."""

    def git(*args: str, data: bytes | None = None) -> str:
        index = {**os.environ, **SAMPLE_IDENTITY, "GIT_INDEX_FILE": str(mirror.path / "test-index")}
        done = subprocess.run(
            ["git", *args], cwd=mirror.path, env=index, input=data, capture_output=True, check=True
        )
        return done.stdout.decode().strip()

    blob = git("hash-object", "-w", "--stdin", data=content)
    git("read-tree", baseline)
    git("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}")
    return git("commit-tree", git("write-tree"), "-p", baseline, "-m", "the job's work")


def _bundle_git(command: str, data: bytes, into: Path) -> subprocess.CompletedProcess[str]:
    """`git bundle <command>` of a bundle file holding `data`, in the repository `into`."""
    path = into.parent / "job.bundle"
    path.write_bytes(data)
    return subprocess.run(
        ["git", "bundle", command, str(path)], cwd=into, capture_output=True, text=True
    )


def test_a_bundle_carries_the_commit_to_a_repository_that_holds_its_baseline(
    mirror: Mirror, project: Path, tmp_path: Path
) -> None:
    commit_file(project, "long.txt", LINES, "A long file")
    baseline = mirror.fetch_baseline()
    # Bytes no text reading would keep: a CR LF, a lone CR, a NUL, invalid UTF-8.
    changed = LINES.replace("line 1500 ", "line fifteen hundred ").encode() + b"\r\n\r\0\xff"
    tip = _job_commit(mirror, baseline, "long.txt", changed)

    data = bundle(mirror, tip, baseline, REF, failure="could not bundle")

    other = tmp_path / "other.git"
    plain_git(tmp_path, "clone", "--quiet", "--bare", "--no-local", str(project), str(other))
    verified = _bundle_git("verify", data, other)
    assert verified.returncode == 0 and "is okay" in verified.stderr, verified.stderr
    unbundled = _bundle_git("unbundle", data, other)
    assert unbundled.returncode == 0, unbundled.stderr
    assert unbundled.stdout.split() == [tip, REF]
    shown = subprocess.run(
        ["git", "cat-file", "blob", f"{tip}:long.txt"], cwd=other, capture_output=True, check=True
    )
    assert shown.stdout == changed
    # Only the job's objects, the changed file as a delta against the baseline's copy.
    assert len(data) < len(LINES) / 200, len(data)


def test_a_bundle_names_its_baseline_as_the_one_thing_a_reader_must_hold(
    mirror: Mirror, baseline: str, tmp_path: Path
) -> None:
    tip = _job_commit(mirror, baseline, "new.txt", b"new\n")
    data = bundle(mirror, tip, baseline, REF, failure="could not bundle")
    empty = tmp_path / "empty.git"
    plain_git(tmp_path, "init", "--quiet", "--bare", str(empty))
    refused = _bundle_git("unbundle", data, empty)
    assert refused.returncode != 0 and baseline in refused.stderr
    assert subprocess.run(["git", "cat-file", "-e", tip], cwd=empty).returncode != 0


def test_a_bundle_of_a_sha256_repository_is_a_v3_bundle_git_reads(tmp_path: Path) -> None:
    project = tmp_path / "project"
    plain_git(tmp_path, "init", "--quiet", "--object-format=sha256", "-b", "main", str(project))
    commit_file(project, "README.md", "hello\n", "First")
    mirror = Mirror(tmp_path / "mirror.git", str(project), "main")
    baseline = mirror.fetch_baseline()
    assert len(baseline) == 64
    tip = _job_commit(mirror, baseline, "new.txt", b"new\n")

    data = bundle(mirror, tip, baseline, REF, failure="could not bundle")

    assert data.startswith(b"# v3 git bundle\n@object-format=sha256\n")
    other = tmp_path / "other.git"
    plain_git(tmp_path, "clone", "--quiet", "--bare", "--no-local", str(project), str(other))
    unbundled = _bundle_git("unbundle", data, other)
    assert unbundled.returncode == 0, unbundled.stderr
    assert plain_git(other, "cat-file", "blob", f"{tip}:new.txt") == "new"


def test_a_commit_the_mirror_lacks_fails_in_the_callers_words(
    mirror: Mirror, baseline: str
) -> None:
    with pytest.raises(WorkspaceError, match=r"^could not bundle$"):
        bundle(mirror, "0" * 40, baseline, REF, failure="could not bundle")
