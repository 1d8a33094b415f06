"""The ledgers: SQLAlchemy Core tables, Alembic migrations, and one function module per ledger."""

from cairn.store.store import Store

__all__ = ["Store"]
