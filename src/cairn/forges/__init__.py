"""Forges (GitHub, GitLab): where a job's branch becomes one pull request.

- `base`: the `Forge` protocol (five calls) and its records (`PullRequest`, `Access`, ...).
- `github`, `gitlab`: the two REST clients; `transport`: their one door to HTTP.
- `registry`: `get_forge(settings, token)`, `ForgeSettings` (a room's forge), `Delivery`.
- `credentials`: where a room's token comes from, and `askpass`, how git gets it.
"""

from cairn.forges.base import (
    Access,
    Check,
    Forge,
    PullAction,
    PullRequest,
    PullState,
    Review,
)
from cairn.forges.registry import (
    FORGES,
    Delivery,
    ForgeSettings,
    api_url,
    get_forge,
    parse_delivery,
)

__all__ = [
    "FORGES",
    "Access",
    "Check",
    "Delivery",
    "Forge",
    "ForgeSettings",
    "PullAction",
    "PullRequest",
    "PullState",
    "Review",
    "api_url",
    "get_forge",
    "parse_delivery",
]
