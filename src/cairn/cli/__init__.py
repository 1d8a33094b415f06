"""The `cairn` command line: Typer commands over the library, errors as one clear line."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
import typer

from cairn.cli import (
    authority_commands,
    cache_commands,
    gate_commands,
    gc_commands,
    job_commands,
    setup_commands,
)
from cairn.cli.context import Session, errors
from cairn.cli.demo import demo
from cairn.config import Config
from cairn.errors import CairnError
from cairn.sanitize import edge_sanitizer

app = typer.Typer(
    name="cairn",
    help="Resumable AI coding jobs against git repositories.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
audit_app = typer.Typer(help="Check the decision ledger.", no_args_is_help=True)


@app.callback()
def _root(
    ctx: typer.Context,
    home: Path | None = typer.Option(
        None,
        "--home",
        help="Where cairn keeps its state (default: CAIRN_HOME, else a per-user dir).",
    ),
) -> None:
    ctx.obj = Session(Config.from_env(home=home))


app.command()(setup_commands.init)
app.add_typer(authority_commands.user_app, name="user")
app.add_typer(authority_commands.group_app, name="group")
app.add_typer(setup_commands.room_app, name="room")
app.add_typer(cache_commands.cache_app, name="cache")
for command in (
    job_commands.submit,
    job_commands.run,
    job_commands.work,
    job_commands.jobs,
    job_commands.show,
    # The decisions live with the authority rules that govern them (gate_commands), not here.
    gate_commands.approve,
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


def main() -> None:
    """Entry point: exit 0 on success, 2 on a usage error, 1 on anything else."""
    try:
        app()
    except CairnError as exc:
        # An error may quote what a person typed (a token pasted by mistake): mask it too.
        errors.print(f"error: {edge_sanitizer().clean(str(exc), 2000)}")
        raise SystemExit(exc.exit_code) from None
    except OSError as exc:
        # The message names what failed, never the file: paths stay out of what users see.
        errors.print(
            f"error: {exc.strerror or 'a file operation failed'}; check --home / CAIRN_HOME"
        )
        raise SystemExit(1) from None
    except sa.exc.SQLAlchemyError as exc:
        errors.print(
            f"error: the store refused an operation ({type(exc).__name__}); "
            "check CAIRN_DATABASE_URL and that the database is up, then try again"
        )
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        errors.print("interrupted; jobs in flight resume from their last recorded stage")
        raise SystemExit(130) from None
