"""The sweep's execution ledger: the engine's `Ledger` protocol over one append-only JSONL file.

Events, one checked line each (see `jsonl`):

    {"event":"start","id":3,"stage":"cell-len400-depth0","attempt":1,"recipe_id":"9f..."}
    {"event":"finish","id":3,"status":"accepted","content_id":"c4...","evidence":{...}}
    {"event":"record","id":4,"stage":"report","attempt":1,"recipe_id":"7a...",
     "status":"accepted","content_id":"e1...","evidence":{...}}
    {"event":"reused","ids":[3,4]}

`record` is a start and its finish in one line (an effect-free stage), and `reused` marks a
drive's reused runs in one line, so each is all or none; `{"event":"reused","id":3}`, one run
per line, is what earlier sweeps wrote. `runs()` folds them into one row per start, oldest
first. A start whose line is unreadable
is not known, so its finish is ignored too; a finish whose line is unreadable leaves its run
`running`. Either way the engine's snapshot holds no accepted run there: the stage runs again.
One process writes a run name's ledger at a time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
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
        self._attempts = Counter(
            e.get("stage") for e in events if e.get("event") in ("start", "record")
        )

    def runs(self) -> list[dict[str, Any]]:
        """Every readable run, oldest first, as the fields the engine reads."""
        events, self.unreadable = jsonl.read(self.path)
        rows: dict[int, dict[str, Any]] = {}
        for event in events:
            kind, run = event.get("event"), event.get("id")
            if kind in ("start", "record"):
                rows[run] = {
                    "id": run,
                    "stage": event.get("stage"),
                    "attempt": event.get("attempt"),
                    "recipe_id": event.get("recipe_id"),
                    "content_id": None,
                    "evidence": None,
                    "status": RunStatus.running.value,
                }
            if kind in ("finish", "record") and run in rows:
                rows[run] |= {k: event.get(k) for k in ("status", "content_id", "evidence")}
            elif kind == "reused":
                ids = event.get("ids") if "ids" in event else [run]
                for reused in ids if isinstance(ids, list) else []:
                    if reused in rows:
                        rows[reused]["reused"] = rows[reused].get("reused", 0) + 1
        return list(rows.values())

    def start(self, stage: str, recipe_id: str) -> RunRecord:
        """Record the intent to run `stage` with this recipe, before it runs."""
        run, attempt = self._next(stage)
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

    def record(
        self,
        stage: str,
        recipe_id: str,
        status: RunStatus,
        content_id: str | None,
        evidence: Evidence,
    ) -> RunRecord:
        """Record an effect-free stage's recipe and outcome in one checked line."""
        run, attempt = self._next(stage)
        jsonl.append(
            self.path,
            {
                "event": "record",
                "id": run,
                "stage": stage,
                "attempt": attempt,
                "recipe_id": recipe_id,
                "status": status.value,
                "content_id": content_id,
                "evidence": evidence.to_data(),
            },
        )
        return RunRecord(stage, attempt, recipe_id, content_id, evidence, status, ref=run)

    def mark_reused(self, records: Sequence[RunRecord]) -> None:
        """Record that a later run of the sweep took these accepted runs from its snapshot."""
        jsonl.append(self.path, {"event": "reused", "ids": [record.ref for record in records]})

    def _next(self, stage: str) -> tuple[int, int]:
        """A new run's id and its attempt number at `stage`."""
        run, self._next_id = self._next_id, self._next_id + 1
        self._attempts[stage] += 1
        return run, self._attempts[stage]
