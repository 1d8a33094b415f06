"""A needle-in-a-haystack evaluation sweep on `cairn.engine`: recipes stored, prompts rebuilt."""

from examples.sweep.errors import PlanError, RecipeChanged, SweepError, Unreproducible
from examples.sweep.haystack import reconstruct
from examples.sweep.ledger import JsonlLedger
from examples.sweep.model import ModelUnavailable, ScriptedModel, answer
from examples.sweep.plan import Cell, Needle, SweepPlan, cell_name, cells
from examples.sweep.sweep import REPORT, SweepOutcome, run_sweep, stored_recipe

__all__ = [
    "REPORT",
    "Cell",
    "JsonlLedger",
    "ModelUnavailable",
    "Needle",
    "PlanError",
    "RecipeChanged",
    "ScriptedModel",
    "SweepError",
    "SweepOutcome",
    "SweepPlan",
    "Unreproducible",
    "answer",
    "cell_name",
    "cells",
    "reconstruct",
    "run_sweep",
    "stored_recipe",
]
