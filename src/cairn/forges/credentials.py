"""Where a room's forge token comes from: an environment variable, or the encrypted store."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from cairn.errors import UsageError
from cairn.forges.registry import ForgeSettings
from cairn.workspace.askpass import GitCredential

if TYPE_CHECKING:
    from cairn.config import Config


def secret_key(config: Config) -> str | None:
    """The key stored credentials are encrypted with, in clear only for the call that needs it."""
    return config.secret_key.get_secret_value() if config.secret_key else None


def forge_token(
    settings: ForgeSettings,
    *,
    environ: Mapping[str, str],
    conn: sa.Connection,
    secret_key: str | None,
) -> str:
    """The token of a room's forge; a UsageError says which variable or key to set."""
    if settings.token_env is not None:
        token = environ.get(settings.token_env, "").strip()
        if not token:
            raise UsageError(
                f"the forge token is read from {settings.token_env}, which is not set here; "
                f"export {settings.token_env} for cairn (its runners need it too)"
            )
        return token
    from cairn.store.credentials import CredentialCipher, read_credential

    assert settings.credential is not None
    return read_credential(conn, settings.credential, CredentialCipher(secret_key))


def room_git_credential(
    scope: Mapping[str, Any],
    *,
    environ: Mapping[str, str],
    conn: sa.Connection,
    secret_key: str | None,
) -> GitCredential | None:
    """The git login for a room on a forge (from its scope); None for a plain git room."""
    settings = ForgeSettings.from_scope(scope)
    if settings is None:
        return None
    token = forge_token(settings, environ=environ, conn=conn, secret_key=secret_key)
    return GitCredential(settings.git_username, token)
