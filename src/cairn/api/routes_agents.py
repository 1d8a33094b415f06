"""Named agents: listed by anyone signed in, added and removed by an admin of some group."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from cairn.api.deps import ServedDep, UserDep
from cairn.api.errors import responses
from cairn.api.schemas import AgentBody, AgentView

router = APIRouter(prefix="/api/agents", tags=["agents"])
AgentName = Annotated[str, Path(pattern=r"^[a-z0-9][a-z0-9_-]{0,39}$")]


@router.get("", response_model=list[AgentView], responses=responses(401, 503))
def list_agents(served: ServedDep, user: UserDep) -> list[AgentView]:
    """The named agents and their settings (never a key: only the variable's name)."""
    from cairn.jobs.named_agents import agent_rows

    with served.store.begin() as conn:
        return [AgentView.model_validate(row) for row in agent_rows(conn)]


@router.post("", response_model=AgentView, status_code=201, responses=responses(401, 403, 422, 503))
def add_agent(body: AgentBody, served: ServedDep, user: UserDep) -> AgentView:
    """Add a named agent, to use as a job's agent or a room's default (an admin decides)."""
    from cairn.jobs.named_agents import add_named_agent

    settings = body.model_dump(exclude={"name", "adapter"})
    with served.store.begin() as conn:
        made = add_named_agent(conn, body.name, body.adapter, settings, user.name)
    return AgentView.model_validate({"name": made.name, **made.spec})


@router.delete("/{name}", status_code=204, responses=responses(401, 403, 404, 409, 422, 503))
def remove_agent(name: AgentName, served: ServedDep, user: UserDep) -> None:
    """Remove a named agent (an admin); jobs that used it keep their own copy of its settings."""
    from cairn.jobs.named_agents import remove_named_agent

    with served.store.begin() as conn:
        remove_named_agent(conn, name, user.name)
