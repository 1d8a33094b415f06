"""Delivery: push and merge happen exactly once, and never over someone's local changes."""

from __future__ import annotations

import pytest

from cairn.jobs import gates
from cairn.stages import Status
from cairn.testing.harness import Cairn
from cairn.workspace import delivery

PERSON = ("-c", "user.name=O", "-c", "user.email=o@example.com")
WRITE_B = 'steps:\n  - write: {path: b.txt, content: "b\\n"}\n  - finish: {summary: added b}\n'


def _reviewed(cairn: Cairn) -> int:
    job = cairn.submit(WRITE_B)
    cairn.work()
    cairn.approve(job.id)
    return job.id


def test_delivery_pushes_and_merges_once(cairn: Cairn) -> None:
    before = cairn.git("rev-parse", "main")
    job_id = _reviewed(cairn)
    cairn.work()
    detail = cairn.detail(job_id)
    assert detail["status"] == "completed" and detail["diagnosis"] is None
    assert [(e["kind"], e["status"]) for e in detail["effects"]] == [
        ("push", "done"),
        ("merge", "done"),
    ]
    assert cairn.git("show", "main:b.txt") == "b"
    assert cairn.git("rev-parse", "main^") == before
    assert cairn.git("rev-parse", cairn.branch(job_id)) == cairn.git("rev-parse", "main")
    assert (cairn.repo / "b.txt").read_text() == "b\n", "the clean checkout was fast-forwarded"


class Killed(BaseException):
    """A runner killed outright: nothing after the kill point runs, not even a lease release."""


class _CrashAfter:
    """Performs the real effect, then dies the way a killed runner would: before recording it."""

    def __init__(self, real):
        self.real, self.calls = real, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        result = self.real(*args, **kwargs)
        if self.calls == 1:
            raise Killed("runner killed after the effect, before it was recorded")
        return result


@pytest.mark.parametrize("effect", ["push_branch", "merge_into_base"])
def test_an_intended_effect_is_reconciled_not_repeated(
    cairn: Cairn, monkeypatch: pytest.MonkeyPatch, effect: str
) -> None:
    job_id = _reviewed(cairn)
    crash = _CrashAfter(getattr(delivery, effect))
    monkeypatch.setattr(delivery, effect, crash)
    with pytest.raises(Killed):
        cairn.work()
    intended = {e["kind"]: e["status"] for e in cairn.detail(job_id)["effects"]}
    assert "intended" in intended.values()

    cairn.work()  # waits out the dead runner's lease, then inspects the repository
    detail = cairn.detail(job_id)
    assert detail["status"] == "completed"
    assert crash.calls == 1, "the effect was not performed a second time"
    assert [(e["kind"], e["status"]) for e in detail["effects"]] == [
        ("push", "done"),
        ("merge", "done"),
    ]
    assert cairn.git("rev-list", "--count", "main") == "2"


def _effects(detail: dict) -> list[tuple[str, str]]:
    return [(e["kind"], e["status"]) for e in detail["effects"]]


def test_a_merge_left_to_a_person_blocks_at_delivering_until_resumed(cairn: Cairn) -> None:
    job_id = _reviewed(cairn)
    readme = cairn.repo / "README.md"
    original = readme.read_bytes()
    edited = original + b"\nlocal edit in progress\n"
    readme.write_bytes(edited)
    base = cairn.git("rev-parse", "main")
    cairn.work()
    detail = cairn.detail(job_id)
    assert (detail["status"], detail["stage"]) == ("blocked", "delivering"), "not a delivery"
    assert detail["diagnosis"].startswith(
        f"branch {cairn.branch(job_id)} pushed; merge left to a person: main is checked out "
        "with local changes"
    )
    assert detail["next"] == [
        {"action": "resume", "job": job_id},
        {"action": "cancel", "job": job_id},
    ]
    assert "Delivered." not in detail["feed"] and detail["feed"].endswith("[delivering]")
    assert _effects(detail) == [("push", "done"), ("merge", "failed")]
    assert readme.read_bytes() == edited and cairn.git("rev-parse", "main") == base
    assert cairn.git("rev-parse", cairn.branch(job_id)) != base, "the branch is pushed"

    cairn.work()
    assert cairn.job(job_id).status is Status.blocked, "nothing retries without a person"
    readme.write_bytes(original)  # the person finished their work elsewhere
    with cairn.store.begin() as conn:
        gates.resume(conn, job_id, "alice")
    cairn.work()
    done = cairn.detail(job_id)
    assert (done["status"], done["diagnosis"]) == ("completed", None)
    assert _effects(done) == [("push", "done"), ("merge", "done")]
    assert "Delivered." in done["feed"]
    assert cairn.git("show", "main:b.txt") == "b" and (cairn.repo / "b.txt").is_file()
    assert cairn.git("rev-list", "--count", "main") == "2", "merged once"


def test_a_merge_done_by_the_person_is_recognized_not_repeated(cairn: Cairn) -> None:
    job_id = _reviewed(cairn)
    (cairn.repo / "b.txt").write_text("someone else's b\n")
    cairn.git("add", "b.txt")
    cairn.git(*PERSON, "commit", "-qm", "theirs")
    cairn.work()
    blocked = cairn.detail(job_id)
    assert blocked["status"] == "blocked" and "conflicts with newer changes" in blocked["diagnosis"]
    branch = cairn.branch(job_id)
    cairn.git(*PERSON, "merge", "-q", "-X", "ours", "-m", "merged by hand", branch)
    by_hand = cairn.git("rev-parse", "main")
    with cairn.store.begin() as conn:
        gates.resume(conn, job_id, "admin")
    cairn.work()
    done = cairn.detail(job_id)
    assert done["status"] == "completed"
    assert cairn.git("rev-parse", "main") == by_hand, "cairn made no second merge"
    assert done["effects"][-1] | {"key": None} == {
        "kind": "merge",
        "key": None,
        "status": "done",
        "ref": cairn.git("rev-parse", branch),
    }


