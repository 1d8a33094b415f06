"""`cairn gc`: remove what ended jobs left behind."""

from __future__ import annotations

import typer

from cairn.cli.context import JSON_OPTION, console, print_json, session

BRANCHES_OPTION = typer.Option(
    False,
    "--branches",
    help="Also delete job branches cairn pushed that are merged into their base branch.",
)


def gc(ctx: typer.Context, branches: bool = BRANCHES_OPTION, as_json: bool = JSON_OPTION) -> None:
    """Remove workspaces of ended jobs and tidy cairn's mirrors; never touches your checkouts."""
    from cairn.jobs.gc import collect

    s = session(ctx)
    with s.store() as store:
        done = collect(store, s.config, branches=branches)
    if as_json:
        print_json(done.to_dict())
        return
    if done.workspaces:
        console.print("removed the workspaces of jobs " + ", ".join(map(str, done.workspaces)))
    if done.checkpoints:
        jobs = ", ".join(map(str, done.checkpoints))
        console.print(f"dropped the checkpoints of jobs {jobs} from the store")
    if done.mirrors:
        console.print("tidied the mirrors of rooms " + ", ".join(done.mirrors))
    for branch in done.branches:
        console.print(f"deleted branch {branch['branch']} (merged) in room {branch['room']}")
    for branch in done.kept_branches:
        console.print(
            f"kept branch {branch['branch']} in room {branch['room']}: {branch['reason']}"
        )
    if not any(done.to_dict().values()):
        console.print("nothing to remove")
