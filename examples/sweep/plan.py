"""What a sweep asks for: the grid, and each cell's recipe (what is stored instead of a prompt)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from examples.sweep.errors import PlanError
from examples.sweep.haystack import CORPUS_WORDS, TEMPLATES, corpus_identity, template_identity

RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass(frozen=True)
class Needle:
    """The planted sentence, the question it answers, and the expected answer."""

    text: str = "The secret ingredient in the harbor soup is saffron."
    question: str = "What is the secret ingredient in the harbor soup?"
    answer: str = "saffron"


@dataclass(frozen=True)
class SweepPlan:
    """A sweep: prompt lengths (words) x needle depths (percent), against one model."""

    run_name: str
    lengths: tuple[int, ...] = (200, 400, 800)
    depths: tuple[int, ...] = (0, 50, 100)
    model: str = "scripted-needle-1"
    template: str = "v1"
    corpus_seed: int = 7
    needle: Needle = field(default_factory=Needle)
    retries: int = 2
    """Extra attempts after an outage, within one run; not part of any recipe."""

    def __post_init__(self) -> None:
        if not RUN_NAME.fullmatch(self.run_name):
            raise PlanError(
                f"run name {self.run_name!r} is not usable; use letters, digits, '.', '_' or '-'"
            )
        if not self.lengths or any(not 0 < n <= CORPUS_WORDS for n in self.lengths):
            raise PlanError(f"lengths must be between 1 and {CORPUS_WORDS} words")
        if not self.depths or any(not 0 <= d <= 100 for d in self.depths):
            raise PlanError("depths must be percentages between 0 and 100")
        if len(set(self.lengths)) != len(self.lengths) or len(set(self.depths)) != len(self.depths):
            raise PlanError("lengths and depths must not repeat")
        if self.retries < 0:
            raise PlanError("retries must be 0 or more")
        if self.template not in TEMPLATES:
            raise PlanError(
                f"template {self.template!r} is unknown; templates are {', '.join(TEMPLATES)}"
            )


@dataclass(frozen=True)
class Cell:
    """One grid cell: its stable stage name and its recipe."""

    name: str
    recipe: dict[str, Any]


def cell_name(length: int, depth: int) -> str:
    """The stable stage name of a cell, for example `cell-len800-depth50`."""
    return f"cell-len{length}-depth{depth}"


def cells(plan: SweepPlan) -> list[Cell]:
    """The plan's cells in order (lengths, then depths), each with its full recipe."""
    haystack_source = corpus_identity(plan.corpus_seed)
    template = template_identity(plan.template)
    needle = {"text": plan.needle.text, "question": plan.needle.question}
    return [
        Cell(
            cell_name(length, depth),
            {
                "run": plan.run_name,
                "haystack": haystack_source,
                "length": length,
                "depth": depth,
                "needle": needle | {"answer": plan.needle.answer},
                "model": plan.model,
                "template": template,
            },
        )
        for length in plan.lengths
        for depth in plan.depths
    ]
