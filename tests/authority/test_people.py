"""Who may add people, create groups, change roles and replace tokens."""

from __future__ import annotations

import pytest

from cairn.errors import NotAllowed, UsageError
from cairn.jobs import people
from cairn.jobs.policy import GroupPolicy
from cairn.store import identity
from cairn.testing.harness import Cairn


def test_an_admin_adds_a_user_who_gets_a_token_once(team: Cairn) -> None:
    with team.store.begin() as conn:
        dave, token = people.create_user(conn, "dave", "bob", group="default", role="member")
        assert identity.user_for_token(conn, token) == dave
        default = identity.get_group(conn, "default")
        assert identity.membership(conn, default.id, dave.id).role == "member"
    for actor in ("alice", "carol"):
        with team.store.begin() as conn, pytest.raises(NotAllowed, match="only an admin"):
            people.create_user(conn, "eve", actor, group="default", role="member")


def test_a_token_is_replaced_by_its_user_or_an_admin_of_their_group(team: Cairn) -> None:
    with team.store.begin() as conn:
        first = people.rotate_token(conn, "alice", "alice")
        second = people.rotate_token(conn, "alice", "bob")
        assert identity.user_for_token(conn, first) is None
        assert identity.user_for_token(conn, second).name == "alice"
    for actor, name in (("alice", "bob"), ("carol", "alice")):
        with team.store.begin() as conn, pytest.raises(NotAllowed, match="replace"):
            people.rotate_token(conn, name, actor)


def test_only_an_admin_creates_a_group_and_becomes_its_admin(team: Cairn) -> None:
    with team.store.begin() as conn, pytest.raises(NotAllowed, match="only an admin"):
        people.create_group(conn, "mine", "alice", GroupPolicy())
    with team.store.begin() as conn:
        group = people.create_group(conn, "infra", "bob", GroupPolicy(dependency_approval="member"))
        assert [(u.name, r) for u, r in identity.members(conn, group.id)] == [("bob", "admin")]
    assert GroupPolicy.of(group).dependency_approval == "member"


def test_roles_change_and_the_last_admin_stays(team: Cairn) -> None:
    with team.store.begin() as conn:
        _, before = people.add_member(conn, "default", "alice", "admin", "admin")
        assert before == "member"
        people.remove_member(conn, "default", "alice", "bob")
        people.remove_member(conn, "default", "bob", "admin")
    with team.store.begin() as conn, pytest.raises(UsageError, match="last admin"):
        people.remove_member(conn, "default", "admin", "admin")
    with team.store.begin() as conn, pytest.raises(UsageError, match="last admin"):
        people.add_member(conn, "default", "admin", "admin", "member")
    with team.store.begin() as conn, pytest.raises(UsageError, match="not a member"):
        people.remove_member(conn, "default", "alice", "admin")
    with team.store.begin() as conn, pytest.raises(NotAllowed, match="only an admin"):
        people.add_member(conn, "default", "carol", "carol", "admin")
