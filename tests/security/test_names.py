"""Names that decisions carry cannot be spoofed: users and groups are case-folded ASCII."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.errors import UsageError
from cairn.store import Store, identity

LOOKALIKES = ["\u0430dmin", "adm\u0131n", "\uff41dmin", "admin\u200b", "ad\u202emin", "ädmin"]


@settings(max_examples=300, deadline=None)
@given(name=st.text(max_size=70))
def test_a_canonical_name_is_lowercase_ascii(name: str) -> None:
    try:
        folded = identity.person_name(name)
    except UsageError:
        return
    assert folded.isascii() and folded == folded.lower() and 1 <= len(folded) <= 64
    assert folded == name.lower()


def test_lookalikes_are_refused_and_case_is_folded(store: Store) -> None:
    with store.begin() as conn:
        admin = identity.add_user(conn, "admin")
        for name in LOOKALIKES:
            with pytest.raises(UsageError, match="a user name uses ASCII letters"):
                identity.add_user(conn, name)
            with pytest.raises(UsageError, match="a group name uses ASCII letters"):
                identity.add_group(conn, name)
        with pytest.raises(UsageError, match="already exists"):
            identity.add_user(conn, "ADMIN")
        alice = identity.add_user(conn, "Alice")
        assert alice.name == "alice"
        assert identity.get_user(conn, "ALICE").id == alice.id
        assert identity.find_user(conn, "Admin") == admin
        group = identity.add_group(conn, "Team.One")
        assert group.name == "team.one" and identity.get_group(conn, "TEAM.ONE").id == group.id
        assert [u.name for u in identity.list_users(conn)] == ["admin", "alice"]
