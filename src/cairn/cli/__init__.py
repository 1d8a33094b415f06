"""The `cairn` command line: Typer commands over the library, errors as one clear line."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import typer

try:  # Typer vendors Click; these are the exceptions it raises outside standalone mode.
    from typer._click import exceptions as click_errors
except ImportError:  # an older Typer, built on Click itself
    from click import exceptions as click_errors  # type: ignore[no-redef,import-not-found,unused-ignore]

from cairn.cli import (
    agent_commands,
    authority_commands,
    cache_commands,
    forge_commands,
    gate_commands,
    gc_commands,
    job_commands,
    runner_commands,
    schedule_commands,
    serve_commands,
    setup_commands,
)
from cairn.cli.context import Session, command_group, errors
from cairn.cli.demo import demo
from cairn.cli.next_steps import with_next
from cairn.errors import CairnError, UsageError

app = command_group(
    "Resumable AI coding jobs against git repositories.",
    name="cairn",
    pretty_exceptions_enable=False,
    add_completion=False,
)
audit_app = command_group("Check the decision ledger.")


@app.callback()
def _root(
    ctx: typer.Context,
    home: Path | None = typer.Option(
        None,
        "--home",
        help="Where cairn keeps its state (default: CAIRN_HOME, else a per-user dir).",
    ),
) -> None:
    ctx.obj = Session(home=home)


app.command()(setup_commands.init)
app.add_typer(authority_commands.user_app, name="user")
app.add_typer(authority_commands.group_app, name="group")
setup_commands.room_app.command("check")(forge_commands.room_check)
app.add_typer(setup_commands.room_app, name="room")
app.add_typer(agent_commands.agent_app, name="agent")

app.add_typer(forge_commands.credential_app, name="credential")
app.add_typer(cache_commands.cache_app, name="cache")
app.add_typer(schedule_commands.schedule_app, name="schedule")
for command in (
    job_commands.submit,
    job_commands.run,
    job_commands.work,
    job_commands.jobs,
    job_commands.show,
    # The decisions live with the authority rules that govern them (gate_commands), not here.
    gate_commands.approve,
    gate_commands.reply,
    gate_commands.reject,
    gate_commands.cancel,
    gate_commands.resume,
    gate_commands.retry,
):
    app.command()(command)
audit_app.command("verify")(job_commands.audit_verify)
audit_app.command("head")(job_commands.audit_head)
audit_app.command("log")(authority_commands.audit_log)
app.add_typer(audit_app, name="audit")
app.command()(demo)
app.command()(gc_commands.gc)
app.command()(runner_commands.runners)
app.command()(serve_commands.serve)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: exit 0 on success, 2 on a usage or input error, 1 on anything else."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        _check_arguments(args)
        _check_remote(args)
        code = app(args=args, prog_name="cairn", standalone_mode=False)
    except click_errors.NoArgsIsHelpError as exc:
        # `cairn user`: what it offers, which is no error (Typer's rich help prints itself).
        if exc.format_message().strip():
            typer.echo(exc.format_message())
        code = 0
    except (KeyboardInterrupt, typer.Abort):
        errors.print("interrupted; jobs in flight resume from their last recorded stage")
        raise SystemExit(130) from None
    except Exception as exc:
        failure = _failure(exc)
        if failure is None:
            raise  # a bug: its traceback is what a report needs
        _fail(args, *failure)
    if code:
        raise SystemExit(code)


def _failure(exc: Exception) -> tuple[str, int] | None:
    """The one line a person reads for `exc` and the exit code, or None for an unexpected error."""

    if isinstance(exc, click_errors.UsageError):
        # Click's own usage errors (a missing argument, an unknown option): 2, like ours.
        where = exc.ctx.command_path if exc.ctx else "cairn"
        return f"{exc.format_message().rstrip('.')} (see `{where} --help`)", 2
    if isinstance(exc, click_errors.ClickException):
        return exc.format_message(), exc.exit_code
    if isinstance(exc, CairnError):
        return with_next(str(exc), exc.next_actions), exc.exit_code
    if isinstance(exc, OSError):
        # The message names what failed, never the file: paths stay out of what users see.
        return f"{exc.strerror or 'a file operation failed'}; check --home / CAIRN_HOME", 1
    import sqlalchemy as sa  # the error path only

    if isinstance(exc, sa.exc.SQLAlchemyError):
        return (
            f"the store refused an operation ({type(exc).__name__}); "
            "check CAIRN_DATABASE_URL and that the database is up, then try again"
        ), 1
    return None


def _check_arguments(args: list[str]) -> None:
    # Bytes that are not UTF-8 reach Python as lone surrogates, which no store or terminal
    # takes; refused here, once, before any command sees them.
    for position, arg in enumerate(args, start=1):
        if not arg.isascii():
            try:
                arg.encode("utf-8")
            except UnicodeEncodeError:
                raise UsageError(
                    f"argument {position} is not valid UTF-8 text; type it again as plain text"
                ) from None


def _check_remote(args: list[str]) -> None:
    # With CAIRN_URL set, a command that only works on the store is refused before it runs.
    import os

    if os.environ.get("CAIRN_URL", "").strip():
        from cairn.cli.remote import refuse_local_only

        refuse_local_only(args)


def _fail(args: list[str], message: str, code: int) -> NoReturn:
    """Print one error, as `{"error": ...}` under --json, and exit with `code`."""
    from cairn.sanitize import edge_sanitizer

    # An error may quote what a person typed (a token pasted by mistake): mask it too.
    line = " ".join(edge_sanitizer().clean(message, 2000).split())  # and keep it one line
    if "--json" in (args[: args.index("--")] if "--" in args else args):
        # One key, as scripts expect; the next actions are worded into the line.
        typer.echo(json.dumps({"error": line}), err=True)
    else:
        errors.print(f"error: {line}")
    raise SystemExit(code)
