"""The decision ledger: its integrity, head and entries, as `cairn audit` shows them (an admin)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from cairn.api.deps import ServedDep, UserDep
from cairn.api.errors import responses
from cairn.api.schemas import ChainView, DecisionRow, HeadView

router = APIRouter(prefix="/api/audit", tags=["audit"])
Head = Annotated[
    str | None,
    Query(
        pattern=r"^[0-9a-fA-F]{64}$",
        description="A head printed by `cairn audit head` earlier: it must still be held.",
    ),
]


@router.get("/verify", response_model=ChainView, responses=responses(401, 403, 422, 503))
def verify(served: ServedDep, user: UserDep, head: Head = None) -> ChainView:
    """Walk the whole decision chain and name the first broken row (an admin of some group)."""
    from cairn.jobs import audit
    from cairn.jobs.policy import require_an_admin

    with served.store.begin() as conn:
        require_an_admin(conn, user.name, "verify the decision ledger")
        report, anchor = audit.verify(conn, head)
    shown = audit.report_data(report, anchor) | {"problem": report.problem}
    return ChainView.model_validate(shown)


@router.get("/head", response_model=HeadView, responses=responses(401, 403, 409, 503))
def head(served: ServedDep, user: UserDep) -> HeadView:
    """The decision count and head hash to keep elsewhere (an admin of some group)."""
    from cairn.jobs.decision_log import chain_head
    from cairn.jobs.policy import require_an_admin

    with served.store.begin() as conn:
        require_an_admin(conn, user.name, "read the decision ledger")
        return HeadView.model_validate(chain_head(conn))


@router.get("/log", response_model=list[DecisionRow], responses=responses(401, 403, 422, 503))
def log(
    served: ServedDep,
    user: UserDep,
    job: Annotated[int | None, Query(ge=1, le=2**31 - 1, description="Only this job's.")] = None,
    policy: Annotated[bool, Query(description="Only group policy changes.")] = False,
) -> list[DecisionRow]:
    """Decisions oldest first: gate decisions and policy changes (an admin of some group)."""
    from cairn.jobs.decision_log import decision_rows
    from cairn.jobs.policy import require_an_admin

    with served.store.begin() as conn:
        require_an_admin(conn, user.name, "read the decision ledger")
        rows = decision_rows(conn, job=job, policy_only=policy)
    return [DecisionRow.model_validate(row) for row in rows]
