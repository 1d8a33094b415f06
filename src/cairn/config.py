"""Typed configuration, read from the environment only at the edge (CLI, API factory)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cairn.errors import UsageError

DEFAULT_LEASE_SECONDS = 15.0
MAX_LEASE_SECONDS = 86_400.0


def default_home(environ: Mapping[str, str]) -> Path:
    """The per-user data directory: $XDG_DATA_HOME/cairn, else ~/.local/share/cairn."""
    data = environ.get("XDG_DATA_HOME") or ""
    # The XDG spec says a relative value is invalid and must be ignored.
    if not Path(data).is_absolute():
        data = str(Path.home() / ".local" / "share")
    return Path(data) / "cairn"


class Config(BaseModel):
    """Where cairn keeps its state and how its runners behave."""

    model_config = ConfigDict(frozen=True)

    home: Path
    database_url: str | None = None
    lease_seconds: float = Field(default=DEFAULT_LEASE_SECONDS, gt=0)
    user: str = "admin"

    @property
    def store_url(self) -> str:
        return self.database_url or f"sqlite:///{self.home / 'cairn.db'}"

    @property
    def mirrors_dir(self) -> Path:
        return self.home / "mirrors"

    @property
    def workspaces_dir(self) -> Path:
        return self.home / "workspaces"

    # Keyed by the store's installation id: one home used with two stores (say, SQLite and
    # then PostgreSQL) must never hand job 1 of one store the workspace of job 1 of the other.
    def mirror_path(self, installation_id: str, room_id: int) -> Path:
        return self.mirrors_dir / installation_id[:12] / f"room-{room_id}.git"

    def workspace_path(self, installation_id: str, job_id: int) -> Path:
        return self.workspaces_dir / installation_id[:12] / f"job-{job_id}"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, home: Path | None = None) -> Config:
        """Build the configuration from CAIRN_* variables; an explicit home wins.

        Any value cairn cannot use is a UsageError that names the variable and what to set.
        """
        env = os.environ if environ is None else environ
        url = env.get("CAIRN_DATABASE_URL") or None
        if url and (not url.startswith(("sqlite:", "postgresql+psycopg:")) or "\0" in url):
            raise UsageError(
                "CAIRN_DATABASE_URL must be a sqlite:/// path or a postgresql+psycopg:// URL"
            )
        user = env.get("CAIRN_USER") or "admin"
        if "\0" in user or not user.strip():
            raise UsageError("CAIRN_USER must be a user name, for example alice")
        try:
            return cls(
                home=_home(env, home),
                database_url=url,
                lease_seconds=_lease_seconds(env),
                user=user,
            )
        except ValidationError as exc:
            field = ".".join(str(part) for part in exc.errors()[0]["loc"]) or "a setting"
            raise UsageError(f"cairn's configuration has an unusable {field}") from None


def _lease_seconds(env: Mapping[str, str]) -> float:
    raw = env.get("CAIRN_LEASE_SECONDS", str(DEFAULT_LEASE_SECONDS))
    try:
        lease = float(raw)
    except ValueError:
        raise UsageError(
            "CAIRN_LEASE_SECONDS must be a number of seconds, for example 15"
        ) from None
    if not math.isfinite(lease) or lease <= 0:
        raise UsageError("CAIRN_LEASE_SECONDS must be greater than zero")
    if lease > MAX_LEASE_SECONDS:
        raise UsageError(f"CAIRN_LEASE_SECONDS must be at most {MAX_LEASE_SECONDS:g} (one day)")
    return lease


def _home(env: Mapping[str, str], home: Path | None) -> Path:
    try:
        chosen = home or (Path(env["CAIRN_HOME"]) if env.get("CAIRN_HOME") else default_home(env))
        resolved = chosen.expanduser().absolute()
    except (RuntimeError, KeyError, OSError):
        # `~someone` for an unknown user, or no home directory at all.
        raise UsageError(
            "cairn could not work out its home folder; set CAIRN_HOME to an absolute path"
        ) from None
    if "\0" in str(resolved):
        raise UsageError("CAIRN_HOME must be a folder path without NUL characters")
    return resolved