def test_a_base_checked_out_in_another_worktree_is_left_to_a_person(cairn: Cairn) -> None:
    job_id = _reviewed(cairn)
    elsewhere = cairn.tmp / "elsewhere"
    cairn.git("switch", "-q", "-c", "side")
    cairn.git("worktree", "add", "-q", str(elsewhere), "main")
    cairn.work()
    blocked = cairn.detail(job_id)
    assert blocked["status"] == "blocked"
    assert "main is checked out in another worktree" in blocked["diagnosis"]
    assert str(cairn.tmp) not in blocked["diagnosis"]
    cairn.git("worktree", "remove", str(elsewhere))
    with cairn.store.begin() as conn:
        gates.resume(conn, job_id, "alice")
    cairn.work()
    assert cairn.job(job_id).status is Status.completed
    assert cairn.git("show", "main:b.txt") == "b"


def test_a_person_may_cancel_a_delivery_left_to_them(cairn: Cairn) -> None:
    job_id = _reviewed(cairn)
    (cairn.repo / "README.md").write_text("local edit\n")
    cairn.work()
    assert cairn.job(job_id).status is Status.blocked
    with cairn.store.begin() as conn:
        gates.cancel(conn, job_id, "alice")
    cancelled = cairn.detail(job_id)
    assert (cancelled["status"], cancelled["stage"]) == ("cancelled", "cancelled")
    assert "Delivered." not in cancelled["feed"]
    assert cairn.git("rev-parse", "--verify", cairn.branch(job_id)), "the pushed branch stays"


def test_branches_of_another_installation_are_never_adopted(cairn: Cairn) -> None:
    base = cairn.git("rev-parse", "main")
    # An earlier installation left job 1's branch (the old name, and another installation's
    # new name) with its own files in the room's repository.
    for name in ("cairn/job-1", "cairn/0123abcd/job-1"):
        cairn.git("switch", "-q", "-c", name)
        (cairn.repo / "foreign.txt").write_text(f"from {name}\n")
        cairn.git("add", "foreign.txt")
        cairn.git(*PERSON, "commit", "-qm", "someone else's work")
        cairn.git("switch", "-q", "main")
    job_id = _reviewed(cairn)
    cairn.work()
    detail = cairn.detail(job_id)
    assert detail["status"] == "completed"
    assert "foreign.txt" not in detail["review"]["summary"]
    assert "foreign.txt" not in cairn.git("ls-tree", "-r", "--name-only", "main")
    assert cairn.git("rev-parse", "main^") == base
    assert cairn.git("show", "cairn/job-1:foreign.txt") == "from cairn/job-1", "left as it was"
    assert cairn.branch(job_id) not in ("cairn/job-1", "cairn/0123abcd/job-1")


def test_a_branch_of_the_jobs_own_name_at_another_commit_blocks_delivery(cairn: Cairn) -> None:
    job = cairn.submit(WRITE_B)
    branch = cairn.branch(job.id)
    cairn.git("switch", "-q", "-c", branch)
    (cairn.repo / "foreign.txt").write_text("not cairn's\n")
    cairn.git("add", "foreign.txt")
    cairn.git(*PERSON, "commit", "-qm", "someone else's work")
    cairn.git("switch", "-q", "main")
    foreign = cairn.git("rev-parse", branch)
    cairn.work()
    waiting = cairn.detail(job.id)
    assert "foreign.txt" not in waiting["review"]["summary"], "the workspace started at main"
    cairn.approve(job.id)
    cairn.work()
    blocked = cairn.detail(job.id)
    assert (blocked["status"], blocked["stage"]) == ("blocked", "delivering")
    assert blocked["diagnosis"] == (
        f"nothing was pushed: a branch named {branch} already exists in the room's repository "
        "at a commit that is not this job's; cairn neither adopts nor overwrites it. Rename or "
        "delete that branch there"
    )
    assert blocked["next"] == [{"action": "resume", "job": job.id}]
    assert cairn.git("rev-parse", branch) == foreign
    assert "foreign.txt" not in cairn.git("ls-tree", "-r", "--name-only", "main")

    cairn.git("branch", "-m", branch, "theirs")
    with cairn.store.begin() as conn:
        gates.resume(conn, job.id, "alice")
    cairn.work()
    assert cairn.job(job.id).status is Status.completed
    assert "foreign.txt" not in cairn.git("ls-tree", "-r", "--name-only", "main")


def test_an_unrelated_newer_base_gets_a_merge_commit(cairn: Cairn) -> None:
    job_id = _reviewed(cairn)
    (cairn.repo / "other.txt").write_text("unrelated\n")
    cairn.git("add", "other.txt")
    cairn.git(*PERSON, "commit", "-qm", "other")
    cairn.work()
    assert cairn.job(job_id).status is Status.completed
    parents = cairn.git("rev-list", "--parents", "-n", "1", "main").split()
    assert len(parents) == 3, "a merge commit with two parents"
    assert (
        cairn.git("show", "main:b.txt") == "b"
        and cairn.git("show", "main:other.txt") == "unrelated"
    )
