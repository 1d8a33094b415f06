"""Delivery: push and merge happen exactly once, and never over someone's local changes."""

from __future__ import annotations

import pytest

from cairn.stages import Status
from cairn.workspace import delivery

from .conftest import Cairn

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


def test_merge_is_left_to_a_person_when_the_base_checkout_has_local_changes(cairn: Cairn) -> None:
    job_id = _reviewed(cairn)
    readme = cairn.repo / "README.md"
    edited = readme.read_bytes() + b"\nlocal edit in progress\n"
    readme.write_bytes(edited)
    base = cairn.git("rev-parse", "main")
    cairn.work()
    detail = cairn.detail(job_id)
    assert detail["status"] == "completed"
    assert f"{cairn.branch(job_id)} was delivered" in detail["diagnosis"]
    assert "local changes" in detail["diagnosis"]
    assert readme.read_bytes() == edited and cairn.git("rev-parse", "main") == base
    assert cairn.git("rev-parse", "--verify", cairn.branch(job_id))


def test_a_conflicting_base_leaves_the_merge_to_a_person(cairn: Cairn) -> None:
    job_id = _reviewed(cairn)
    (cairn.repo / "b.txt").write_text("someone else's b\n")
    cairn.git("add", "b.txt")
    cairn.git("-c", "user.name=O", "-c", "user.email=o@example.com", "commit", "-qm", "theirs")
    base = cairn.git("rev-parse", "main")
    cairn.work()
    detail = cairn.detail(job_id)
    assert detail["status"] == "completed" and "conflict" in detail["diagnosis"]
    assert cairn.git("rev-parse", "main") == base


def test_an_unrelated_newer_base_gets_a_merge_commit(cairn: Cairn) -> None:
    job_id = _reviewed(cairn)
    (cairn.repo / "other.txt").write_text("unrelated\n")
    cairn.git("add", "other.txt")
    cairn.git("-c", "user.name=O", "-c", "user.email=o@example.com", "commit", "-qm", "other")
    cairn.work()
    assert cairn.job(job_id).status is Status.completed
    parents = cairn.git("rev-list", "--parents", "-n", "1", "main").split()
    assert len(parents) == 3, "a merge commit with two parents"
    assert (
        cairn.git("show", "main:b.txt") == "b"
        and cairn.git("show", "main:other.txt") == "unrelated"
    )
