"""The authority matrix, as a table: gate x role x own/other job x policy -> allowed or refused.

Actors: `bob` (admin), `alice` (member), `carol` (outsider: she requested her "own" jobs while
a member, then left the group). "other" jobs were requested by admin `admin`. Policies:
`strict` is the default (`run_approval=admin`, `dependency_approval=admin`); `lenient` is
`run_approval=auto` for scheduled jobs and `dependency_approval=member`. The jobs here are
interactive, so even `lenient` leaves their run gate to an admin. A refusal names why; a
refused decision changes nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from cairn.errors import NotAllowed
from cairn.jobs import gates
from cairn.jobs.submit import submit_job
from cairn.sanitize import Sanitizer
from cairn.stages import Stage, Status
from cairn.store import Store, decisions, identity
from cairn.store import dependency_requests as dep_ledger
from cairn.store import jobs as job_ledger
from cairn.store.rooms import create_room

from .conftest import STAGE_OF_GATE

MATRIX = """
gate        verdict role      job    strict                          lenient
run         approve admin     own    refused: its own job            refused: its own job
run         approve admin     other  allowed                         allowed
run         approve member    own    refused: only an admin          refused: only an admin
run         approve member    other  refused: only an admin          refused: only an admin
run         approve outsider  own    refused: not a member           refused: not a member
run         approve outsider  other  refused: not a member           refused: not a member
run         reject  admin     own    allowed                         allowed
run         reject  admin     other  allowed                         allowed
run         reject  member    own    refused: only an admin          refused: only an admin
run         reject  member    other  refused: only an admin          refused: only an admin
run         reject  outsider  own    refused: not a member           refused: not a member
run         reject  outsider  other  refused: not a member           refused: not a member
dependency  approve admin     own    allowed                         allowed
dependency  approve admin     other  allowed                         allowed
dependency  approve member    own    refused: dependency_approval    allowed
dependency  approve member    other  refused: dependency_approval    allowed
dependency  approve outsider  own    refused: not a member           refused: not a member
dependency  approve outsider  other  refused: not a member           refused: not a member
dependency  reject  admin     own    allowed                         allowed
dependency  reject  admin     other  allowed                         allowed
dependency  reject  member    own    refused: dependency_approval    allowed
dependency  reject  member    other  refused: dependency_approval    allowed
dependency  reject  outsider  own    refused: not a member           refused: not a member
dependency  reject  outsider  other  refused: not a member           refused: not a member
integration approve admin     own    allowed                         allowed
integration approve admin     other  allowed                         allowed
integration approve member    own    refused: only an admin          refused: only an admin
integration approve member    other  refused: only an admin          refused: only an admin
integration approve outsider  own    refused: not a member           refused: not a member
integration approve outsider  other  refused: not a member           refused: not a member
integration reject  admin     own    allowed                         allowed
integration reject  admin     other  allowed                         allowed
integration reject  member    own    refused: only an admin          refused: only an admin
integration reject  member    other  refused: only an admin          refused: only an admin
integration reject  outsider  own    refused: not a member           refused: not a member
integration reject  outsider  other  refused: not a member           refused: not a member
cancel      cancel  admin     own    allowed                         allowed
cancel      cancel  admin     other  allowed                         allowed
cancel      cancel  member    own    allowed                         allowed
cancel      cancel  member    other  refused: requester or an admin  refused: requester or an admin
cancel      cancel  outsider  own    allowed                         allowed
cancel      cancel  outsider  other  refused: requester or an admin  refused: requester or an admin
"""
ACTOR = {"admin": "bob", "member": "alice", "outsider": "carol"}
POLICY = {
    "strict": identity.DEFAULT_POLICY,
    "lenient": {
        "run_approval": "auto",
        "auto_approve_kinds": ["scheduled"],
        "dependency_approval": "member",
        "integration": "admin",
    },
}
AGENT = {"adapter": "script", "settings": {"steps": []}}


def _cases() -> list[Any]:
    header, *rows = [line for line in MATRIX.strip().splitlines()]
    assert header.split() == ["gate", "verdict", "role", "job", "strict", "lenient"]
    cases = []
    for row in rows:
        gate, verdict, role, job, outcomes = row.split(maxsplit=4)
        strict, lenient = _two_outcomes(outcomes)
        for policy, outcome in (("strict", strict), ("lenient", lenient)):
            case_id = f"{gate}-{verdict}-{role}-{job}-{policy}"
            cases.append(pytest.param(gate, verdict, role, job, policy, outcome, id=case_id))
    return cases


def _two_outcomes(text: str) -> tuple[str, str]:
    parts = [p.strip() for p in text.split("  ") if p.strip()]
    assert len(parts) == 2, text
    return parts[0], parts[1]


@pytest.mark.parametrize(("gate", "verdict", "role", "job", "policy", "outcome"), _cases())
def test_authority_matrix(
    store: Store, gate: str, verdict: str, role: str, job: str, policy: str, outcome: str
) -> None:
    actor = ACTOR[role]
    job_id = _job_at(store, gate, requester=actor if job == "own" else "admin", policy=policy)
    before = _ledgers(store, job_id)
    if outcome == "allowed":
        _decide(store, gate, verdict, job_id, actor)
        _assert_recorded(store, gate, verdict, job_id, actor, policy)
        return
    expected = outcome.removeprefix("refused: ")
    with pytest.raises(NotAllowed, match=expected) as refused:
        _decide(store, gate, verdict, job_id, actor)
    assert actor in str(refused.value) or "requester" in str(refused.value)
    assert _ledgers(store, job_id) == before, "a refused decision changes nothing"


def _job_at(store: Store, gate: str, *, requester: str, policy: str) -> int:
    """A job of `requester` waiting at `gate` (for `cancel`: at the run gate)."""
    with store.begin() as conn:
        group = identity.add_group(conn, "default", POLICY[policy])
        for name, role in (("admin", "admin"), ("bob", "admin"), ("alice", "member")):
            identity.set_membership(conn, group.id, identity.add_user(conn, name).id, role)
        carol = identity.add_user(conn, "carol")
        identity.set_membership(conn, group.id, carol.id, "member")
        create_room(conn, name="sample", group_id=group.id, repo="/srv/r.git", base_branch="main")
        job = submit_job(
            conn, room="sample", text="x", agent=AGENT, actor=requester, sanitizer=Sanitizer()
        )
        identity.remove_membership(conn, group.id, carol.id)  # carol is an outsider from now on
        if gate == "dependency":
            dep_ledger.add(conn, job.id, ecosystem="pypi", name="rich", version="1.0", reason="r")
        stage = STAGE_OF_GATE.get(gate, Stage.awaiting_run_approval)
        return job_ledger.transition(conn, job, stage, Status.waiting).id


def _decide(store: Store, gate: str, verdict: str, job_id: int, actor: str) -> None:
    with store.begin() as conn:
        if verdict == "approve":
            gates.approve(conn, job_id, actor)
        elif verdict == "reject":
            gates.reject(conn, job_id, actor, "not like this")
        else:
            gates.cancel(conn, job_id, actor)


def _assert_recorded(
    store: Store, gate: str, verdict: str, job_id: int, actor: str, policy: str
) -> None:
    with store.begin() as conn:
        last = decisions.for_job(conn, job_id)[-1]
        job = job_ledger.get_job(conn, job_id)
    assert (last.gate, last.actor) == (gate, actor)
    assert last.verdict == {"approve": "approved", "reject": "rejected"}.get(verdict, "cancelled")
    if gate != "cancel":
        assert last.policy is not None and last.policy.startswith("group default: ")
        assert ("dependency_approval=member" in last.policy) == (policy == "lenient")
    if verdict == "approve" or (gate, verdict) == ("dependency", "reject"):
        assert job.status is Status.queued, "a runner carries the job on"
    else:
        assert job.status.is_terminal


def _ledgers(store: Store, job_id: int) -> tuple[Any, ...]:
    with store.begin() as conn:
        job = job_ledger.get_job(conn, job_id)
        count = conn.execute(sa.text("SELECT count(*) FROM decisions")).scalar()
        deps = [d.status for d in dep_ledger.for_job(conn, job_id)]
    return job.stage, job.status, job.updated_at, count, deps
