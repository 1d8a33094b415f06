"""A block whose cause lies in the repository: resume takes a fresh baseline, and says so."""

from __future__ import annotations

import subprocess

from cairn.jobs import gates
from cairn.stages import Stage, Status
from cairn.testing.harness import Cairn
from cairn.testing.repos import SAMPLE_FILES, commit_file

ASKS_FOR_TERMCOLOR = """
steps:
  - write: {path: a.txt, content: "before the ask\\n"}
  - request_dependency: {ecosystem: pypi, name: termcolor, version: "2.4.0", reason: "colour"}
  - write: {path: a2.txt, content: "after the decision\\n"}
  - finish: {summary: "a.txt and a2.txt"}
"""
EDITS_README = """
steps:
  - write: {path: README.md, content: "# greeter, as the agent wrote it\\n"}
  - request_dependency: {ecosystem: pypi, name: termcolor, version: "2.4.0", reason: "colour"}
  - finish: {summary: "README"}
"""


def _without_pyproject(cairn: Cairn) -> str:
    cairn.git("rm", "-q", "pyproject.toml")
    cairn.git("-c", "user.name=Owner", "-c", "user.email=o@example.com", "commit", "-qm", "rm")
    return cairn.git("rev-parse", "main")


def _mirror_git(cairn: Cairn, *args: str) -> str:
    """git in cairn's mirror of the room (a job's branch is not pushed before delivery)."""
    mirror = cairn.config.mirror_path(cairn.store.installation_id, 1)
    done = subprocess.run(["git", *args], cwd=mirror, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def _resume(cairn: Cairn, job_id: int) -> None:
    with cairn.store.begin() as conn:
        gates.resume(conn, job_id, "alice")


def _workspace_evidence(cairn: Cairn, job_id: int) -> dict:
    runs = [s for s in cairn.detail(job_id)["stages"] if s["name"] == "preparing_workspace"]
    return {name: m["value"] for name, m in runs[-1]["evidence"].items()}


def test_a_package_that_cannot_be_installed_blocks_before_anyone_is_asked(cairn: Cairn) -> None:
    _without_pyproject(cairn)
    job = cairn.submit(ASKS_FOR_TERMCOLOR)
    cairn.work()
    detail = cairn.detail(job.id)
    assert (detail["stage"], detail["status"]) == ("running_agent", "blocked")
    assert "has no pyproject.toml" in detail["diagnosis"]
    assert "fresh baseline" in detail["diagnosis"]
    # Recorded, but nobody is asked: the job is blocked, not waiting at the dependency gate.
    assert [(d["name"], d["status"]) for d in detail["dependency_requests"]] == [
        ("termcolor", "pending")
    ]
    assert [d["gate"] for d in detail["decisions"]] == ["run"]


def test_resume_after_the_owner_commits_the_missing_file_takes_a_fresh_baseline(
    cairn: Cairn,
) -> None:
    old = _without_pyproject(cairn)
    job = cairn.submit(ASKS_FOR_TERMCOLOR)
    cairn.work()
    assert cairn.job(job.id).status is Status.blocked

    new = commit_file(cairn.repo, "pyproject.toml", SAMPLE_FILES["pyproject.toml"], "restore")
    _resume(cairn, job.id)
    resumed = cairn.detail(job.id)
    assert (resumed["status"], resumed["baseline"], resumed["diagnosis"]) == ("queued", None, None)
    (note,) = [d["reason"] for d in resumed["decisions"] if d["gate"] == "resume"]
    assert "takes a fresh baseline of main" in note

    cairn.work()
    asked = cairn.detail(job.id)
    assert (asked["stage"], asked["status"]) == ("awaiting_dependency_approval", "waiting")
    assert asked["baseline"] == new != old
    assert [d["name"] for d in asked["dependency_requests"]] == ["termcolor"]
    moved = _workspace_evidence(cairn, job.id)
    assert (moved["fresh_baseline_from"], moved["files_carried_over"]) == (old, 1)
    workspace = cairn.workspace(job.id)
    assert (workspace / "a.txt").read_text() == "before the ask\n", "the agent's work was kept"
    assert (workspace / "pyproject.toml").is_file()

    cairn.approve(job.id)
    cairn.work()
    done = cairn.detail(job.id)
    assert (done["stage"], done["status"], done["diagnosis"]) == (
        "awaiting_review",
        "waiting",
        None,
    )
    files = _mirror_git(cairn, "ls-tree", "-r", "--name-only", done["branch"]).split()
    assert {"a.txt", "a2.txt", "pyproject.toml", "uv.lock"} <= set(files)
    assert _mirror_git(cairn, "rev-parse", f"{done['branch']}^") == new, "on the new base"


def test_work_that_conflicts_with_the_new_baseline_blocks_and_is_left_as_it_was(
    cairn: Cairn,
) -> None:
    _without_pyproject(cairn)
    job = cairn.submit(EDITS_README)
    cairn.work()
    commit_file(cairn.repo, "README.md", "# greeter, as the owner wrote it\n", "readme")
    commit_file(cairn.repo, "pyproject.toml", SAMPLE_FILES["pyproject.toml"], "restore")
    _resume(cairn, job.id)
    cairn.work()

    detail = cairn.detail(job.id)
    assert (detail["stage"], detail["status"]) == ("preparing_workspace", "blocked")
    assert "conflict with the new baseline of main (README.md)" in detail["diagnosis"]
    assert {"action": "retry", "job": job.id} in detail["next"]
    workspace = cairn.workspace(job.id)
    assert (workspace / "README.md").read_text() == "# greeter, as the agent wrote it\n"
    assert not (workspace / "pyproject.toml").exists(), "the workspace did not move"

    # The owner takes their README change back: the next resume applies the work cleanly.
    commit_file(cairn.repo, "README.md", SAMPLE_FILES["README.md"], "take it back")
    _resume(cairn, job.id)
    cairn.work()
    assert cairn.job(job.id).stage is Stage.awaiting_dependency_approval
    assert (workspace / "README.md").read_text() == "# greeter, as the agent wrote it\n"
    assert (workspace / "pyproject.toml").is_file()
