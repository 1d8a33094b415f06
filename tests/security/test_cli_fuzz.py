"""Every `cairn` command, found in the Typer app (so new commands are covered too), driven with
generated arguments through `cairn.cli.main` in-process: it exits 0, 1 or 2, never with a
traceback; a refusal is one line (or one JSON document) and leaves the store as it was.

The parsers, the configuration loader and the boundary have their own fuzzing in test_fuzz.py;
this file is about the command line as a whole.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import typer
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cairn.cli import app, main
from cairn.cli.context import MAX_ID
from cairn.store.schema import metadata
from cairn.testing.repos import make_sample_repo

# `demo` runs a whole scripted job in a folder of its own and reads no argument but --keep;
# tests/acceptance/test_demo_and_run.py drives it.
# `serve` answers HTTP until it is stopped; tests/api drives it as a subprocess.
SKIPPED = {("demo",), ("serve",)}
# A runner without --until-idle waits for work forever; the property is about its refusals.
ALWAYS = {("work",): ["--until-idle"]}
TOKEN_BODY = "Ab1Cd2Ef3" * 5
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

IDS = st.sampled_from([0, -1, 1, 2, MAX_ID, MAX_ID + 1, 2**63 - 1, 2**63, 10**20, -(10**20)]).map(
    str
) | st.integers().map(str)
TEXT = (
    st.sampled_from(
        [
            "", " ", "sample", "default", "admin", "alice", "Alice", "\u0430dmin", "auto",
            "interactive", "--json", "-", "--", "../x", "~", "script:", "script:nowhere.yaml",
            "\x1b[8mhidden", "\x9b31m", "\x1b]0;t\x07", "\u202eevil", "\udcff\udcfe", "a\udc80b",
            "x" * 5000, f"ghp_{TOKEN_BODY}", f"--ghp_{TOKEN_BODY}",
        ]
    )
    | st.text(st.characters(blacklist_characters="\0"), max_size=40)
)  # fmt: skip


def _commands() -> Iterator[tuple[tuple[str, ...], Any]]:
    def walk(group: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
        for name, command in group.commands.items():
            if hasattr(command, "commands"):
                yield from walk(command, (*path, name))
            elif (*path, name) not in SKIPPED:
                yield (*path, name), command

    return walk(typer.main.get_command(app), ())


COMMANDS = sorted(_commands(), key=lambda pair: pair[0])


def _value(param: Any) -> st.SearchStrategy[str]:
    # Typer keeps each parameter's annotation (`int`, `int | None`, `str`) in its descriptor.
    annotation = str(getattr(getattr(param, "type_descriptor", None), "annotation", ""))
    return IDS | TEXT if "int" in annotation else TEXT


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    """A command's words, then some of its arguments and options with generated values."""
    path, command = draw(st.sampled_from(COMMANDS))
    args = [*path, *ALWAYS.get(path, [])]
    for param in command.params:
        if param.param_type_name == "argument":
            if draw(st.integers(0, 9)):  # now and then leave one out
                args.append(draw(_value(param)))
        elif draw(st.booleans()):
            args.append(param.opts[0])
            if not getattr(param, "is_flag", False):
                args.append(draw(_value(param)))
    if draw(st.integers(0, 9)) == 0:
        args.insert(draw(st.integers(0, len(args))), draw(TEXT))
    return args


def _run(args: list[str]) -> tuple[int, str, str]:
    """`cairn args` in this process, through main's error handling, with UTF-8 strict output."""
    out, err = io.BytesIO(), io.BytesIO()
    stdout = io.TextIOWrapper(out, encoding="utf-8", errors="strict", write_through=True)
    stderr = io.TextIOWrapper(err, encoding="utf-8", errors="strict", write_through=True)
    code = 0
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            main(args)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue().decode(), err.getvalue().decode()


def _dump(engine: sa.Engine, tables: list[sa.Table]) -> dict[str, list[str]]:
    with engine.connect() as conn:
        return {t.name: sorted(map(repr, conn.execute(sa.select(t)))) for t in tables}


@pytest.fixture
def installation(store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A home on either store with cairn set up, member alice, a room and one queued job."""
    for name in [n for n in os.environ if n.startswith("CAIRN_")]:
        if name != "CAIRN_PACKAGE_DOWNLOADS":
            monkeypatch.delenv(name)
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CAIRN_DATABASE_URL", store_url)
    monkeypatch.chdir(tmp_path)
    repo = make_sample_repo(tmp_path / "repo")
    script = tmp_path / "agent.yaml"
    script.write_text("steps: [finish: {}]\n")
    for args in (
        ["init"],
        ["user", "add", "alice"],
        ["room", "create", "sample", "--repo", str(repo)],
        ["submit", "sample", "a request", "--agent", f"script:{script}", "--as", "alice"],
    ):
        assert _run(args)[0] == 0, args
    return store_url


def test_every_command_is_driven(installation: str) -> None:
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"show", "approve", "audit log", "user add", "room create", "cache prune"} <= names


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(args=command_lines())
def test_any_command_line_ends_cleanly(installation: str, args: list[str]) -> None:
    engine = sa.create_engine(installation)
    try:
        tables = list(metadata.sorted_tables)
        before = _dump(engine, tables)
        code, out, err = _run(args)
        event(f"exit {code}")
        assert code in (0, 1, 2), (args, code, err)
        assert "Traceback" not in out + err
        assert not CONTROL.search(out + err), (args, out, err)
        assert TOKEN_BODY not in out + err, "a token typed on the command line is masked"
        if code == 0:
            return
        lines = err.splitlines()
        assert len(lines) == 1, (args, err)
        json_mode = "--json" in (args[: args.index("--")] if "--" in args else args)
        if json_mode:
            assert list(json.loads(lines[0])) == ["error"], (args, err)
        else:
            assert lines[0].startswith("error: "), (args, err)
        assert _dump(engine, tables) == before, f"refused `{args}` changed the store"
    finally:
        engine.dispose()
