"""A job's branch is its own, and a merge left to a person is never reported as a delivery."""

from __future__ import annotations

import re

import pytest

from .conftest import OWNER, Cli

pytestmark = pytest.mark.acceptance

WRITE_B = """
steps:
  - write: {path: b.txt, content: "from the job\\n"}
  - finish: {summary: "Added b.txt"}
"""


def _foreign_branch(cli: Cli, name: str, path: str) -> str:
    """A branch `name` in the room's repository holding someone else's file `path`."""
    cli.git("switch", "--quiet", "-c", name)
    (cli.repo / path).write_text(f"not this job's: {name}\n")
    cli.git("add", path)
    cli.git(*OWNER, "commit", "--quiet", "-m", f"Someone else's work on {name}")
    cli.git("switch", "--quiet", "main")
    return cli.git("rev-parse", name)


def _files(cli: Cli, rev: str) -> set[str]:
    return set(cli.git("ls-tree", "-r", "--name-only", rev).split())


def test_existing_branches_of_the_jobs_name_are_never_adopted_or_overwritten(cli: Cli) -> None:
    cli.room()
    base = cli.git("rev-parse", "main")
    old_style = _foreign_branch(cli, "cairn/job-1", "old.txt")  # an earlier installation's job 1
    job = cli.submit(WRITE_B)
    branch = cli.branch(job)
    assert re.fullmatch(rf"cairn/[0-9a-f]{{8}}/job-{job}", branch)
    taken = _foreign_branch(cli, branch, "taken.txt")  # someone took cairn's exact name

    cli.work()
    review = cli.show(job)
    assert review["stage"] == "awaiting_review"
    summary = review["review"]["summary"]
    assert "b.txt" in summary and "old.txt" not in summary and "taken.txt" not in summary

    cli("approve", str(job))
    cli.work()
    blocked = cli.show(job)
    assert (blocked["status"], blocked["stage"]) == ("blocked", "delivering")
    assert blocked["diagnosis"] == (
        f"nothing was pushed: a branch named {branch} already exists in the room's repository "
        "at a commit that is not this job's; cairn neither adopts nor overwrites it. Rename or "
        f"delete that branch there, then run `cairn resume {job}`"
    )
    assert blocked["next"] == [{"action": "resume", "job": job}], "and in structured form"
    assert cli.git("rev-parse", branch) == taken and cli.git("rev-parse", "main") == base

    cli.git("branch", "--quiet", "-m", branch, "theirs")
    cli("resume", str(job))
    cli.work()
    done = cli.show(job)
    assert (done["status"], done["diagnosis"]) == ("completed", None)
    assert "b.txt" in _files(cli, "main")
    assert not {"old.txt", "taken.txt"} & _files(cli, "main"), "no foreign file was merged"
    assert cli.git("rev-parse", "cairn/job-1") == old_style
    assert cli.git("rev-parse", "theirs") == taken


def test_a_merge_left_to_a_person_is_not_a_delivery_and_resume_merges_it(cli: Cli) -> None:
    cli.room()
    base = cli.git("rev-parse", "main")
    job = cli.submit(WRITE_B)
    cli.work()
    cli("approve", str(job))
    readme = cli.repo / "README.md"
    original = readme.read_bytes()
    readme.write_bytes(original + b"\nlocal edit in progress\n")

    worked = cli.work()
    blocked = cli.show(job)
    assert (blocked["status"], blocked["stage"]) == ("blocked", "delivering")
    branch = cli.branch(job)
    why = f"branch {branch} pushed; merge left to a person: main is checked out with local changes"
    assert blocked["diagnosis"].startswith(why)
    assert why in worked.stdout and f"cairn resume {job}" in worked.stdout
    assert worked.stdout.count(f"cairn resume {job}") == 1, "one line per job, each step once"
    assert f"`cairn cancel {job}` stops it instead" in worked.stdout
    assert "Delivered." not in blocked["feed"]
    assert [row["status"] for row in cli.json("jobs")] == ["blocked"]
    assert [(e["kind"], e["status"]) for e in blocked["effects"]] == [
        ("push", "done"),
        ("merge", "failed"),
    ]
    assert cli.git("rev-parse", "main") == base and "b.txt" in _files(cli, branch)

    readme.write_bytes(original)
    resumed = cli("resume", str(job))
    assert "retries the delivery" in resumed.stdout
    cli.work()
    done = cli.show(job)
    assert (done["status"], done["stage"], done["diagnosis"]) == ("completed", "completed", None)
    assert "Delivered." in done["feed"]
    merges = [e for e in done["effects"] if e["kind"] == "merge"]
    assert [(e["status"], e["ref"]) for e in merges] == [("done", cli.git("rev-parse", "main"))]
    assert cli.git("rev-parse", "main~1") == base, "merged once, by a fast-forward"
    assert (cli.repo / "b.txt").read_text() == "from the job\n"
    assert cli.git("status", "--porcelain") == ""
