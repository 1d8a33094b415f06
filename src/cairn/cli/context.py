"""What every command shares: the configuration, the store, the acting user, the console.

This module is imported by every command, `cairn --help` included, so it imports nothing
heavy at the top: Rich, pydantic and SQLAlchemy load when a command first uses them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from cairn.errors import UsageError

if TYPE_CHECKING:
    from rich.console import Console

    from cairn.cli.remote import Remote
    from cairn.config import Config
    from cairn.store import Store

# The ids a store can hold (its id columns are INTEGER, 32 bits on PostgreSQL): anything else
# is a usage error at the edge, before a database sees it.
MAX_ID = 2**31 - 1


@cache
def _console(stderr: bool) -> Console:
    """A Rich console for text people and agents wrote: printed literally, never obeyed."""
    from rich.console import Console

    from cairn.sanitize import strip_control

    class UserTextConsole(Console):
        def render_str(self, text: str, **kwargs: Any) -> Any:
            # Stored text is stripped when written; stripped again here so that a row from
            # before (or from another writer) cannot hide or fake what cairn prints beside it.
            return super().render_str(strip_control(text), **kwargs)

    # No markup: requests, reasons and diagnoses are user text, and `[x]` in them is not a style.
    return UserTextConsole(stderr=stderr, highlight=False, soft_wrap=True, markup=False)


class _LazyConsole:
    """Stands for a Rich console that is built (and Rich imported) on first use."""

    def __init__(self, *, stderr: bool) -> None:
        self._stderr = stderr

    def __getattr__(self, name: str) -> Any:
        return getattr(_console(self._stderr), name)


console: Console = _LazyConsole(stderr=False)  # type: ignore[assignment]
errors: Console = _LazyConsole(stderr=True)  # type: ignore[assignment]


@dataclass
class Session:
    """Built once per invocation from the global options; the environment is read on first use.

    Reading it lazily keeps pydantic off the path of `cairn COMMAND --help`.
    """

    given: Config | None = None
    home: Path | None = None

    @cached_property
    def config(self) -> Config:
        """The configuration: the one given, else CAIRN_* variables with `--home` winning."""
        if self.given is not None:
            return self.given
        from cairn.config import Config

        return Config.from_env(home=self.home)

    def actor(self, as_user: str | None) -> str:
        """The acting user's canonical name, from `--as`, else CAIRN_USER, else admin."""
        from cairn.store.identity import person_name

        name = as_user or self.config.user
        try:
            return person_name(name)
        except UsageError as exc:
            where = "--as" if as_user else "CAIRN_USER"
            raise UsageError(f"{where} must name a user: {exc}") from None

    @cached_property
    def remote(self) -> Remote | None:
        """The cairn server CAIRN_URL names, when the CLI is its client; None locally."""
        import os

        from cairn.cli.remote import Remote

        return None if self.given is not None else Remote.from_environ(os.environ)

    def client(self, as_user: str | None = None) -> Remote | None:
        """The server to act through (refusing `--as`: the token says who acts), or None."""
        from cairn.cli.remote import AS_REFUSED

        remote = self.remote
        if remote is not None and as_user is not None:
            raise UsageError(AS_REFUSED)
        return remote

    @contextmanager
    def store(self, *, create: bool = False, connections: int | None = None) -> Iterator[Store]:
        from cairn.store import Store

        store = Store.open(self.config.store_url, create=create, connections=connections)
        try:
            yield store
        finally:
            store.close()


def command_group(help: str, **settings: Any) -> typer.Typer:
    """A group of subcommands with plain help: Rich-formatted help would import Rich at once."""
    return typer.Typer(help=help, no_args_is_help=True, rich_markup_mode=None, **settings)


def session(ctx: typer.Context) -> Session:
    obj = ctx.find_root().obj
    assert isinstance(obj, Session), "the root callback sets the session"
    return obj


def print_json(value: Any) -> None:
    """Machine-readable output: one JSON document on stdout, its strings free of control codes."""
    typer.echo(json.dumps(_stripped(value), indent=2, sort_keys=True, default=str))


def _stripped(value: Any) -> Any:
    # The sanitizer compiles its patterns on import: only output that is printed pays for it.
    from cairn.sanitize import strip_control

    if isinstance(value, str):
        return strip_control(value)
    if isinstance(value, dict):
        return {_stripped(k): _stripped(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_stripped(item) for item in value]
    return value


JSON_OPTION = typer.Option(False, "--json", help="Print JSON instead of text.")
AS_OPTION = typer.Option(None, "--as", help="Act as this user (default: CAIRN_USER, else admin).")
JOB_ARGUMENT = typer.Argument(..., min=1, max=MAX_ID, metavar="JOB", help="The job's id.")
JOB_OPTION = typer.Option(None, "--job", min=1, max=MAX_ID, help="Only this job's decisions.")
