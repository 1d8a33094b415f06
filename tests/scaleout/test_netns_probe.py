"""The host-loss test says why it cannot run, instead of failing obscurely or passing silently."""

from __future__ import annotations

import pytest

from . import netns


def test_without_root_the_reason_names_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    why = netns.unavailable()
    assert why is not None and "root" in why


def test_without_iproute2_the_reason_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(netns.os, "geteuid", lambda: 0)

    def missing(*args: object, **kwargs: object) -> None:
        raise FileNotFoundError("ip")

    monkeypatch.setattr(netns.subprocess, "run", missing)
    why = netns.unavailable()
    assert why is not None and "iproute2" in why
