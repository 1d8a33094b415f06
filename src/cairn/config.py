"""Typed configuration, read from the environment only at the edge (CLI, API factory)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, SecretStr, ValidationError
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from cairn.errors import UsageError

DEFAULT_LEASE_SECONDS = 15.0
DEFAULT_GIT_TIMEOUT = 60.0
DEFAULT_AFFINITY_SECONDS = 5.0
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


# Validators raise these error types; `REFUSALS` turns them (and pydantic's own) into messages.
def _refuse(kind: str) -> PydanticCustomError:
    return PydanticCustomError(kind, kind)


def _folder(path: Path) -> Path:
    try:
        resolved = path.expanduser().absolute()
    except (RuntimeError, KeyError, OSError, ValueError):
        # `~someone` for an unknown user, or no home directory at all.
        raise _refuse("no_home") from None
    if "\0" in str(resolved):
        raise _refuse("nul")
    return resolved


def _store_url(url: str | None) -> str | None:
    if url and (not url.startswith(STORE_SCHEMES) or "\0" in url):
        raise _refuse("scheme")
    return url


def _user_name(name: str) -> str:
    if "\0" in name or not name.strip():
        raise _refuse("blank")
    return name


def _source(url: str | None) -> str | None:
    """An index, registry or service URL: https (or http to this host), no credentials."""
    if url is None:
        return None
    parts = urlsplit(url)
    local = parts.hostname in ("localhost", "127.0.0.1", "::1")
    if not (parts.scheme == "https" or (parts.scheme == "http" and local)) or not parts.hostname:
        raise _refuse("insecure")
    if parts.username or parts.password:
        raise _refuse("credentials")
    return url


def _absolute(path: Path | None) -> Path | None:
    """An absolute path (a folder, or a program), `~` expanded."""
    if path is None:
        return None
    try:
        expanded = path.expanduser()
    except (RuntimeError, KeyError, ValueError):
        raise _refuse("relative") from None
    if "\0" in str(path) or not expanded.is_absolute():
        raise _refuse("relative")
    return expanded


Folder = Annotated[Path, AfterValidator(_folder)]
Source = Annotated[str, AfterValidator(_source)]
OptionalSource = Annotated[str | None, AfterValidator(_source)]
AbsolutePath = Annotated[Path | None, AfterValidator(_absolute)]


class Config(BaseSettings):
    """Where cairn keeps its state and how its runners behave.

    `Config.from_env` reads the CAIRN_* variables; `Config(home=...)` reads nothing, so code
    and tests that build one directly get exactly what they passed.
    """

    # By name as well as by alias: Python code builds Config(uv_command=...), the environment
    # says CAIRN_UV (see `_variables`).
    model_config = SettingsConfigDict(frozen=True, validate_by_name=True)

    home: Folder
    database_url: Annotated[str | None, AfterValidator(_store_url)] = None
    lease_seconds: float = Field(
        default=DEFAULT_LEASE_SECONDS, gt=0, le=MAX_LEASE_SECONDS, allow_inf_nan=False
    )
    affinity_seconds: float = Field(
        default=DEFAULT_AFFINITY_SECONDS, ge=0, le=MAX_LEASE_SECONDS, allow_inf_nan=False
    )
    """How long a runnable job waits for the live host that holds its workspace (0: never)."""
    git_timeout: float = Field(default=DEFAULT_GIT_TIMEOUT, gt=0, allow_inf_nan=False)
    """Seconds a git call that reaches a room's repository may go without an answer."""
    user: Annotated[str, AfterValidator(_user_name)] = "admin"
    pypi_index: Source = PYPI_INDEX
    """The one approved Python package index (without credentials)."""
    npm_registry: Source = NPM_REGISTRY
    """The one approved npm registry (without credentials)."""
    package_downloads: AbsolutePath = None
    """The package managers' download cache; default `<home>/downloads`."""
    osv_dir: AbsolutePath = None
    """A folder of OSV JSON advisories every prepared dependency set is audited against."""
    osv_url: OptionalSource = None
    """An OSV-compatible service (for example https://api.osv.dev) asked as well."""
    uv_command: AbsolutePath = Field(default=None, validation_alias="CAIRN_UV")
    """The uv to install Python dependencies with; default the one beside cairn, else PATH's."""
    npm_command: AbsolutePath = Field(default=None, validation_alias="CAIRN_NPM")
    """The npm to install npm dependencies with; default PATH's."""
    environment: dict[str, str] = Field(default_factory=dict, exclude=True, repr=False)
    """The runner's environment as `from_env` read it: where an agent adapter takes its model
    endpoint and API key from (OPENAI_BASE_URL, the spec's api_key_env). Never dumped or shown:
    it holds keys. Empty for a `Config(...)` built in code, which reads nothing."""

    secret_key: SecretStr | None = None
    """The key stored forge credentials are encrypted with (CAIRN_SECRET_KEY); never stored."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Only the arguments: the environment is read by `from_env`, at the edge, never by a
        # `Config(...)` built deep inside the code or in a test.
        return (init_settings,)

    def __hash__(self) -> int:
        # A frozen Config stays hashable: its environment (a dict) is left out of the hash.
        return hash(tuple(v for k, v in self.__dict__.items() if k != "environment"))

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

    def agent_state_path(self, installation_id: str, job_id: int) -> Path:
        """A CLI agent's private state folder for the job (its config and session files)."""
        return self.home / "agent-state" / installation_id[:12] / f"job-{job_id}"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, home: Path | None = None) -> Config:
        """Build the configuration from CAIRN_* variables; an explicit home wins.

        Any value cairn cannot use is a UsageError that names the variable and what to set.
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = _variables(cls, env)
        try:
            values["home"] = home or values.get("home") or default_home(env)
            values["environment"] = dict(env)
            return cls(**values)
        except RuntimeError:  # no home directory to put the default under
            raise UsageError(REFUSALS["home"]["no_home"]) from None
        except ValidationError as exc:
            raise UsageError(_refusal(cls, exc)) from None


def _variables(settings: type[Config], environ: Mapping[str, str]) -> dict[str, Any]:
    """The CAIRN_* variables that are set, by the setting they give.

    One name per setting, matched case-sensitively as POSIX does (cairn_user is not
    CAIRN_USER): CAIRN_ + the setting's name, or its alias (CAIRN_UV, never CAIRN_UV_COMMAND;
    the field's name is for Python code that builds a Config). An empty variable counts as
    unset. Read here rather than by pydantic-settings' environment source, which reads only
    os.environ unless one overrides its private loader.
    """
    found: dict[str, Any] = {}
    for name, info in settings.model_fields.items():
        if name == "environment":  # the whole environment, set by `from_env` itself
            continue
        alias = info.validation_alias
        value = environ.get(alias if isinstance(alias, str) else f"CAIRN_{name.upper()}")
        if value:
            found[name] = value
    return found


def _urls(variable: str, example: str) -> dict[str, str]:
    return {
        "credentials": f"{variable} must not hold credentials; use an index that needs no login",
        "": f"{variable} must be an https:// URL, for example {example}",
    }


def _paths(variable: str) -> dict[str, str]:
    return {"": f"{variable} must be an absolute path"}


# What cairn says when a value is refused: by field, then by error type ("" for any other).
REFUSALS: dict[str, dict[str, str]] = {
    "home": {
        "no_home": "cairn could not work out its home folder; set CAIRN_HOME to an absolute path",
        "": "CAIRN_HOME must be a folder path without NUL characters",
    },
    "database_url": {"": "CAIRN_DATABASE_URL must be a sqlite:/// path or a postgresql:// URL"},
    "user": {"": "CAIRN_USER must be a user name, for example alice"},
    "lease_seconds": {
        "float_parsing": "CAIRN_LEASE_SECONDS must be a number of seconds, for example 15",
        "float_type": "CAIRN_LEASE_SECONDS must be a number of seconds, for example 15",
        "less_than_equal": f"CAIRN_LEASE_SECONDS must be at most {MAX_LEASE_SECONDS:g} (one day)",
        "": "CAIRN_LEASE_SECONDS must be greater than zero",
    },
    "affinity_seconds": {
        "": "CAIRN_AFFINITY_SECONDS must be a number of seconds from 0 to 86400, for example 5"
    },
    "git_timeout": {
        "": "CAIRN_GIT_TIMEOUT must be a number of seconds greater than zero, for example 60"
    },
    "pypi_index": _urls("CAIRN_PYPI_INDEX", PYPI_INDEX),
    "npm_registry": _urls("CAIRN_NPM_REGISTRY", NPM_REGISTRY),
    "osv_url": _urls("CAIRN_OSV_URL", EXAMPLE_URL),
    "package_downloads": _paths("CAIRN_PACKAGE_DOWNLOADS"),
    "osv_dir": _paths("CAIRN_OSV_DIR"),
    "uv_command": _paths("CAIRN_UV"),
    "npm_command": _paths("CAIRN_NPM"),
    "secret_key": {"": "CAIRN_SECRET_KEY must be text"},
}


def _refusal(settings: type[Config], exc: ValidationError) -> str:
    """The message for pydantic's first complaint; never its text, which quotes the value."""
    error = exc.errors()[0]
    where = str(error["loc"][0]) if error["loc"] else ""
    field = next(
        (name for name, info in settings.model_fields.items() if where == info.validation_alias),
        where,
    )
    said = REFUSALS.get(field)
    if said is None:
        return "cairn's configuration has an unusable setting"
    return said.get(error["type"], said[""])
