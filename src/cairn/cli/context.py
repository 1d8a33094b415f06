"""What every command shares: the configuration, the store, the acting user, the console."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import typer
from rich.console import Console
from rich.text import Text

from cairn.config import Config
from cairn.errors import UsageError
from cairn.sanitize import strip_control
from cairn.store import Store
from cairn.store.identity import person_name

# The ids a store can hold (its id columns are INTEGER, 32 bits on PostgreSQL): anything else
# is a usage error at the edge, before a database sees it.
MAX_ID = 2**31 - 1


class UserTextConsole(Console):
    """A console for text people and agents wrote: printed literally, never obeyed."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        # Stored text is stripped when written; stripped again here so that a row from before
        # (or from another writer) cannot hide or fake what cairn prints beside it.
        return super().render_str(strip_control(text), **kwargs)


# No markup: requests, reasons and diagnoses are user text, and `[x]` in them is not a style.
console = UserTextConsole(highlight=False, soft_wrap=True, markup=False)
errors = UserTextConsole(stderr=True, highlight=False, soft_wrap=True, markup=False)


@dataclass
class Session:
    """Built once per invocation from the environment and the global options."""

    config: Config

    def actor(self, as_user: str | None) -> str:
        """The acting user's canonical name, from `--as`, else CAIRN_USER, else admin."""
        name = as_user or self.config.user
        try:
            return person_name(name)
        except UsageError as exc:
            where = "--as" if as_user else "CAIRN_USER"
            raise UsageError(f"{where} must name a user: {exc}") from None

    @contextmanager
    def store(self, *, create: bool = False) -> Iterator[Store]:
        store = Store.open(self.config.store_url, create=create)
        try:
            yield store
        finally:
            store.close()


def session(ctx: typer.Context) -> Session:
    obj = ctx.find_root().obj
    assert isinstance(obj, Session), "the root callback sets the session"
    return obj


def print_json(value: Any) -> None:
    """Machine-readable output: one JSON document on stdout, its strings free of control codes."""
    typer.echo(json.dumps(_stripped(value), indent=2, sort_keys=True, default=str))


def _stripped(value: Any) -> Any:
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
