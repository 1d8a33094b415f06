"""Bounded, masked text for anything a user sees: no local paths, no environment values."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from cairn.config import Config

DIAGNOSIS_LIMIT = 500
SUMMARY_LIMIT = 4000
CUT_MARKER = " …[cut]"
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|KEY|AUTH|CREDENTIAL|COOKIE|SESSION", re.I)
_MIN_SECRET_NAMED = 4
_MIN_ANY_VALUE = 8


class Sanitizer:
    """Masks known local paths and environment values, then bounds the length."""

    def __init__(
        self,
        *,
        paths: Mapping[str, Path | str] | None = None,
        environ: Mapping[str, str] | None = None,
        secrets: Iterable[str] = (),
    ) -> None:
        replacements: dict[str, str] = {}
        for placeholder, path in (paths or {}).items():
            for variant in _path_variants(path):
                replacements[variant] = placeholder
        for name, value in (os.environ if environ is None else environ).items():
            floor = _MIN_SECRET_NAMED if _SECRET_NAME.search(name) else _MIN_ANY_VALUE
            if len(value) >= floor and value not in replacements:
                replacements[value] = (
                    f"[{name}]" if _SECRET_NAME.search(name) is None else "[secret]"
                )
        for secret in secrets:
            if len(secret) >= _MIN_SECRET_NAMED:
                replacements[secret] = "[secret]"
        # Longest first, so a workspace path inside the home is replaced before the home itself.
        ordered = sorted(replacements, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None
        self._replacements = replacements

    def mask(self, text: str) -> str:
        """Replace every known path and environment value with a placeholder."""
        if self._pattern is None:
            return text
        return self._pattern.sub(lambda m: self._replacements[m.group(0)], text)

    def clean(self, text: str, limit: int = DIAGNOSIS_LIMIT) -> str:
        """Mask, then bound to `limit` characters (the marker counts toward the limit)."""
        return bound(self.mask(text).strip(), limit)


def bound(text: str, limit: int) -> str:
    """Cut `text` to at most `limit` characters on a character boundary, marking the cut."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(CUT_MARKER))].rstrip() + CUT_MARKER


def _path_variants(path: Path | str) -> set[str]:
    raw = str(path).rstrip("/")
    variants = {raw}
    with contextlib.suppress(OSError):
        variants.add(str(Path(raw).resolve()))
    return {v for v in variants if len(v) > 1}


def user_sanitizer(config: Config, repository: str | None = None) -> Sanitizer:
    """The sanitizer every user-visible text goes through (with a room's local repository path)."""
    paths: dict[str, Path | str] = {
        "<cairn-home>": config.home,
        "<workspaces>": config.workspaces_dir,
        "~": Path.home(),
    }
    if repository and "://" not in repository:
        paths["<repository>"] = repository
    return Sanitizer(paths=paths)
