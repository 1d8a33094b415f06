"""Users, groups, memberships and group policy: who may decide what."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import typer

from cairn.cli.context import (
    AS_OPTION,
    JOB_OPTION,
    JSON_OPTION,
    command_group,
    console,
    print_json,
    session,
)

user_app = command_group("Manage users and their API tokens.")
group_app = command_group("Manage groups, their members and their policy.")
member_app = command_group("Add people to a group or take them out.")
group_app.add_typer(member_app, name="member")

RUN_APPROVAL = typer.Option(
    None,
    "--run-approval",
    help="admin: an admin other than the requester approves each run; "
    "auto: runs of the --auto-kinds kinds need no person.",
)
AUTO_KINDS = typer.Option(
    None,
    "--auto-kinds",
    help="Job kinds run_approval=auto approves, comma-separated "
    "(interactive, scheduled; default: scheduled).",
)
DEPENDENCY_APPROVAL = typer.Option(
    None, "--dependency-approval", help="admin, or member: who decides a dependency request."
)
INTEGRATION = typer.Option(None, "--integration", help="admin (the only choice).")
TOKEN_NOTE = "API token for {name}, shown this once (`cairn user token {name}` replaces it):"


def policy_settings(
    run: str | None, kinds: str | None, dependency: str | None, integration: str | None
) -> dict[str, Any]:
    """The policy settings given on the command line, as JSON keys (unset ones left out)."""
    given: dict[str, Any] = {
        "run_approval": run,
        "auto_approve_kinds": [k.strip() for k in kinds.split(",") if k.strip()] if kinds else None,
        "dependency_approval": dependency,
        "integration": integration,
    }
    return {key: value for key, value in given.items() if value is not None}


@user_app.command("add")
def user_add(
    ctx: typer.Context,
    name: str,
    admin: bool = typer.Option(False, "--admin", help="Make the user an admin of the group."),
    group: str = typer.Option("default", "--group", help="The group to add the user to."),
    as_user: str | None = AS_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Add a user to a group (an admin of it decides) and print their API token once."""
    from cairn.jobs import people

    s = session(ctx)
    role = "admin" if admin else "member"
    remote = s.client(as_user)
    if remote is not None:
        made = remote.post("/api/users", {"name": name, "group": group, "role": role})
        name, token = str(made["name"]), str(made["token"])
    else:
        with s.store() as store, store.begin() as conn:
            user, token = people.create_user(conn, name, s.actor(as_user), group=group, role=role)
        name = user.name  # the canonical (case-folded) name is the one to use from now on
    if as_json:
        print_json({"name": name, "group": group, "role": role, "token": token})
        return
    console.print(f"user {name} added to group {group} as {role}")
    console.print(TOKEN_NOTE.format(name=name))
    console.print(token)


@user_app.command("token")
def user_token(
    ctx: typer.Context, name: str, as_user: str | None = AS_OPTION, as_json: bool = JSON_OPTION
) -> None:
    """Give a user a new API token (the old one stops working) and print it once."""
    from cairn.jobs import people

    s = session(ctx)
    remote = s.client(as_user)
    if remote is not None:
        token = str(remote.post(f"/api/users/{quote(name, safe='')}/token")["token"])
    else:
        with s.store() as store, store.begin() as conn:
            token = people.rotate_token(conn, name, s.actor(as_user))
    if as_json:
        print_json({"name": name, "token": token})
        return
    console.print(TOKEN_NOTE.format(name=name))
    console.print(token)


