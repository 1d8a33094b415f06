"""Evidence read back by name: typed, and refused when a value is not the type asked for."""

from __future__ import annotations

import pytest

from cairn.engine import Evidence, Measurement
from cairn.errors import InvalidState


def test_a_measurement_is_read_as_the_type_it_was_written_as() -> None:
    evidence = Evidence.of(Measurement("decision_mark", 4), Measurement("tree", "abc"))
    assert evidence.get_int("decision_mark") == 4
    assert evidence.get_str("tree") == "abc"
    assert evidence.get_int("missing") is None and evidence.get_str("missing") is None


@pytest.mark.parametrize("value", ["4", True])
def test_a_count_of_another_type_is_refused(value: str | bool) -> None:
    evidence = Evidence.of(Measurement("decision_mark", value))
    with pytest.raises(InvalidState, match=r"evidence 'decision_mark' is .+, not a whole number"):
        evidence.get_int("decision_mark")


def test_text_of_another_type_is_refused() -> None:
    with pytest.raises(InvalidState, match="evidence 'tree' is 3, not text"):
        Evidence.of(Measurement("tree", 3)).get_str("tree")
