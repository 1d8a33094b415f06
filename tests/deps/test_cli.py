"""`cairn cache list|verify|prune`, driven through the Typer sub-app on a real home."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from cairn.cli.cache_commands import cache_app, cache_root
from cairn.cli.context import Session
from cairn.config import Config
from cairn.deps import DependencyCache, read_inputs
from cairn.store import Store
from cairn.testing.installers import FakeInstaller, fake_project


@pytest.fixture
def home(tmp_path: Path) -> Path:
    Store.open(f"sqlite:///{tmp_path / 'home' / 'cairn.db'}", create=True).close()
    return tmp_path / "home"


def cairn(home: Path, *args: str, code: int = 0) -> str:
    app = typer.Typer()

    @app.callback()
    def _root(ctx: typer.Context) -> None:
        ctx.obj = Session(Config(home=home))

    app.add_typer(cache_app, name="cache")
    done = CliRunner().invoke(app, ["cache", *args])
    assert done.exit_code == code, done.output
    return done.stdout


def built(home: Path, tmp_path: Path, packages: dict[str, str]) -> DependencyCache:
    store = Store.open(f"sqlite:///{home / 'cairn.db'}")
    cache = DependencyCache(store, cache_root(Session(Config(home=home))))
    installer = FakeInstaller()
    project = fake_project(tmp_path / "-".join(packages), packages)
    cache.prepare(installer, read_inputs(project, installer))
    store.close()
    return cache


def test_list_json_shows_each_entry(home: Path, tmp_path: Path) -> None:
    assert json.loads(cairn(home, "list", "--json")) == []
    assert "empty" in cairn(home, "list")
    built(home, tmp_path, {"left-pad": "1.3.0", "is-number": "7.0.0"})
    [entry] = json.loads(cairn(home, "list", "--json"))
    assert entry["ecosystem"] == "npm" and entry["status"] == "ready"
    assert entry["package_count"] == 2 and entry["size_bytes"] > 0
    assert len(entry["fingerprint"]) == 64
    assert entry["fingerprint"][:12] in cairn(home, "list")


def test_verify_quarantines_a_changed_entry_and_prune_removes_it(
    home: Path, tmp_path: Path
) -> None:
    cache = built(home, tmp_path, {"left-pad": "1.3.0"})
    built(home, tmp_path, {"is-number": "7.0.0"})
    assert "2 ready entries match" in cairn(home, "verify")
    first, second = json.loads(cairn(home, "list", "--json"))
    changed = cache.entry_path(first["fingerprint"]) / "node_modules" / "left-pad" / "index.js"
    changed.chmod(0o644)
    changed.write_text("module.exports = 'changed';\n")
    report = cairn(home, "verify", code=1)
    assert f"quarantined {first['fingerprint'][:12]}" in report
    statuses = {e["fingerprint"]: e["status"] for e in json.loads(cairn(home, "list", "--json"))}
    assert statuses == {first["fingerprint"]: "quarantined", second["fingerprint"]: "ready"}
    # The list says what to do about the quarantined entry, in words and in structured form.
    listed = {e["fingerprint"]: e["next"] for e in json.loads(cairn(home, "list", "--json"))}
    assert listed == {first["fingerprint"]: [{"action": "prune_cache"}], second["fingerprint"]: []}
    [line] = [x for x in cairn(home, "list").splitlines() if "quarantined" in x]
    assert line.startswith(first["fingerprint"][:12]) and "run `cairn cache prune`" in line

    [removed] = json.loads(cairn(home, "prune", "--json"))
    assert removed["fingerprint"] == first["fingerprint"]
    assert not cache.entry_path(first["fingerprint"]).exists()
    assert "removed 1 entries" in cairn(home, "prune", "--all")
    assert json.loads(cairn(home, "list", "--json")) == []
