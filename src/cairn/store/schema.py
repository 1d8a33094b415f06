"""The ledgers: one store, separate tables. Alembic migrations create them; this is their map."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

from cairn.errors import StoreError
from cairn.next_action import NextAction, from_data, to_data

DAMAGED_NEXT_ACTIONS = (
    "the store is damaged: a job's next actions are not ones this cairn knows; restore the "
    "store from a backup, or upgrade cairn if a newer one wrote it"
)

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


class UTCDateTime(sa.TypeDecorator[datetime]):
    """Aware UTC timestamps on every backend, to the microsecond (decision hashes depend on it)."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("cairn stores only timezone-aware timestamps")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class NextActions(sa.TypeDecorator[tuple[NextAction, ...]]):
    """A job's next actions, stored as their JSON list; NULL (rows before 0002) reads as none."""

    impl = sa.JSON
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        return to_data(value or ())

    def process_result_value(self, value: Any, dialect: Dialect) -> tuple[NextAction, ...]:
        try:
            return from_data(value)
        except (KeyError, TypeError, ValueError, AttributeError):
            # A row no cairn wrote (or a newer cairn's action): say so, never a traceback.
            raise StoreError(DAMAGED_NEXT_ACTIONS) from None


def utcnow() -> datetime:
    """The current time, aware and in UTC."""
    return datetime.now(UTC)


def _id() -> sa.Column[int]:
    return sa.Column("id", sa.Integer, primary_key=True, autoincrement=True)


def _created() -> sa.Column[datetime]:
    return sa.Column("created_at", UTCDateTime, nullable=False)


def _job_fk(nullable: bool = False) -> sa.Column[int]:
    return sa.Column("job_id", sa.ForeignKey("jobs.id"), nullable=nullable, index=True)


# One row: which store this is, so that two stores used from one home never share a workspace.
installation = sa.Table(
    "installation",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    _created(),
)

users = sa.Table(
    "users",
    metadata,
    _id(),
    sa.Column("name", sa.String(64), nullable=False, unique=True),
    sa.Column("token_hash", sa.String(128)),
    _created(),
)

groups = sa.Table(
    "groups",
    metadata,
    _id(),
    sa.Column("name", sa.String(64), nullable=False, unique=True),
    sa.Column("policy", sa.JSON, nullable=False),
    _created(),
)

memberships = sa.Table(
    "memberships",
    metadata,
    sa.Column("group_id", sa.ForeignKey("groups.id"), primary_key=True),
    sa.Column("user_id", sa.ForeignKey("users.id"), primary_key=True),
    sa.Column("role", sa.String(16), nullable=False),
    _created(),
)

rooms = sa.Table(
    "rooms",
    metadata,
    _id(),
    sa.Column("group_id", sa.ForeignKey("groups.id"), nullable=False),
    sa.Column("name", sa.String(64), nullable=False, unique=True),
    sa.Column("repo", sa.Text, nullable=False),
    sa.Column("base_branch", sa.String(255), nullable=False),
    sa.Column("verify_command", sa.Text),
    sa.Column("scope", sa.JSON, nullable=False),
    _created(),
    # The named agent a job submitted without `--agent` uses (None: jobs must name one).
    sa.Column("default_agent", sa.String(40)),
)

# Named agent configurations, installation-wide: never an API key, only the variable's name.
agents = sa.Table(
    "agents",
    metadata,
    _id(),
    sa.Column("name", sa.String(40), nullable=False, unique=True),
    sa.Column("spec", sa.JSON, nullable=False),
    _created(),
)

