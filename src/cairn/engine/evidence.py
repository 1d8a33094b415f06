"""Evidence: named measurements with what was expected, stored beside the content they measured."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from cairn.errors import InvalidState

Value = int | str | bool | None
"""What a measurement holds: a count, a name or id, a flag, or nothing."""


class Expect(StrEnum):
    at_least = "at_least"
    """`value >= target`, for example files_changed: 3 (>= 1)."""
    equals = "equals"
    """`value == target`, for example exit_status: 0 (= 0)."""
    all_of = "all_of"
    """`value == target` read as coverage, for example tests_run: 41 of 41 collected."""
    noted = "noted"
    """Recorded, nothing expected (for example which verify command ran)."""


@dataclass(frozen=True)
class Measurement:
    name: str
    value: Value
    expect: Expect = Expect.noted
    target: Value = None
    unit: str = ""

    @property
    def holds(self) -> bool:
        """Whether the measurement meets what was expected of it."""
        match self.expect:
            case Expect.noted:
                return True
            case Expect.at_least:
                return (
                    isinstance(self.value, int)
                    and isinstance(self.target, int)
                    and (self.value >= self.target)
                )
            case Expect.equals | Expect.all_of:
                return self.value is not None and self.value == self.target
        return False  # pragma: no cover

    def __str__(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        match self.expect:
            case Expect.at_least:
                return f"{self.name}: {self.value} (>= {self.target})"
            case Expect.equals:
                return f"{self.name}: {self.value} (= {self.target})"
            case Expect.all_of:
                return f"{self.name}: {self.value} of {self.target}{unit}"
        return f"{self.name}: {self.value}"


@dataclass(frozen=True)
class Evidence:
    """A stage result's completeness measurements."""

    measurements: tuple[Measurement, ...] = ()

    @classmethod
    def of(cls, *measurements: Measurement) -> Evidence:
        return cls(tuple(measurements))

    def shortfalls(self, required: Iterable[str]) -> list[str]:
        """What keeps the result from being accepted: missing measurements and unmet ones."""
        present = {m.name: m for m in self.measurements}
        missing = [f"{name}: not measured" for name in required if name not in present]
        return missing + [f"{m} is short" for m in self.measurements if not m.holds]

    def get(self, name: str) -> Value:
        """The measured value of `name`, or None."""
        return next((m.value for m in self.measurements if m.name == name), None)

    def get_int(self, name: str) -> int | None:
        """The measured count of `name`, or None; raises InvalidState when it is not a count."""
        value = self.get(name)
        # bool is an int to Python, but a flag read as a count is a record this code never wrote.
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        raise InvalidState(f"evidence {name!r} is {value!r}, not a whole number")

    def get_str(self, name: str) -> str | None:
        """The measured text of `name`, or None; raises InvalidState when it is not text."""
        value = self.get(name)
        if value is None or isinstance(value, str):
            return value
        raise InvalidState(f"evidence {name!r} is {value!r}, not text")

    def to_data(self) -> dict[str, Any]:
        return {
            m.name: {"value": m.value, "expect": m.expect.value, "target": m.target, "unit": m.unit}
            for m in self.measurements
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Evidence:
        """Read stored evidence; raises ValueError (or KeyError/TypeError) when it is malformed."""
        return cls(
            tuple(
                Measurement(
                    name,
                    item["value"],
                    Expect(item["expect"]),
                    item.get("target"),
                    item.get("unit", ""),
                )
                for name, item in data.items()
            )
        )

    def __str__(self) -> str:
        return ", ".join(str(m) for m in self.measurements)
