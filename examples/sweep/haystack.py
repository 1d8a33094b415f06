"""The haystack and the prompt: a generated corpus, a needle placed at a depth, a template.

Nothing here is stored: `reconstruct(recipe)` rebuilds the exact prompt from a cell's recipe.
The corpus depends on nothing but SHA-256 (not on `random`, whose algorithms may change between
Python versions), and the recipe carries digests of the corpus and the template, so a changed
generator or an edited template is refused instead of silently rebuilding a different prompt.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from cairn.engine import digest
from examples.sweep.errors import Unreproducible

GENERATOR = "filler-v1"
CORPUS_WORDS = 5000

# The filler never says "secret", "ingredient", "harbor" or "soup": only the needle does.
FILLER = """
    amber valley river lantern quietly across the old mill carried seven copper bells
    under a grey morning while farmers counted barley near northern hills and children
    watched slow barges drift past stone bridges toward market towns where weavers sold
    bright wool beside bakers who opened early every winter because travellers arrived
    hungry after long roads through pine forests
"""
VOCABULARY = tuple(FILLER.split())

TEMPLATES = {
    "v1": (
        "You will read a document and answer one question about it.\n\n"
        "<document>\n{document}\n</document>\n\n"
        "Question: {question}\n"
        "Answer with one word.\n"
    ),
    "v2": (
        "Read the document below, then answer the question with a single word.\n\n"
        "<document>\n{document}\n</document>\n\n"
        "Question: {question}\n"
    ),
}


def _draw(seed: int, index: int, choices: int) -> int:
    """A deterministic draw in range(choices), the same on every platform and Python."""
    hashed = hashlib.sha256(f"{GENERATOR}:{seed}:{index}".encode()).digest()
    return int.from_bytes(hashed[:4], "big") % choices


@lru_cache(maxsize=8)
def corpus(seed: int, words: int = CORPUS_WORDS) -> tuple[tuple[str, ...], ...]:
    """The filler corpus for `seed`: sentences of words, at least `words` words in all."""
    sentences: list[tuple[str, ...]] = []
    drawn = 0
    while drawn < words:
        size = 6 + _draw(seed, -len(sentences) - 1, 9)
        sentences.append(
            tuple(VOCABULARY[_draw(seed, drawn + i, len(VOCABULARY))] for i in range(size))
        )
        drawn += size
    return tuple(sentences)


def corpus_identity(seed: int, words: int = CORPUS_WORDS) -> dict[str, Any]:
    """The haystack source as a recipe names it: generator, seed, size and content digest."""
    return {"generator": GENERATOR, "seed": seed, "words": words, "id": digest(corpus(seed, words))}


def template_identity(version: str) -> dict[str, str]:
    """The template as a recipe names it: its version and the digest of its text."""
    if version not in TEMPLATES:
        raise Unreproducible(
            f"template {version!r} is unknown; templates are {', '.join(sorted(TEMPLATES))}"
        )
    return {"version": version, "id": digest(TEMPLATES[version])}


def _sentence(words: tuple[str, ...]) -> str:
    return " ".join(words).capitalize() + "."


def haystack(sentences: tuple[tuple[str, ...], ...], length: int, needle: str, depth: int) -> str:
    """The first `length` words as sentences, with the needle sentence at `depth` percent."""
    kept: list[str] = []
    left = length
    for words in sentences:
        if left <= 0:
            break
        kept.append(_sentence(words[:left]))
        left -= len(words)
    # Integer arithmetic only: depth 0 puts the needle first, 100 puts it last.
    kept.insert(len(kept) * depth // 100, needle)
    return " ".join(kept)


def reconstruct(recipe: Mapping[str, Any]) -> str:
    """The exact prompt a cell's model saw, rebuilt from its recipe alone."""
    source = recipe["haystack"]
    if source["generator"] != GENERATOR:
        raise Unreproducible(f"haystack generator {source['generator']!r} is not {GENERATOR!r}")
    if corpus_identity(source["seed"], source["words"]) != dict(source):
        raise Unreproducible("the haystack generator changed; this recipe cannot be rebuilt")
    if template_identity(recipe["template"]["version"]) != dict(recipe["template"]):
        raise Unreproducible(
            f"template {recipe['template']['version']!r} was edited; this recipe cannot be rebuilt"
        )
    needle = recipe["needle"]
    document = haystack(
        corpus(source["seed"], source["words"]), recipe["length"], needle["text"], recipe["depth"]
    )
    return TEMPLATES[recipe["template"]["version"]].format(
        document=document, question=needle["question"]
    )
