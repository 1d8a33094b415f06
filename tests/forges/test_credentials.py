"""Stored forge credentials: encrypted at rest, readable only with the key they were stored with."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from cairn.errors import NotFound, UsageError
from cairn.forges import github, gitlab
from cairn.sanitize import mask_secret_shapes
from cairn.store import Store
from cairn.store.credentials import (
    NO_KEY,
    CredentialCipher,
    credential_names,
    read_credential,
    remove_credential,
    set_credential,
)
from cairn.store.schema import credentials

KEY = "a-long-enough-secret-key-for-tests"
TOKEN = "ghp_ThisIsAForgeTokenNobodyMayRead0123"


def test_a_stored_credential_is_encrypted_in_the_database(store: Store) -> None:
    cipher = CredentialCipher(KEY)
    with store.begin() as conn:
        set_credential(conn, "github-bot", TOKEN, cipher)
    with store.begin() as conn:
        raw = conn.execute(sa.select(credentials)).one()._asdict()
        assert TOKEN not in repr(raw)
        assert TOKEN[4:16] not in repr(raw)
        assert read_credential(conn, "github-bot", cipher) == TOKEN
        assert credential_names(conn) == ["github-bot"]


def test_replacing_a_credential_keeps_one_row(store: Store) -> None:
    cipher = CredentialCipher(KEY)
    with store.begin() as conn:
        set_credential(conn, "bot", "first-token-value", cipher)
        set_credential(conn, "bot", "second-token-value", cipher)
        assert read_credential(conn, "bot", cipher) == "second-token-value"
        assert conn.execute(sa.select(sa.func.count()).select_from(credentials)).scalar() == 1


def test_another_key_cannot_read_it_and_says_so(store: Store) -> None:
    with store.begin() as conn:
        set_credential(conn, "bot", TOKEN, CredentialCipher(KEY))
        with pytest.raises(UsageError, match="cannot be read with this CAIRN_SECRET_KEY") as e:
            read_credential(conn, "bot", CredentialCipher("another-key-of-enough-length"))
        assert TOKEN not in str(e.value)
        with pytest.raises(NotFound, match="cairn credential set"):
            read_credential(conn, "nobody", CredentialCipher(KEY))


def test_no_key_or_a_short_key_is_a_clear_error() -> None:
    with pytest.raises(UsageError, match="CAIRN_SECRET_KEY"):
        CredentialCipher(None)
    with pytest.raises(UsageError, match="at least 16"):
        CredentialCipher("short")


def test_ciphertexts_differ_each_time() -> None:
    cipher = CredentialCipher(KEY)
    assert cipher.encrypt(TOKEN) != cipher.encrypt(TOKEN)


@pytest.mark.parametrize(
    "message",
    [
        NO_KEY,
        github.READ,
        github.PUSH,
        github.PULLS,
        github.CHECKS,
        gitlab.READ,
        gitlab.WRITE,
    ],
)
def test_cairns_own_messages_pass_the_output_masker_unchanged(message: str) -> None:
    """No `name: value` shape follows a secret-looking word, so no part becomes [secret]."""
    assert mask_secret_shapes(message) == message


def test_removing_a_credential_deletes_its_row(store: Store) -> None:
    with store.begin() as conn:
        set_credential(conn, "gh", TOKEN, CredentialCipher(KEY))
        remove_credential(conn, "gh")
        assert credential_names(conn) == []
        assert conn.execute(sa.select(sa.func.count()).select_from(credentials)).scalar() == 0
        with pytest.raises(NotFound, match="no stored credential 'gh'"):
            remove_credential(conn, "gh")
