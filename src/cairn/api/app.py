"""The app factory: one store, opened once, behind bearer-token routes and the hardening."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from fastapi import FastAPI

from cairn.api import (
    errors,
    events,
    routes_agents,
    routes_audit,
    routes_credentials,
    routes_dependencies,
    routes_groups,
    routes_jobs,
    routes_rooms,
    routes_schedules,
    routes_users,
)
from cairn.api.deps import Served
from cairn.api.event_hub import EventHub
from cairn.api.middleware import Hardening
from cairn.config import Config
from cairn.store import Store

if TYPE_CHECKING:
    from cairn.web import ForgeApp


def create_app(
    config: Config, *, store: Store | None = None, forge_app: ForgeApp | None = None
) -> FastAPI:
    """The API and the pages over `config`'s store (or `store`, which the caller then closes).

    `forge_app` is the forge OAuth app the pages' repository onboarding authorizes through.
    """
    opened = store or Store.open(config.store_url)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if store is None:
                opened.close()

    app = FastAPI(
        title="cairn",
        version="1",
        description="Resumable AI coding jobs: jobs, gates, rooms and progress streams.",
        # The interactive docs load scripts from elsewhere, which the CSP forbids; the schema
        # itself is served at /openapi.json.
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.served = Served(store=opened, config=config, hub=EventHub(opened))
    errors.install(app)
    for router in (
        routes_rooms.health_router,
        routes_jobs.router,
        routes_rooms.router,
        routes_groups.router,
        routes_dependencies.router,
        routes_agents.router,
        routes_schedules.router,
        routes_audit.router,
        routes_users.router,
        routes_credentials.router,
        events.router,
    ):
        app.include_router(router)
    # Imported here: the pages build on the API's modules, which import this one.
    from cairn.web import mount

    mount(app, forge_app=forge_app)
    app.add_middleware(Hardening)
    return app
