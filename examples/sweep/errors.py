"""Every error the sweep raises on purpose.

SweepError                 each message says what happened and what to do
├── PlanError              the grid or run name cannot be swept as given
├── RecipeChanged          the run name already holds results for a different recipe
└── Unreproducible         a stored recipe can no longer be rebuilt byte for byte
"""

from __future__ import annotations


class SweepError(Exception):
    """Root of every error the sweep raises on purpose."""


class PlanError(SweepError):
    pass


class RecipeChanged(SweepError):
    pass


class Unreproducible(SweepError):
    pass
