"""Re-verification of the requester's access: on every claim, at every gate, before delivery."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from cairn.errors import NotFound
from cairn.next_action import Action, NextAction
from cairn.store.identity import get_group, get_user, membership
from cairn.store.records import Job, Request, Room
from cairn.store.rooms import get_room

BINDING_KEY = "room"
"""Where a request's scope records the room binding it was made against."""


def room_binding(room: Room) -> dict[str, Any]:
    """What a request remembers of its room: the repository by digest (it may be a path)."""
    return {
        "id": room.id,
        "group_id": room.group_id,
        "repo_sha256": hashlib.sha256(room.repo.encode()).hexdigest(),
        "base_branch": room.base_branch,
    }


@dataclass(frozen=True)
class LostAccess:
    """What is missing for the requester to have the job worked on, and what can be done."""

    diagnosis: str
    next_actions: tuple[NextAction, ...] = ()


def missing_access(conn: sa.Connection, job: Job, request: Request) -> LostAccess | None:
    """Why the requester may no longer have this job worked on, or None when access holds.

    The diagnosis names what is missing (a membership, a binding), never a path or a token.
    """
    try:
        room = get_room(conn, job.room_id)
        group = get_group(conn, room.group_id)
        requester = get_user(conn, request.requester_id)
    except NotFound:
        return LostAccess(
            "the job's room, group or requester no longer exists, so it cannot go on",
            (NextAction(Action.cancel, job=job.id),),
        )
    if room.id != request.room_id:
        return LostAccess(
            "the job's room changed since the request, so it cannot go on",
            (NextAction(Action.cancel, job=job.id),),
        )
    changed = _binding_change(room, request.scope.get(BINDING_KEY))
    if changed:
        return LostAccess(
            f"room {room.name} is now bound to {changed} than when job {job.id} was "
            "requested; cancelled and retried, it is requested again in the room as it is now",
            (NextAction(Action.cancel, job=job.id), NextAction(Action.retry, job=job.id)),
        )
    if membership(conn, group.id, requester.id) is None:
        return LostAccess(
            f"the requester {requester.name} is no longer a member of group {group.name}; "
            "add them back",
            (NextAction(Action.resume, job=job.id), NextAction(Action.cancel, job=job.id)),
        )
    return None


def _binding_change(room: Room, recorded: Any) -> str | None:
    """What differs between the room now and the binding the request recorded, if anything."""
    if not isinstance(recorded, dict):
        return None  # requests made before bindings were recorded: nothing to compare
    now = room_binding(room)
    if recorded.get("group_id") != now["group_id"]:
        return "another group"
    if recorded.get("repo_sha256") != now["repo_sha256"]:
        return "a different repository"
    if recorded.get("base_branch") != now["base_branch"]:
        return f"a different base branch ({room.base_branch})"
    return None
