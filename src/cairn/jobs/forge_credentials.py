"""Stored forge credentials, decided by a group's admin: store, remove and name them.

The secret goes in and never comes out through here: listing gives names only, and nothing
returns or logs the value (rooms read it at delivery through cairn.forges.credentials).
"""

from __future__ import annotations

import sqlalchemy as sa

from cairn.config import Config
from cairn.errors import InvalidState
from cairn.jobs.policy import require_group_admin
from cairn.store import identity


def store_credential(
    conn: sa.Connection, name: str, secret: str, *, group: str, actor: str, config: Config
) -> None:
    """Store `secret` under `name`, encrypted with CAIRN_SECRET_KEY (an admin of `group`)."""
    from cairn.forges.credentials import secret_key
    from cairn.store.credentials import CredentialCipher, set_credential

    owner = identity.get_group(conn, group)
    require_group_admin(conn, owner, actor, "store forge credentials")
    set_credential(conn, name, secret, CredentialCipher(secret_key(config)))


def drop_credential(conn: sa.Connection, name: str, *, group: str, actor: str) -> None:
    """Remove a stored credential (an admin of `group`); refused while a room still names it."""
    from cairn.forges.rooms import rooms_naming
    from cairn.store.credentials import remove_credential

    owner = identity.get_group(conn, group)
    require_group_admin(conn, owner, actor, "remove forge credentials")
    users = rooms_naming(conn, name)
    if users:
        raise InvalidState(
            f"credential {name} is still named by room {', '.join(users)}; those rooms "
            "would fail to reach their forge. Store the new token under the same name "
            "with `cairn credential set` instead, or remove it once no room names it"
        )
    remove_credential(conn, name)
