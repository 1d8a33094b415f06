"""Forge credentials, encrypted at rest: the ledger holds only Fernet ciphertext.

The key comes from CAIRN_SECRET_KEY (any passphrase of 16 characters or more, stretched with
HKDF into a Fernet key); it is never stored. A credential stored under one key cannot be read
under another: that is a clear error, never a wrong token.
"""

from __future__ import annotations

import base64

import sqlalchemy as sa
from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from cairn.errors import NotFound, UsageError
from cairn.store.identity import _check_name
from cairn.store.schema import credentials, utcnow

MIN_KEY_LENGTH = 16
NO_KEY = (
    "stored credentials need the CAIRN_SECRET_KEY variable; set it to a long random value (for "
    "example "
    "the output of `python3 -c 'import secrets; print(secrets.token_urlsafe(32))'`) in every "
    "cairn process's environment, and keep it: credentials stored under it need it to be read"
)


class CredentialCipher:
    """Encrypts and decrypts credentials with a key derived from CAIRN_SECRET_KEY."""

    def __init__(self, secret_key: str | None) -> None:
        if not secret_key:
            raise UsageError(NO_KEY)
        if len(secret_key) < MIN_KEY_LENGTH:
            raise UsageError(f"CAIRN_SECRET_KEY must be at least {MIN_KEY_LENGTH} characters")
        derived = HKDF(
            algorithm=hashes.SHA256(), length=32, salt=None, info=b"cairn credentials v1"
        ).derive(secret_key.encode())
        self._fernet = Fernet(base64.urlsafe_b64encode(derived))

    def encrypt(self, secret: str) -> str:
        return self._fernet.encrypt(secret.encode()).decode("ascii")

    def decrypt(self, ciphertext: str, name: str) -> str:
        try:
            return self._fernet.decrypt(ciphertext.encode("ascii")).decode()
        except InvalidToken:
            raise UsageError(
                f"credential {name!r} cannot be read with this CAIRN_SECRET_KEY; set the key it "
                f"was stored with, or store it again with `cairn credential set {name}`"
            ) from None


def set_credential(conn: sa.Connection, name: str, secret: str, cipher: CredentialCipher) -> None:
    """Store (or replace) credential `name`, encrypted."""
    _check_name(name, "credential")
    if not secret.strip():
        raise UsageError("the credential is empty; pass the token on standard input")
    now, ciphertext = utcnow(), cipher.encrypt(secret.strip())
    updated = conn.execute(
        sa.update(credentials)
        .where(credentials.c.name == name)
        .values(ciphertext=ciphertext, updated_at=now)
    )
    if updated.rowcount == 0:
        conn.execute(
            sa.insert(credentials).values(
                name=name, ciphertext=ciphertext, created_at=now, updated_at=now
            )
        )


def read_credential(conn: sa.Connection, name: str, cipher: CredentialCipher) -> str:
    """Credential `name`, decrypted."""
    row = conn.execute(
        sa.select(credentials.c.ciphertext).where(credentials.c.name == name)
    ).first()
    if row is None:
        raise NotFound(f"no stored credential {name!r}; store it with `cairn credential set`")
    return cipher.decrypt(row.ciphertext, name)


def credential_names(conn: sa.Connection) -> list[str]:
    """The names of the stored credentials (never their values)."""
    return list(conn.execute(sa.select(credentials.c.name).order_by(credentials.c.name)).scalars())


def remove_credential(conn: sa.Connection, name: str) -> None:
    """Delete credential `name` (its ciphertext with it); NotFound if there is none."""
    removed = conn.execute(sa.delete(credentials).where(credentials.c.name == name))
    if removed.rowcount == 0:
        raise NotFound(f"no stored credential {name!r}; `cairn credential list` names them")