@user_app.command("list")
def user_list(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """List users, their groups and roles, and whether they hold an API token."""
    from cairn.jobs import people

    remote = session(ctx).client()
    if remote is not None:
        rows: list[dict[str, Any]] = list(remote.get("/api/users"))
    else:
        with session(ctx).store() as store, store.begin() as conn:
            rows = people.user_rows(conn)
    if as_json:
        print_json(rows)
        return
    for row in rows:
        groups = ", ".join(f"{g} ({role})" for g, role in row["groups"].items()) or "no group"
        console.print(f"{row['name']:<16} {groups}{'' if row['has_token'] else '  (no token)'}")


@group_app.command("add")
def group_add(
    ctx: typer.Context,
    name: str,
    run: str | None = RUN_APPROVAL,
    kinds: str | None = AUTO_KINDS,
    dependency: str | None = DEPENDENCY_APPROVAL,
    integration: str | None = INTEGRATION,
    as_user: str | None = AS_OPTION,
) -> None:
    """Create a group with you as its first admin (strict policy unless options say otherwise)."""
    from cairn.jobs import people
    from cairn.jobs.policy import GroupPolicy

    s = session(ctx)
    settings = policy_settings(run, kinds, dependency, integration)
    policy = GroupPolicy.parse(settings)
    remote = s.client(as_user)
    if remote is not None:
        made = remote.post("/api/groups", {"name": name, "policy": settings})
        admin = str(made["members"][0]["name"])
    else:
        with s.store() as store, store.begin() as conn:
            people.create_group(conn, name, s.actor(as_user), policy)
        admin = s.actor(as_user)
    console.print(f"group {name} created with admin {admin}: {policy.describe()}")


@group_app.command("list")
def group_list(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """List groups with their policy and size."""
    from cairn.jobs import people
    from cairn.store import identity

    remote = session(ctx).client()
    if remote is not None:
        rows = list(remote.get("/api/groups"))  # the groups the token's user is in
    else:
        with session(ctx).store() as store, store.begin() as conn:
            rows = [people.describe_group(conn, g) for g in identity.list_groups(conn)]
    if as_json:
        print_json(rows)
        return
    for row in rows:
        console.print(f"{row['name']:<16} {len(row['members'])} members  {row['policy_text']}")


@group_app.command("show")
def group_show(ctx: typer.Context, name: str, as_json: bool = JSON_OPTION) -> None:
    """Show a group: its policy, members with their roles, and rooms."""
    from cairn.jobs import people
    from cairn.store import identity

    remote = session(ctx).client()
    if remote is not None:
        row = remote.get(f"/api/groups/{quote(name, safe='')}")
    else:
        with session(ctx).store() as store, store.begin() as conn:
            row = people.describe_group(conn, identity.get_group(conn, name))
    if as_json:
        print_json(row)
        return
    console.print(f"group {row['name']}: {row['policy_text']}", style="bold")
    for member in row["members"]:
        console.print(f"  {member['name']:<16} {member['role']}")
    for room in row["rooms"]:
        console.print(f"  room {room}")


@group_app.command("policy")
def group_policy(
    ctx: typer.Context,
    name: str,
    run: str | None = RUN_APPROVAL,
    kinds: str | None = AUTO_KINDS,
    dependency: str | None = DEPENDENCY_APPROVAL,
    integration: str | None = INTEGRATION,
    reason: str | None = typer.Option(None, "--reason", help="Why (recorded with the change)."),
    as_user: str | None = AS_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Show a group's policy, or change it (an admin of the group; every change is a decision)."""
    from cairn.jobs.policy import GroupPolicy, change_policy
    from cairn.store import identity

    s = session(ctx)
    settings = policy_settings(run, kinds, dependency, integration)
    remote = s.client(as_user)
    if remote is not None and not settings:
        before = after = GroupPolicy.parse(
            remote.get(f"/api/groups/{quote(name, safe='')}")["policy"]
        )
        decision_id = None
    elif remote is not None:
        path = f"/api/groups/{quote(name, safe='')}/policy"
        changed = remote.post(path, {"settings": settings, "reason": reason})
        before = GroupPolicy.parse(changed["before"])
        after = GroupPolicy.parse(changed["policy"])
        decision_id = changed["decision"]
    else:
        with s.store() as store, store.begin() as conn:
            before = GroupPolicy.of(identity.get_group(conn, name))
            decision = None
            if settings:
                group, decision = change_policy(conn, name, s.actor(as_user), settings, reason)
                after = GroupPolicy.of(group)
            else:
                after = before
        decision_id = decision.id if decision else None
    if as_json:
        print_json(after.to_dict() | {"decision": decision_id})
    elif not settings:
        console.print(f"group {name}: {after.describe()}")
    elif decision_id is None:
        console.print(f"group {name} already has that policy; nothing changed")
    else:
        console.print(f"group {name}: {after.describe()} (was {before.describe()})")


@member_app.command("add")
def member_add(
    ctx: typer.Context,
    group: str,
    name: str,
    admin: bool = typer.Option(False, "--admin", help="As an admin (default: member)."),
    as_user: str | None = AS_OPTION,
) -> None:
    """Add an existing user to a group, or change their role in it."""
    from cairn.jobs import people

    s = session(ctx)
    role = "admin" if admin else "member"
    remote = s.client(as_user)
    if remote is not None:
        path = f"/api/groups/{quote(group, safe='')}/members"
        before = remote.post(path, {"name": name, "role": role})["before"]
    else:
        with s.store() as store, store.begin() as conn:
            _, before = people.add_member(conn, group, name, s.actor(as_user), role)
    as_role = f"an {role}" if role == "admin" else f"a {role}"
    if before is None:
        console.print(f"{name} is now {as_role} of group {group}")
    elif before == role:
        console.print(f"{name} already is {as_role} of group {group}; nothing changed")
    else:
        console.print(f"{name} is now {as_role} of group {group} (was {before})")


@member_app.command("remove")
def member_remove(
    ctx: typer.Context, group: str, name: str, as_user: str | None = AS_OPTION
) -> None:
    """Take a user out of a group; their jobs there block at their next gate or resume."""
    from cairn.jobs import people

    s = session(ctx)
    remote = s.client(as_user)
    if remote is not None:
        remote.delete(f"/api/groups/{quote(group, safe='')}/members/{quote(name, safe='')}")
    else:
        with s.store() as store, store.begin() as conn:
            people.remove_member(conn, group, name, s.actor(as_user))
    console.print(f"{name} is no longer in group {group}")


def audit_log(
    ctx: typer.Context,
    job: int | None = JOB_OPTION,
    policy_only: bool = typer.Option(False, "--policy", help="Only group policy changes."),
    as_json: bool = JSON_OPTION,
) -> None:
    """List decisions, oldest first: gate decisions on jobs and group policy changes."""
    from cairn.jobs.decision_log import decision_rows

    remote = session(ctx).client()
    if remote is not None:
        params = {"job": job, "policy": "true" if policy_only else None}
        rows = list(remote.get("/api/audit/log", params))
    else:
        with session(ctx).store() as store, store.begin() as conn:
            rows = decision_rows(conn, job=job, policy_only=policy_only)
    if as_json:
        print_json(rows)
        return
    for row in rows:
        where = f"job {row['job']}" if row["job"] is not None else "group policy"
        why = f": {row['reason']}" if row["reason"] else ""
        console.print(
            f"{row['id']:>4}  {row['at'][:19]}  {where:<14} {row['gate']} {row['verdict']} "
            f"by {row['actor']}{why}"
        )
        if row["policy"]:
            console.print(f"      under {row['policy']}")
