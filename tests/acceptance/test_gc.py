"""`cairn gc`: ended jobs' workspaces go, live ones stay, and only merged cairn branches go."""

from __future__ import annotations

import pytest

from .conftest import OWNER, Cli

pytestmark = pytest.mark.acceptance


def _writes(name: str) -> str:
    return (
        f'steps:\n  - write: {{path: "{name}", content: "{name}\\n"}}\n'
        f'  - finish: {{summary: "Added {name}"}}\n'
    )


def _deliver(cli: Cli, *names: str) -> list[int]:
    """Submit one job per file name and drive each to `completed` (pushed and merged)."""
    ids = [cli.submit(_writes(name), f"add {name}") for name in names]
    cli.work()
    for job in ids:
        cli("approve", str(job))
    cli.work()
    assert [cli.show(job)["status"] for job in ids] == ["completed"] * len(ids)
    return ids


def _branches(cli: Cli) -> dict[str, str]:
    listing = cli.git("for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads")
    return dict(line.split(" ", 1) for line in listing.splitlines())


def test_gc_removes_ended_jobs_workspaces_and_keeps_live_ones(cli: Cli) -> None:
    cli.room()
    cli.git("branch", "feature")  # the person's own branch
    (done,) = _deliver(cli, "done.txt")
    waiting = cli.submit(_writes("waits.txt"), "waits for review")
    cancelled = cli.submit(_writes("cancelled.txt"), "cancelled at review")
    cli.work()
    cli("cancel", str(cancelled))
    branches = _branches(cli)
    status = cli.git("status", "--porcelain")
    assert all(cli.workspace(job).is_dir() for job in (done, waiting, cancelled))

    report = cli.json("gc")

    assert report["workspaces"] == [done, cancelled]
    assert report["mirrors_pruned"] == ["sample"]
    assert report["branches_deleted"] == [] and report["branches_kept"] == []
    assert not cli.workspace(done).exists() and not cli.workspace(cancelled).exists()
    assert (cli.workspace(waiting) / "waits.txt").read_text() == "waits.txt\n"
    assert _branches(cli) == branches, "without --branches the repository is not touched"
    assert cli.git("status", "--porcelain") == status
    again = cli("gc").stdout
    assert "removed" not in again, "a second gc finds no workspace to remove"
    assert again.strip() == "tidied the mirrors of rooms sample"

    cli("approve", str(waiting))
    cli.work()
    assert cli.show(waiting)["status"] == "completed", "the kept workspace still delivers"
    assert cli.git("show", "main:waits.txt") == "waits.txt"


def test_gc_branches_deletes_only_merged_unmoved_cairn_branches(cli: Cli) -> None:
    cli.room()
    start = cli.git("rev-parse", "main")
    cli.git("branch", "feature")
    merged, unmerged, moved = _deliver(cli, "merged.txt", "unmerged.txt", "moved.txt")
    merged_branch, moved_branch = cli.show(merged)["branch"], cli.show(moved)["branch"]
    # The person takes two merges back out of main, and builds on one job's branch.
    cli.git("reset", "--quiet", "--hard", start)
    cli.git(*OWNER, "merge", "--quiet", "--no-edit", merged_branch)
    cli.git("switch", "--quiet", moved_branch)
    (cli.repo / "more.txt").write_text("the person's own work\n")
    cli.git("add", "more.txt")
    cli.git(*OWNER, "commit", "--quiet", "-m", "Build on the job")
    cli.git("switch", "--quiet", "main")
    before = _branches(cli)

    report = cli.json("gc", "--branches")

    assert report["branches_deleted"] == [
        {"job": merged, "room": "sample", "branch": merged_branch}
    ]
    kept = {entry["job"]: entry["reason"] for entry in report["branches_kept"]}
    assert kept == {
        unmerged: "it is not merged into main",
        moved: "it moved since cairn pushed it",
    }
    after = _branches(cli)
    assert after == {k: v for k, v in before.items() if k != merged_branch}
    assert after["feature"] == start, "the person's own branch is untouched"
    effects = [(e["kind"], e["status"]) for e in cli.show(merged)["effects"]]
    assert effects == [("push", "done"), ("merge", "done"), ("delete_branch", "done")]
    assert cli.json("gc", "--branches")["branches_deleted"] == [], "nothing is deleted twice"


def test_gc_branches_keeps_a_branch_checked_out_by_the_person(cli: Cli) -> None:
    cli.room()
    (job,) = _deliver(cli, "done.txt")
    branch = cli.show(job)["branch"]
    checkout = cli.tmp / "review-checkout"
    cli.git("worktree", "add", "--quiet", str(checkout), branch)

    report = cli.json("gc", "--branches")

    assert report["branches_deleted"] == []
    assert report["branches_kept"] == [
        {
            "job": job,
            "room": "sample",
            "branch": branch,
            "reason": "it is checked out in the room's repository",
        }
    ]
    assert branch in _branches(cli)