# Intent and scope: written once, never updated.
requests = sa.Table(
    "requests",
    metadata,
    _id(),
    sa.Column("room_id", sa.ForeignKey("rooms.id"), nullable=False),
    sa.Column("requester_id", sa.ForeignKey("users.id"), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("agent", sa.JSON, nullable=False),
    sa.Column("scope", sa.JSON, nullable=False),
    _created(),
)

jobs = sa.Table(
    "jobs",
    metadata,
    _id(),
    sa.Column("request_id", sa.ForeignKey("requests.id"), nullable=False, unique=True),
    sa.Column("room_id", sa.ForeignKey("rooms.id"), nullable=False, index=True),
    sa.Column("retry_of", sa.ForeignKey("jobs.id")),
    sa.Column("stage", sa.String(40), nullable=False),
    sa.Column("status", sa.String(16), nullable=False, index=True),
    sa.Column("baseline", sa.String(64)),
    sa.Column("result_fingerprint", sa.String(64)),
    sa.Column("summary", sa.Text),
    sa.Column("diagnosis", sa.Text),
    # What a person can do about the state the diagnosis explains, rendered by each front end.
    sa.Column("next_actions", NextActions),
    sa.Column("lease_owner", sa.String(128)),
    sa.Column("lease_expires_at", UTCDateTime),
    sa.Column("fencing_token", sa.Integer, nullable=False, server_default="0"),
    _created(),
    sa.Column("updated_at", UTCDateTime, nullable=False),
)

# The execution ledger: one row per attempt at a stage.
stage_runs = sa.Table(
    "stage_runs",
    metadata,
    _id(),
    _job_fk(),
    sa.Column("stage", sa.String(40), nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("recipe_id", sa.String(64), nullable=False),
    sa.Column("content_id", sa.String(64)),
    sa.Column("evidence", sa.JSON),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("fencing_token", sa.Integer, nullable=False),
    sa.Column("started_at", UTCDateTime, nullable=False),
    sa.Column("ended_at", UTCDateTime),
    sa.Column("reused_at", UTCDateTime),
)

# Append-only and hash-chained: nothing updates or deletes a row.
decisions = sa.Table(
    "decisions",
    metadata,
    _id(),
    _job_fk(nullable=True),
    sa.Column("gate", sa.String(16), nullable=False),
    sa.Column("verdict", sa.String(32), nullable=False),
    sa.Column("actor", sa.String(64), nullable=False),
    sa.Column("reason", sa.Text),
    sa.Column("policy", sa.String(255)),
    sa.Column("at", UTCDateTime, nullable=False),
    sa.Column("prev_hash", sa.String(64), nullable=False, unique=True),
    sa.Column("hash", sa.String(64), nullable=False, unique=True),
)

dependency_requests = sa.Table(
    "dependency_requests",
    metadata,
    _id(),
    _job_fk(),
    sa.Column("ecosystem", sa.String(16), nullable=False),
    sa.Column("name", sa.String(214), nullable=False),
    sa.Column("version", sa.String(64), nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("decision_id", sa.ForeignKey("decisions.id")),
    _created(),
)

# Verified dependency inputs, prepared once per host: never modified once ready.
dependency_caches = sa.Table(
    "dependency_caches",
    metadata,
    _id(),
    sa.Column("fingerprint", sa.String(64), nullable=False),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("ecosystem", sa.String(16), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("audit", sa.JSON),
    sa.Column("package_count", sa.Integer),
    sa.Column("size_bytes", sa.BigInteger),
    sa.Column("content_id", sa.String(64)),
    sa.Column("diagnosis", sa.Text),
    _created(),
    sa.Column("updated_at", UTCDateTime, nullable=False),
    sa.UniqueConstraint("fingerprint", "host"),
)

effects = sa.Table(
    "effects",
    metadata,
    _id(),
    _job_fk(),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("idempotency_key", sa.String(255), nullable=False, unique=True),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("external_ref", sa.Text),
    sa.Column("intended_at", UTCDateTime, nullable=False),
    sa.Column("done_at", UTCDateTime),
)

# Job-scoped agent state, addressed only by job id.
contexts = sa.Table(
    "contexts",
    metadata,
    sa.Column("job_id", sa.ForeignKey("jobs.id"), primary_key=True),
    sa.Column("agent", sa.String(32), nullable=False),
    sa.Column("state", sa.JSON, nullable=False),
    sa.Column("session_id", sa.String(255)),
    sa.Column("updated_at", UTCDateTime, nullable=False),
)

# The job's conversation, append-only: one row per step, so saving step k costs the same at
# step 1,000 as at step 1. Keyed by job id; the unique (job_id, seq) index serves every read.
context_steps = sa.Table(
    "context_steps",
    metadata,
    _id(),
    sa.Column("job_id", sa.ForeignKey("jobs.id"), nullable=False),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("payload", sa.JSON, nullable=False),
    sa.Column("fencing_token", sa.Integer, nullable=False),
    sa.Column("at", UTCDateTime, nullable=False),
    sa.UniqueConstraint("job_id", "seq"),
)

events = sa.Table(
    "events",
    metadata,
    _id(),
    _job_fk(),
    sa.Column("stage", sa.String(40), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("at", UTCDateTime, nullable=False),
)

usage = sa.Table(
    "usage",
    metadata,
    _id(),
    _job_fk(),
    sa.Column("agent", sa.String(32), nullable=False),
    sa.Column("run_kind", sa.String(16), nullable=False),
    sa.Column("seconds", sa.Float, nullable=False),
    sa.Column("input_tokens", sa.Integer, nullable=False, server_default="0"),
    sa.Column("output_tokens", sa.Integer, nullable=False, server_default="0"),
    sa.Column("model_requests", sa.Integer, nullable=False, server_default="0"),
    sa.Column("at", UTCDateTime, nullable=False),
)

# Standing requests: each firing submits one scheduled job in the room, as its requester.
schedules = sa.Table(
    "schedules",
    metadata,
    _id(),
    sa.Column("name", sa.String(64), nullable=False, unique=True),
    sa.Column("room_id", sa.ForeignKey("rooms.id"), nullable=False),
    sa.Column("cron", sa.String(255), nullable=False),
    sa.Column("request", sa.Text, nullable=False),
    # The agent spec as `load_agent_spec` made it: an adapter and settings, never a key.
    sa.Column("agent", sa.JSON, nullable=False),
    sa.Column("requester_id", sa.ForeignKey("users.id"), nullable=False),
    _created(),
)

# One row per schedule and fire time, whichever runner got there first: the unique pair is
# what makes a firing happen once however many runners see it due. A firing that made no job
# (its requester lost access) says why.
schedule_firings = sa.Table(
    "schedule_firings",
    metadata,
    _id(),
    sa.Column("schedule_id", sa.ForeignKey("schedules.id"), nullable=False),
    sa.Column("fire_at", UTCDateTime, nullable=False),
    sa.Column("trigger", sa.String(16), nullable=False),
    sa.Column("outcome", sa.String(16), nullable=False),
    _job_fk(nullable=True),
    sa.Column("note", sa.Text),
    sa.Column("at", UTCDateTime, nullable=False),
    sa.UniqueConstraint("schedule_id", "fire_at"),
)

# Forge credentials, each encrypted (Fernet, key from CAIRN_SECRET_KEY): never held in clear.
credentials = sa.Table(
    "credentials",
    metadata,
    _id(),
    sa.Column("name", sa.String(64), nullable=False, unique=True),
    sa.Column("ciphertext", sa.Text, nullable=False),
    _created(),
    sa.Column("updated_at", UTCDateTime, nullable=False),
)

# The job's workspace after each accepted stage that changed it, so any host can rebuild it:
# a git bundle relative to the baseline, the tree it must reproduce, and the position the
# agent's context had reached then (a context is rolled back to it on another host).
checkpoints = sa.Table(
    "checkpoints",
    metadata,
    _id(),
    _job_fk(),
    sa.Column("stage", sa.String(40), nullable=False),
    sa.Column("baseline", sa.String(64), nullable=False),
    sa.Column("head", sa.String(64), nullable=False),
    sa.Column("commit", sa.String(64), nullable=False),
    sa.Column("tree", sa.String(64), nullable=False),
    sa.Column("bundle", sa.LargeBinary, nullable=False),
    sa.Column("context_state", sa.JSON),
    sa.Column("context_seq", sa.Integer, nullable=False, server_default="0"),
    sa.Column("context_step_id", sa.Integer),
    sa.Column("context_step_at", UTCDateTime),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("fencing_token", sa.Integer, nullable=False),
    _created(),
)

# Which host's disk holds the job's workspace now (one row per job, replaced on each move).
workspace_holders = sa.Table(
    "workspace_holders",
    metadata,
    sa.Column("job_id", sa.ForeignKey("jobs.id"), primary_key=True),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("at", UTCDateTime, nullable=False),
)

# The runner processes working on this store, each heard from every third of its lease: one
# not heard from for a whole lease is lost (its jobs' leases have run out too). A job whose
# workspace is on a host (`workspace_host`, as workspace_holders names it) waits briefly for
# it only while a runner of that host still beats.
runners = sa.Table(
    "runners",
    metadata,
    sa.Column("id", sa.String(128), primary_key=True),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("workspace_host", sa.String(255), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("concurrency", sa.Integer, nullable=False),
    sa.Column("lease_seconds", sa.Float, nullable=False),
    sa.Column("started_at", UTCDateTime, nullable=False),
    sa.Column("heartbeat_at", UTCDateTime, nullable=False),
)
