"""cairn's HTTP API: `create_app(config)` builds it; `cairn serve` runs it under Uvicorn.

Every route but `GET /api/health` acts as the user whose bearer token it carries, through the
same use-case functions the CLI calls, so both front ends share one authority code path.
"""

from cairn.api.app import create_app

__all__ = ["create_app"]
