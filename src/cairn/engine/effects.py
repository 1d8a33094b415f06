"""Effects outside the ledgers, never repeated silently: intent first, inspection, then done."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from cairn.engine.faults import NO_FAULTS, Faults
from cairn.errors import CairnError


class EffectStatus(StrEnum):
    """Where an effect stands: its intent is always recorded before it acts."""

    intended = "intended"
    """Recorded before acting; the outside world decides whether it happened (inspection)."""
    done = "done"
    """It happened; `external_ref` names it outside (a commit, a pull request)."""
    failed = "failed"
    """Acting produced nothing; it may be intended again and retried."""


class Undecidable(CairnError):
    """Inspection could not tell whether an intended effect happened: a person must look."""


@dataclass(frozen=True)
class EffectState:
    """An effect as its ledger holds it."""

    status: EffectStatus
    external_ref: str | None


class EffectLedger(Protocol):
    """Where effects are recorded (cairn's effects table, or memory)."""

    def begin(self, kind: str, key: str) -> EffectState:
        """Record the intent (once per key); return the effect's state as it stands."""
        ...

    def done(
        self, key: str, external_ref: str | None, status: EffectStatus = EffectStatus.done
    ) -> None:
        """Record the effect done (or failed, or intended again), with its outside name."""
        ...


Inspect = Callable[[], str | None]
"""Look at the outside world: the effect's reference if it already happened, else None;
raise Undecidable when the world cannot tell."""


def perform(
    ledger: EffectLedger,
    kind: str,
    key: str,
    *,
    inspect: Inspect,
    act: Callable[[], str | None],
    faults: Faults = NO_FAULTS,
) -> str | None:
    """Perform an effect at most once; a None reference from `act` records it as failed.

    A failed effect may be performed again later: first recorded as intended again, so a
    crash during the new attempt is reconciled like any other intent.
    """
    state = ledger.begin(kind, key)
    if state.status == EffectStatus.done:
        return state.external_ref
    if state.status == EffectStatus.failed:
        ledger.done(key, None, EffectStatus.intended)
    faults.point("after_intent", kind)
    # Inspected even on a first attempt: an earlier process may have acted, then died.
    reference = inspect()
    if reference is None:
        reference = act()
        faults.point("after_effect", kind)
    ledger.done(key, reference, EffectStatus.done if reference is not None else EffectStatus.failed)
    return reference


class MemoryEffects:
    """An effect ledger in memory, for tests and throwaway workflows."""

    def __init__(self) -> None:
        self.effects: dict[str, tuple[str, EffectState]] = {}

    def begin(self, kind: str, key: str) -> EffectState:
        if key not in self.effects:
            self.effects[key] = (kind, EffectState(EffectStatus.intended, None))
        return self.effects[key][1]

    def done(
        self, key: str, external_ref: str | None, status: EffectStatus = EffectStatus.done
    ) -> None:
        kind, _ = self.effects[key]
        self.effects[key] = (kind, EffectState(status, external_ref))
