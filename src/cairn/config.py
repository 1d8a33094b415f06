"""Typed configuration, read from the environment only at the edge (CLI, API factory)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cairn.errors import UsageError

DEFAULT_LEASE_SECONDS = 15.0
DEFAULT_GIT_TIMEOUT = 60.0
MAX_LEASE_SECONDS = 86_400.0
PYPI_INDEX = "https://pypi.org/simple"
NPM_REGISTRY = "https://registry.npmjs.org/"
EXAMPLE_URL = "https://osv.example.com"
# The store opens these (cairn.store.database maps postgresql:// to its psycopg driver); the
# list is repeated here so that reading the configuration does not import SQLAlchemy.
STORE_SCHEMES = ("sqlite:", "postgresql:", "postgresql+psycopg:")


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
    git_timeout: float = Field(default=DEFAULT_GIT_TIMEOUT, gt=0)
    """Seconds a git call that reaches a room's repository may go without an answer."""
    user: str = "admin"
    pypi_index: str = PYPI_INDEX
    """The one approved Python package index (without credentials)."""
    npm_registry: str = NPM_REGISTRY
    """The one approved npm registry (without credentials)."""
    package_downloads: Path | None = None
    """The package managers' download cache; default `<home>/downloads`."""
    osv_dir: Path | None = None
    """A folder of OSV JSON advisories every prepared dependency set is audited against."""
    osv_url: str | None = None
    """An OSV-compatible service (for example https://api.osv.dev) asked as well."""
    uv_command: Path | None = None
    """The uv to install Python dependencies with; default the one beside cairn, else PATH's."""
    npm_command: Path | None = None
    """The npm to install npm dependencies with; default PATH's."""

    @property
    def store_url(self) -> str:
        return self.database_url or f"sqlite:///{self.home / 'cairn.db'}"

    @property
    def mirrors_dir(self) -> Path:
        return self.home / "mirrors"

    @property
    def workspaces_dir(self) -> Path:
        return self.home / "workspaces"

    @property
    def deps_dir(self) -> Path:
        """The dependency cache: one read-only entry per fingerprint."""
        return self.home / "deps"

    @property
    def downloads_dir(self) -> Path:
        return self.package_downloads or self.home / "downloads"

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
        if url and (not url.startswith(STORE_SCHEMES) or "\0" in url):
            raise UsageError("CAIRN_DATABASE_URL must be a sqlite:/// path or a postgresql:// URL")
        user = env.get("CAIRN_USER") or "admin"
        if "\0" in user or not user.strip():
            raise UsageError("CAIRN_USER must be a user name, for example alice")
        try:
            return cls(
                home=_home(env, home),
                database_url=url,
                lease_seconds=_lease_seconds(env),
                git_timeout=_git_timeout(env),
                user=user,
                pypi_index=_source(env, "CAIRN_PYPI_INDEX", PYPI_INDEX),
                npm_registry=_source(env, "CAIRN_NPM_REGISTRY", NPM_REGISTRY),
                osv_url=_source(env, "CAIRN_OSV_URL", None),
                package_downloads=_path(env, "CAIRN_PACKAGE_DOWNLOADS"),
                osv_dir=_path(env, "CAIRN_OSV_DIR"),
                uv_command=_path(env, "CAIRN_UV"),
                npm_command=_path(env, "CAIRN_NPM"),
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


def _git_timeout(env: Mapping[str, str]) -> float:
    raw = env.get("CAIRN_GIT_TIMEOUT") or str(DEFAULT_GIT_TIMEOUT)
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise UsageError(
            "CAIRN_GIT_TIMEOUT must be a number of seconds greater than zero, for example 60"
        )
    return seconds


def _source(env: Mapping[str, str], name: str, default: str | None) -> Any:
    """An index, registry or service URL: https (or http to this host), no credentials."""
    raw = env.get(name) or default
    if raw is None:
        return None
    parts = urlsplit(raw)
    local = parts.hostname in ("localhost", "127.0.0.1", "::1")
    secure = parts.scheme == "https" or (parts.scheme == "http" and local)
    if not secure or not parts.hostname:
        raise UsageError(f"{name} must be an https:// URL, for example {default or EXAMPLE_URL}")
    if parts.username or parts.password:
        raise UsageError(f"{name} must not hold credentials; use an index that needs no login")
    return raw


def _path(env: Mapping[str, str], name: str) -> Path | None:
    """An absolute path (a folder, or a program) from `name`, or None when it is unset."""
    raw = env.get(name)
    if not raw:
        return None
    if "\0" in raw or not Path(raw).expanduser().is_absolute():
        raise UsageError(f"{name} must be an absolute path")
    return Path(raw).expanduser()


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
