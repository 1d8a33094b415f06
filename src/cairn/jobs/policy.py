"""Group policy: who decides each gate, and which job kinds run without a person's approval.

Stored as JSON on the group, for example::

    {"run_approval": "auto", "auto_approve_kinds": ["scheduled"],
     "dependency_approval": "admin", "integration": "admin"}

- `run_approval`: `admin` (an admin other than the requester approves every run) or `auto`
  (runs of the kinds in `auto_approve_kinds` are approved by the policy itself, recorded as an
  `auto` decision naming the policy; every other kind still waits for an admin).
- `dependency_approval`: `admin`, or `member` (any member of the group may decide).
- `integration`: `admin`, the only value: a member never decides the final result.
"""

from __future__ import annotations

import dataclasses
from enum import StrEnum
from typing import Any

import sqlalchemy as sa

from cairn.errors import NotAllowed, UsageError
from cairn.sanitize import Sanitizer
from cairn.stages import Gate, Verdict
from cairn.store import decisions
from cairn.store import identity as ledger
from cairn.store.records import Decision, Group, Role


class Approval(StrEnum):
    """Who decides a gate under a group's policy."""

    admin = "admin"
    """An admin of the group (for a run, one other than its requester)."""
    member = "member"
    """Any member of the group (dependency requests only)."""
    auto = "auto"
    """The policy itself, for the job kinds it names (runs only)."""


JOB_KINDS = ("interactive", "scheduled")
RUN_APPROVALS = (Approval.admin, Approval.auto)
DEPENDENCY_APPROVALS = (Approval.admin, Approval.member)
INTEGRATIONS = (Approval.admin,)
POLICY_GATE = Gate.policy.value
"""The gate name of a policy change in the decision ledger (its job is NULL)."""
_DEFAULT_AUTO_KINDS = ("scheduled",)
REASON_LIMIT = 1000
"""A decision's reason is stored masked and bounded: people read the ledger too."""


@dataclasses.dataclass(frozen=True)
class GroupPolicy:
    """A group's policy, validated; `describe()` is how decisions name it."""

    run_approval: Approval = Approval.admin
    auto_approve_kinds: tuple[str, ...] = ()
    dependency_approval: Approval = Approval.admin
    integration: Approval = Approval.admin

    def __post_init__(self) -> None:
        # Built in code as GroupPolicy(dependency_approval="member") as well.
        for name in ("run_approval", "dependency_approval", "integration"):
            object.__setattr__(self, name, Approval(getattr(self, name)))

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> GroupPolicy:
        """A policy from its JSON form; a value cairn does not know is a UsageError."""
        return cls._read(raw, strict=True)

    @classmethod
    def of(cls, group: Group) -> GroupPolicy:
        """The policy a group's stored JSON means; a value cairn cannot read means the strictest."""
        return cls._read(group.policy, strict=False)

    @classmethod
    def _read(cls, raw: Any, *, strict: bool) -> GroupPolicy:
        if not isinstance(raw, dict):
            if strict:
                raise UsageError("a group policy is a JSON object of settings")
            raw = {}

        def pick(key: str, allowed: tuple[Approval, ...]) -> Approval:
            value = raw.get(key, allowed[0])
            if value in allowed:
                return Approval(value)
            if strict:
                raise UsageError(
                    f"{key} (--{key.replace('_', '-')}) must be one of {', '.join(allowed)}, "
                    f"not {value!r}"
                )
            return allowed[0]

        run = pick("run_approval", RUN_APPROVALS)
        kinds = _auto_kinds(raw.get("auto_approve_kinds"), run, strict=strict)
        return cls(
            run_approval=run if kinds else Approval.admin,
            auto_approve_kinds=kinds,
            dependency_approval=pick("dependency_approval", DEPENDENCY_APPROVALS),
            integration=pick("integration", INTEGRATIONS),
        )

    def to_dict(self) -> dict[str, Any]:
        """The policy's JSON form, as stored on the group."""
        return {
            "run_approval": self.run_approval.value,
            "auto_approve_kinds": list(self.auto_approve_kinds),
            "dependency_approval": self.dependency_approval.value,
            "integration": self.integration.value,
        }

    def describe(self) -> str:
        """One line naming every setting, e.g. `run_approval=auto(scheduled) ...`."""
        run = self.run_approval.value
        if self.run_approval is Approval.auto:
            run += f"({','.join(self.auto_approve_kinds)})"
        return (
            f"run_approval={run} dependency_approval={self.dependency_approval} "
            f"integration={self.integration}"
        )

    def auto_approves(self, kind: str) -> bool:
        """Whether a run of this kind is approved by the policy itself."""
        return self.run_approval is Approval.auto and kind in self.auto_approve_kinds


