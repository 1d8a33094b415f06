"""The API sits beside the CLI, not on it: nothing under cairn.api imports cairn.cli."""

from __future__ import annotations

import ast
from pathlib import Path

import cairn.api


def test_the_api_imports_nothing_of_the_cli() -> None:
    folder = Path(cairn.api.__file__).parent
    found = []
    for module in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            found += [f"{module.name}: {n}" for n in names if n.split(".")[:2] == ["cairn", "cli"]]
    assert found == []
