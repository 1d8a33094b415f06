"""A deterministic scripted model that ships with the sweep, so tests drive the real loop.

`answer(prompt)` is a pure function: it reads the question, looks for the sentence in the
document that states it, and returns the stated word. `ScriptedModel` wraps it with the
failures a real endpoint has (silence, outages, a person pressing Ctrl-C), configured per cell,
and records every prompt it was shown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

QUESTION = re.compile(r"^Question: What is (?P<subject>.+?)\?$", re.MULTILINE)
DOCUMENT = re.compile(r"<document>\n(?P<text>.*)\n</document>", re.DOTALL)
NOT_FOUND = "unknown"


class ModelUnavailable(Exception):
    """The model did not answer this time (an outage); trying again may succeed."""


def answer(prompt: str) -> str:
    """The word the document states for the question's subject, or "unknown"."""
    question, document = QUESTION.search(prompt), DOCUMENT.search(prompt)
    if question is None or document is None:
        return NOT_FOUND
    statement = re.escape(question["subject"]) + r" is (?P<word>\w+)\."
    found = re.search(statement, document["text"], re.IGNORECASE)
    return found["word"] if found else NOT_FOUND


@dataclass
class ScriptedModel:
    """The scripted model, with failures injected per cell name."""

    name: str = "scripted-needle-1"
    mute: frozenset[str] = frozenset()
    """Cells answered with an empty response: the cell's evidence is short, so it fails."""
    flaky: dict[str, int] = field(default_factory=dict)
    """Cells and how many more calls for them raise ModelUnavailable before one answers."""
    interrupt: frozenset[str] = frozenset()
    """Cells during which a person presses Ctrl-C (KeyboardInterrupt)."""
    seen: list[tuple[str, str]] = field(default_factory=list)
    """Every call as (cell, prompt), in order: exactly what the model was shown."""

    def complete(self, cell: str, prompt: str) -> str:
        """Answer `prompt`; `cell` names the request, only to aim injected failures."""
        self.seen.append((cell, prompt))
        if cell in self.interrupt:
            raise KeyboardInterrupt
        if self.flaky.get(cell, 0) > 0:
            self.flaky[cell] -= 1
            raise ModelUnavailable(f"{self.name} did not answer for {cell}")
        return "" if cell in self.mute else answer(prompt)

    @property
    def cells_called(self) -> list[str]:
        """The cells the model was called for, in order."""
        return [cell for cell, _ in self.seen]
