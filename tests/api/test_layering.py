"""The API and the web pages sit beside the CLI, not on it: neither imports cairn.cli."""

from __future__ import annotations

import ast
from pathlib import Path
from types import ModuleType

import pytest

import cairn.api
import cairn.web


def _cli_imports(package: ModuleType) -> list[str]:
    folder = Path(str(package.__file__)).parent
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
    return found


@pytest.mark.parametrize("package", [cairn.api, cairn.web], ids=["api", "web"])
def test_nothing_imports_the_cli(package: ModuleType) -> None:
    assert _cli_imports(package) == []


def test_the_check_sees_an_import_of_the_cli(tmp_path: Path) -> None:
    (tmp_path / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "uses.py").write_text(
        "def f():\n    from cairn.cli.forge_commands import room_check\n", encoding="utf-8"
    )
    fake = ModuleType("fake")
    fake.__file__ = str(tmp_path / "__init__.py")
    assert _cli_imports(fake) == ["uses.py: cairn.cli.forge_commands"]
