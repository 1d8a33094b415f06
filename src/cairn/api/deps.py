"""What every route is handed: the store and configuration the app was built with, the user."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from cairn.api.auth import current_user
from cairn.api.event_hub import EventHub
from cairn.config import Config
from cairn.sanitize import Sanitizer, user_sanitizer
from cairn.store import Store
from cairn.store.records import User


@dataclass(frozen=True)
class Served:
    """One app's store and configuration, opened once by `create_app`, and its event hub."""

    store: Store
    config: Config
    hub: EventHub

    def sanitizer(self) -> Sanitizer:
        """The sanitizer for what people type (requests, reasons, messages)."""
        return user_sanitizer(self.config)


def served(request: Request) -> Served:
    found = request.app.state.served
    assert isinstance(found, Served), "create_app sets it"
    return found


ServedDep = Annotated[Served, Depends(served)]
UserDep = Annotated[User, Depends(current_user)]
