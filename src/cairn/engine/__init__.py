"""A small library for resumable work: recipes, content identities, evidence, reuse, effects.

It knows nothing of code jobs, agents, git or HTTP: the code-job workflow is one user of it,
`examples/sweep` is another.
"""

from cairn.engine.driver import Engine, Report, stage_recipe
from cairn.engine.effects import (
    EffectLedger,
    EffectState,
    EffectStatus,
    MemoryEffects,
    Undecidable,
    perform,
)
from cairn.engine.evidence import Evidence, Expect, Measurement
from cairn.engine.faults import NO_FAULTS, Faults
from cairn.engine.identity import canonical_json, digest, recipe_id
from cairn.engine.ledger import Ledger, MemoryLedger, RunRecord, RunStatus, Snapshot, read_record
from cairn.engine.workflow import (
    EvidenceShort,
    Pause,
    Result,
    Retry,
    StageDef,
    StageFailed,
    Upstream,
    Workflow,
)

__all__ = [
    "NO_FAULTS",
    "EffectLedger",
    "EffectState",
    "EffectStatus",
    "Engine",
    "Evidence",
    "EvidenceShort",
    "Expect",
    "Faults",
    "Ledger",
    "Measurement",
    "MemoryEffects",
    "MemoryLedger",
    "Pause",
    "Report",
    "Result",
    "Retry",
    "RunRecord",
    "RunStatus",
    "Snapshot",
    "StageDef",
    "StageFailed",
    "Undecidable",
    "Upstream",
    "Workflow",
    "canonical_json",
    "digest",
    "perform",
    "read_record",
    "recipe_id",
    "stage_recipe",
]
