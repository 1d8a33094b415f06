"""Identities: canonical JSON hashed, so equal instructions and equal content always hash equal."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from cairn.canonical import canonical_json, check, digest

__all__ = ["UpstreamContents", "canonical_json", "digest", "recipe_id"]


class UpstreamContents:
    """Earlier stages' content identities in workflow order, with their canonical JSON kept.

    A workflow's upstream grows by one stage at a time; a recipe made from this encodes each
    pair once, when it is added, instead of every pair on every recipe (O(N^2) in a workflow
    of N stages). The recipe identities are byte for byte those of the same pairs as a mapping.
    """

    def __init__(self) -> None:
        self._encoded: list[str] = []

    def add(self, name: str, content: str | None) -> None:
        self._encoded.append(canonical_json([str(name), _content_id(content)], checked=True))

    def json(self) -> str:
        return "[" + ",".join(self._encoded) + "]"


def recipe_id(
    stage: str,
    inputs: Mapping[str, Any],
    *,
    upstream: Mapping[str, str | None] | UpstreamContents | None = None,
    settings: Mapping[str, Any] | None = None,
    tools: Mapping[str, str] | None = None,
) -> str:
    """The identity of the instructions for one stage, recorded before it runs.

    `upstream` maps earlier stages to their content identities, in workflow order, so a
    changed earlier result changes every later recipe.
    """
    if isinstance(upstream, UpstreamContents):
        pairs_json = upstream.json()
    else:  # checked flatly, encoded in one go: the same text as UpstreamContents makes
        pairs = [[str(name), _content_id(content)] for name, content in (upstream or {}).items()]
        pairs_json = canonical_json(pairs, checked=True)
    document = {
        "stage": stage,
        "inputs": check(dict(inputs)),
        "settings": check(dict(settings or {})),
        "tools": check(dict(tools or {})),
    }
    # Keys sort as inputs, settings, stage, tools, upstream: the pairs, encoded once each,
    # close the document, which is then exactly canonical_json of it with "upstream" inside.
    text = canonical_json(document, checked=True)[:-1] + ',"upstream":' + pairs_json + "}"
    return hashlib.sha256(text.encode()).hexdigest()


def _content_id(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    raise TypeError(f"content identities are strings, not {type(content).__name__}")
