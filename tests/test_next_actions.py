"""Next actions: structured below the CLI, worded by the CLI in one place."""

from __future__ import annotations

import pytest

from cairn.cli.next_steps import command, diagnosis, with_next
from cairn.errors import NotFound
from cairn.next_action import Action, NextAction, from_data, to_data


def test_every_action_round_trips_through_its_json_form_and_has_cli_words() -> None:
    for action in Action:
        step = NextAction(action, job=3, group="team")
        assert NextAction.from_data(step.to_data()) == step
        assert command(step).startswith("`cairn ") and with_next("x", [step]) != "x"


def test_the_json_form_holds_only_the_fields_that_are_set() -> None:
    steps = (NextAction(Action.resume, job=3), NextAction(Action.list_jobs))
    assert to_data(steps) == [{"action": "resume", "job": 3}, {"action": "list_jobs"}]
    assert from_data(to_data(steps)) == steps and from_data(None) == ()
    with pytest.raises(ValueError):
        NextAction.from_data({"action": "no_such_action"})


def test_the_cli_words_a_diagnosis_and_an_error_as_before() -> None:
    resume = NextAction(Action.resume, job=3)
    assert diagnosis("Commit or stash them", [resume]) == (
        "Commit or stash them, then run `cairn resume 3`"
    )
    assert diagnosis(None, [resume]) is None
    error = NotFound("no job 9", next_actions=[NextAction(Action.list_jobs)])
    assert with_next(str(error), error.next_actions) == (
        "no job 9; `cairn jobs` lists the jobs there are"
    )
    admin = NextAction(Action.add_group_admin, group="team")
    assert command(admin) == "`cairn group member add team NAME --admin`"
