"""The sweep's execution ledger: the engine's `Ledger` protocol over one append-only JSONL file.

Events, one checked line each (see `jsonl`):

    {"event":"start","id":3,"stage":"cell-len400-depth0","attempt":1,"recipe_id":"9f..."}
    {"event":"finish","id":3,"status":"accepted","content_id":"c4...","evidence":{...}}
    {"event":"reused","id":3}

`runs()` folds them into one row per start, oldest first. A start whose line is unreadable
is not known, so its finish is ignored too; a finish whose line is unreadable leaves its run
`running`. Either way the engine's snapshot holds no accepted run there: the stage runs again.
One process writes a run name's ledger at a time.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from cairn.engine import Evidence, RunRecord, RunStatus
from examples.sweep import jsonl


class JsonlLedger:
    """An execution ledger in a JSONL file, every line fsynced before the engine goes on."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        events, self.unreadable = jsonl.read(path)
        self._next_id = 1 + max(
            (e["id"] for e in events if isinstance(e.get("id"), int)), default=0
        )
        self._attempts = Counter(e.get("stage") for e in events if e.get("event") == "start")

    def runs(self) -> list[dict[str, Any]]:
        """Every readable run, oldest first, as the fields the engine reads."""
        events, self.unreadable = jsonl.read(self.path)
        rows: dict[int, dict[str, Any]] = {}
        for event in events:
            kind, run = event.get("event"), event.get("id")
            if kind == "start":
                rows[run] = {
                    "id": run,
                    "stage": event.get("stage"),
                    "attempt": event.get("attempt"),
                    "recipe_id": event.get("recipe_id"),
                    "content_id": None,
                    "evidence": None,
                    "status": RunStatus.running.value,
                }
            elif kind == "finish" and run in rows:
                rows[run] |= {k: event.get(k) for k in ("status", "content_id", "evidence")}
            elif kind == "reused" and run in rows:
                rows[run]["reused"] = rows[run].get("reused", 0) + 1
        return list(rows.values())

    def start(self, stage: str, recipe_id: str) -> RunRecord:
        """Record the intent to run `stage` with this recipe, before it runs."""
        run, self._next_id = self._next_id, self._next_id + 1
        self._attempts[stage] += 1
        attempt = self._attempts[stage]
        jsonl.append(
            self.path,
            {
                "event": "start",
                "id": run,
                "stage": stage,
                "attempt": attempt,
                "recipe_id": recipe_id,
            },
        )
        return RunRecord(stage, attempt, recipe_id, None, Evidence(), RunStatus.running, ref=run)

    def finish(
        self, run: RunRecord, status: RunStatus, content_id: str | None, evidence: Evidence
    ) -> None:
        """Record what the run produced and whether it was accepted."""
        jsonl.append(
            self.path,
            {
                "event": "finish",
                "id": run.ref,
                "status": status.value,
                "content_id": content_id,
                "evidence": evidence.to_data(),
            },
        )

    def mark_reused(self, record: RunRecord) -> None:
        """Record that a later run of the sweep took this accepted run from its snapshot."""
        jsonl.append(self.path, {"event": "reused", "id": record.ref})
