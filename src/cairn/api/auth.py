"""Bearer tokens: the one `cairn user add` printed, checked against its stored hash only.

The token itself is never logged, stored or echoed: an unknown token and a missing one get the
same answer, and the comparison of hashes takes the same time whatever matched.
"""

from __future__ import annotations

import hmac

import sqlalchemy as sa
from fastapi import Request

from cairn.errors import CairnError
from cairn.store import Store
from cairn.store.identity import TOKEN_PREFIX, hash_token
from cairn.store.records import User
from cairn.store.schema import users


class Unauthenticated(CairnError):
    """No token, or one that belongs to no user (answered 401)."""


REFUSED = (
    "a valid API token is required: send `Authorization: Bearer TOKEN`, with the token that "
    "`cairn user add` (or `cairn user token`) printed"
)


def current_user(request: Request) -> User:
    """The user the request's bearer token belongs to; Unauthenticated otherwise."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token.startswith(TOKEN_PREFIX):
        raise Unauthenticated(REFUSED)
    store: Store = request.app.state.served.store
    user = user_for_token(store, token)
    if user is None:
        raise Unauthenticated(REFUSED)
    return user


def user_for_token(store: Store, token: str) -> User | None:
    """The token's user, the stored hash compared in constant time."""
    wanted = hash_token(token)
    with store.begin() as conn:
        row = conn.execute(
            sa.select(users.c.id, users.c.name, users.c.created_at, users.c.token_hash).where(
                users.c.token_hash == wanted
            )
        ).first()
    if row is None or not hmac.compare_digest(str(row.token_hash), wanted):
        return None
    return User(id=row.id, name=row.name, created_at=row.created_at)