def policy_label(group: Group, policy: GroupPolicy | None = None) -> str:
    """How a decision names the policy it relied on."""
    return f"group {group.name}: {(policy or GroupPolicy.of(group)).describe()}"


def change_policy(
    conn: sa.Connection,
    group_name: str,
    actor: str,
    changes: dict[str, Any],
    reason: str | None = None,
) -> tuple[Group, Decision | None]:
    """Change some settings of a group's policy; an admin of the group only, and a decision."""
    group = ledger.get_group(conn, group_name)
    require_group_admin(conn, group, actor, "change its policy")
    old = GroupPolicy.of(group)
    merged = old.to_dict() | {k: v for k, v in changes.items() if v is not None}
    if changes.get("run_approval") == Approval.admin:
        merged["auto_approve_kinds"] = []
    elif changes.get("run_approval") == Approval.auto and not changes.get("auto_approve_kinds"):
        merged["auto_approve_kinds"] = list(old.auto_approve_kinds or _DEFAULT_AUTO_KINDS)
    new = GroupPolicy.parse(merged)
    if new == old:
        return group, None
    group = ledger.set_policy(conn, group.id, new.to_dict())
    before = f"before: {old.describe()}"
    if reason and reason.strip():
        before = Sanitizer().clean(f"{before}; {reason.strip()}", REASON_LIMIT)
    decision = decisions.append(
        conn,
        job_id=None,
        gate=Gate.policy,
        verdict=Verdict.changed,
        actor=actor,
        reason=before,
        policy=policy_label(group, new),
    )
    return group, decision


def require_group_admin(conn: sa.Connection, group: Group, actor: str, what: str) -> None:
    """Refuse unless `actor` is an admin of `group`."""
    user = ledger.get_user(conn, actor)
    found = ledger.membership(conn, group.id, user.id)
    if found is None or found.role is not Role.admin:
        raise NotAllowed(
            f"only an admin of group {group.name} can {what}; {actor} is "
            f"{'a member' if found else 'not a member'} of it"
        )


def require_an_admin(conn: sa.Connection, actor: str, what: str) -> None:
    """Refuse unless `actor` is an admin of some group: for what serves every group."""
    user = ledger.get_user(conn, actor)
    if not any(role == Role.admin for _, role in ledger.memberships_of(conn, user.id)):
        raise NotAllowed(f"only an admin of a group can {what}; {actor} is not one")


def _auto_kinds(raw: Any, run: Approval, *, strict: bool) -> tuple[str, ...]:
    """The kinds `run_approval=auto` covers (none for `admin`); by default, scheduled jobs."""
    if raw is None:
        raw = list(_DEFAULT_AUTO_KINDS) if run is Approval.auto else []
    listed = raw if isinstance(raw, list | tuple) else [raw]
    known = tuple(sorted({k for k in listed if k in JOB_KINDS}))
    if not strict:
        return known if run is Approval.auto else ()
    unknown = [k for k in listed if k not in JOB_KINDS]
    if unknown or not isinstance(raw, list | tuple):
        raise UsageError(
            f"auto_approve_kinds (--auto-kinds) lists job kinds: {', '.join(JOB_KINDS)}"
        )
    if run is Approval.admin and known:
        raise UsageError(
            "auto_approve_kinds (--auto-kinds) applies only with run_approval=auto; "
            "pass --run-approval auto too"
        )
    if run is Approval.auto and not known:
        raise UsageError(
            "run_approval=auto needs the job kinds it approves: pass --auto-kinds scheduled"
        )
    return known
