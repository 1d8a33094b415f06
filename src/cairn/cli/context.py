"""What every command shares: the configuration, the store, the acting user, the console."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import typer
from rich.console import Console

from cairn.config import Config
from cairn.store import Store

# No markup: requests, reasons and diagnoses are user text, and `[x]` in them is not a style.
console = Console(highlight=False, soft_wrap=True, markup=False)
errors = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)


@dataclass
class Session:
    """Built once per invocation from the environment and the global options."""

    config: Config

    def actor(self, as_user: str | None) -> str:
        return as_user or self.config.user

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
    """Machine-readable output: one JSON document on stdout."""
    typer.echo(json.dumps(value, indent=2, sort_keys=True, default=str))


JSON_OPTION = typer.Option(False, "--json", help="Print JSON instead of text.")
AS_OPTION = typer.Option(None, "--as", help="Act as this user (default: CAIRN_USER, else admin).")
