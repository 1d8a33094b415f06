"""Fault injection, a testing aid: make a runner die at named points, as a SIGKILL would.

`CAIRN_FAULTS` holds comma-separated rules, read only by the runner's entry point:

    crash:after_intent:push          die after an effect's intent is recorded, before it acts
    crash:after_effect:push          die after an effect acted, before it is recorded done
    crash:before_accept:verifying    die after a stage ran, before its result is recorded
    crash:after_accept:running_agent die right after a stage's result was accepted
    crash:before_reuse:verifying     die once a stage is found reusable, before it is marked
    crash:after_reuse:verifying      die right after the reused stages up to this one were
                                     marked (in one write)
    crash:random:0.05:SEED           die at any point with probability 0.05 (seeded)
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from cairn.errors import UsageError

POINTS = (
    "after_start",
    "before_accept",
    "after_accept",
    "before_reuse",
    "after_reuse",
    "after_intent",
    "after_effect",
)
EXIT_CODE = 137


@dataclass
class Faults:
    """The crash rules in force; `point()` is called at every named point."""

    exact: frozenset[tuple[str, str]] = frozenset()
    chance: float = 0.0
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    die: Callable[[int], None] = os._exit

    @classmethod
    def parse(cls, text: str | None) -> Faults:
        """Parse CAIRN_FAULTS; an empty value means no faults."""
        faults = cls()
        for rule in filter(None, (part.strip() for part in (text or "").split(","))):
            parts = rule.split(":")
            if len(parts) == 3 and parts[0] == "crash" and parts[1] in POINTS:
                faults.exact = faults.exact | {(parts[1], parts[2])}
            elif len(parts) == 4 and parts[:2] == ["crash", "random"]:
                faults.chance, faults.rng = _chance(parts[2]), random.Random(parts[3])
            else:
                raise UsageError(
                    f"CAIRN_FAULTS rule {rule!r} is not understood; use crash:POINT:NAME with "
                    f"POINT one of {', '.join(POINTS)}, or crash:random:P:SEED"
                )
        return faults

    def point(self, where: str, name: str) -> None:
        """Die here if a rule says so."""
        if (where, name) in self.exact or (self.chance and self.rng.random() < self.chance):
            self.die(EXIT_CODE)


def _chance(text: str) -> float:
    try:
        chance = float(text)
    except ValueError:
        chance = -1.0
    if not 0.0 < chance <= 1.0:
        raise UsageError("crash:random:P:SEED needs P between 0 and 1, for example 0.05")
    return chance


NO_FAULTS = Faults()
