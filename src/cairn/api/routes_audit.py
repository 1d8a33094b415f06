"""The decision ledger's integrity, as `cairn audit verify` checks it (an admin asks)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from cairn.api.deps import ServedDep, UserDep
from cairn.api.errors import responses
from cairn.api.schemas import ChainView

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
