"""The store contract for identities, tokens, group policy and room bindings, on both backends."""

from __future__ import annotations

import hashlib

import pytest
import sqlalchemy as sa

from cairn.errors import NotFound, UsageError
from cairn.store import Store, identity, rooms
from cairn.store.schema import metadata


def test_a_token_is_stored_only_as_its_hash_and_finds_its_user(store: Store) -> None:
    with store.begin() as conn:
        alice = identity.add_user(conn, "alice")
        assert not identity.has_token(conn, alice.id)
        token = identity.issue_token(conn, alice.id)
    assert token.startswith("cairn_") and len(token) > 40
    with store.begin() as conn:
        assert identity.user_for_token(conn, token) == alice
        assert identity.has_token(conn, alice.id)
        stored = conn.execute(sa.text("SELECT token_hash FROM users")).scalar_one()
    assert stored == hashlib.sha256(token.encode()).hexdigest() == identity.hash_token(token)
    assert token not in _everything_in(store), "the plain token appears nowhere in the store"


def test_a_new_token_replaces_the_old_one(store: Store) -> None:
    with store.begin() as conn:
        alice = identity.add_user(conn, "alice")
        old = identity.issue_token(conn, alice.id)
        new = identity.issue_token(conn, alice.id)
    assert old != new
    with store.begin() as conn:
        assert identity.user_for_token(conn, old) is None
        assert identity.user_for_token(conn, new) == alice
        assert identity.user_for_token(conn, "cairn_not-a-token") is None
        assert identity.user_for_token(conn, new.removeprefix("cairn_")) is None
        assert identity.user_for_token(conn, "") is None
    with store.begin() as conn, pytest.raises(NotFound, match="no user 999"):
        identity.issue_token(conn, 999)


def test_names_cairn_uses_for_its_own_decisions_are_reserved(store: Store) -> None:
    for name in ("policy", "Policy", "cairn", "system"):
        with store.begin() as conn, pytest.raises(UsageError, match="reserved"):
            identity.add_user(conn, name)


def test_members_are_listed_with_their_roles_and_can_be_removed(store: Store) -> None:
    with store.begin() as conn:
        team = identity.add_group(conn, "team")
        other = identity.add_group(conn, "other")
        alice, bob = identity.add_user(conn, "alice"), identity.add_user(conn, "bob")
        identity.set_membership(conn, team.id, alice.id, "admin")
        identity.set_membership(conn, team.id, bob.id, "member")
        identity.set_membership(conn, other.id, bob.id, "admin")
    with store.begin() as conn:
        assert [(u.name, r) for u, r in identity.members(conn, team.id)] == [
            ("alice", "admin"),
            ("bob", "member"),
        ]
        assert [(g.name, r) for g, r in identity.memberships_of(conn, bob.id)] == [
            ("team", "member"),
            ("other", "admin"),
        ]
        assert identity.remove_membership(conn, team.id, bob.id) is True
        assert identity.remove_membership(conn, team.id, bob.id) is False
    with store.begin() as conn:
        assert identity.membership(conn, team.id, bob.id) is None
        assert identity.membership(conn, other.id, bob.id) is not None
        assert [u.name for u in identity.list_users(conn)] == ["alice", "bob"]
        assert [g.name for g in identity.list_groups(conn)] == ["team", "other"]


def test_a_group_policy_is_replaced_whole(store: Store) -> None:
    with store.begin() as conn:
        group = identity.add_group(conn, "team")
        assert group.policy == identity.DEFAULT_POLICY
        changed = identity.set_policy(conn, group.id, {"run_approval": "auto"})
    with store.begin() as conn:
        assert identity.get_group(conn, "team").policy == {"run_approval": "auto"} == changed.policy
    with store.begin() as conn, pytest.raises(NotFound, match="no group 999"):
        identity.set_policy(conn, 999, {})


def test_a_room_can_be_bound_to_another_repository_or_branch(store: Store) -> None:
    with store.begin() as conn:
        group = identity.add_group(conn, "team")
        room = rooms.create_room(conn, name="r", group_id=group.id, repo="/a.git", base_branch="m")
        moved = rooms.rebind_room(conn, room.id, repo="/b.git", base_branch="release")
    assert (moved.id, moved.repo, moved.base_branch) == (room.id, "/b.git", "release")
    with store.begin() as conn:
        assert rooms.get_room(conn, "r") == moved
    with store.begin() as conn, pytest.raises(NotFound, match="no room 999"):
        rooms.rebind_room(conn, 999, repo="x", base_branch="y")


def _everything_in(store: Store) -> str:
    """Every value of every table, as text."""
    with store.begin() as conn:
        return "\n".join(
            repr(tuple(row))
            for table in metadata.sorted_tables
            for row in conn.execute(table.select())
        )
