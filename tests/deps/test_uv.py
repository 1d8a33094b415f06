"""The uv installer against PyPI: record, prepare, materialize, import; and what it refuses."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cairn.deps import (
    DependencyCache,
    InstallError,
    UvInstaller,
    add_dependency,
    read_inputs,
)
from cairn.deps.uv import uv_version
from cairn.errors import UsageError
from cairn.store import dependency_caches as ledger
from cairn.store.dependency_caches import CacheStatus
from cairn.testing.repos import python_project

from .conftest import snapshot

# A real uv.lock for docopt 0.6.2, which PyPI publishes as an sdist only (no wheel).
DOCOPT_LOCK = """\
version = 1
revision = 3
requires-python = ">=3.11"

[[package]]
name = "demo"
version = "0.1.0"
source = { virtual = "." }
dependencies = [
    { name = "docopt" },
]

[package.metadata]
requires-dist = [{ name = "docopt", specifier = "==0.6.2" }]

[[package]]
name = "docopt"
version = "0.6.2"
source = { registry = "https://pypi.org/simple" }
sdist = { url = "https://files.pythonhosted.org/packages/a2/55/8f8cab2afd404cf578136ef2cc5dfb50baa1761b68c9da1fb1e4eed343c9/docopt-0.6.2.tar.gz", hash = "sha256:49b3a825280bd66b3aa83585ef59c4a8c82f2c8a522dbe754a8bc8d08c85c491", size = 25901 }
"""  # noqa: E501


def run_python(workspace: Path, code: str) -> subprocess.CompletedProcess[str]:
    python = workspace / ".venv" / "bin" / "python"
    return subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, cwd=workspace, check=False
    )


def test_an_approved_python_package_is_recorded_prepared_and_importable(
    tmp_path: Path, uv_installer: UvInstaller, cache: DependencyCache
) -> None:
    workspace = python_project(tmp_path / "workspace")
    assert add_dependency(uv_installer, workspace, "six", "1.16.0") == 1
    assert '"six==1.16.0"' in (workspace / "pyproject.toml").read_text()
    assert 'name = "six"' in (workspace / "uv.lock").read_text()
    # uv never ran in the workspace: it edited and built from temporary copies.
    assert all(workspace not in (f, *f.parents) for f in uv_installer.runner.folders)

    record = cache.prepare(uv_installer, read_inputs(workspace, uv_installer))
    assert (record.status, record.package_count) == (CacheStatus.ready, 1)
    assert len(cache.materialize(uv_installer, record, workspace)) == 1

    done = run_python(workspace, "import six, sys; print(six.__version__, six.__file__)")
    assert done.returncode == 0, done.stderr
    version, where = done.stdout.split()
    assert version == "1.16.0" and Path(where).is_relative_to(workspace)
    entry = cache.entry_path(record.fingerprint)
    assert "relocatable = true" in (entry / ".venv" / "pyvenv.cfg").read_text()
    assert list(entry.glob(".venv/lib/python*/site-packages/__pycache__/six.*.pyc"))
    modes = [mode for kind, mode, _ in snapshot(entry).values() if kind != "link"]
    assert modes and all(mode & 0o222 == 0 for mode in modes)  # read-only, folders too


def test_an_sdist_only_package_is_never_built(
    tmp_path: Path, uv_installer: UvInstaller, cache: DependencyCache
) -> None:
    workspace = python_project(tmp_path / "workspace")
    before = snapshot(workspace)
    with pytest.raises(InstallError, match=r"docopt==0\.6\.2 publishes no wheel") as refused:
        add_dependency(uv_installer, workspace, "docopt", "0.6.2")
    assert "never builds packages from source" in str(refused.value)
    assert snapshot(workspace) == before

    (workspace / "pyproject.toml").write_text(
        (workspace / "pyproject.toml").read_text().replace("[]", '["docopt==0.6.2"]')
    )
    (workspace / "uv.lock").write_text(DOCOPT_LOCK)
    with pytest.raises(InstallError, match=r"docopt==0\.6\.2 publishes no wheel"):
        cache.prepare(uv_installer, read_inputs(workspace, uv_installer))
    [sync] = [c for c in uv_installer.runner.commands if "sync" in c]
    assert "--no-build" in sync and "--frozen" in sync and "--no-install-project" in sync
    [row] = cache.entries()
    assert row.status is CacheStatus.failed and "publishes no wheel" in (row.diagnosis or "")
    assert not any((cache.root / ".staging").iterdir())
    assert not cache.entry_path(row.fingerprint).exists()


def test_the_repository_pin_of_uv_is_enforced(
    tmp_path: Path, uv_installer: UvInstaller, cache: DependencyCache
) -> None:
    pinned = python_project(tmp_path / "pinned", '\n[tool.uv]\nrequired-version = "==0.1.0"\n')
    with pytest.raises(InstallError, match=r"pins uv ==0\.1\.0 .* but cairn's uv is"):
        add_dependency(uv_installer, pinned, "six", "1.16.0")
    assert uv_installer.runner.commands == []  # refused before uv ran

    current = uv_version(uv_installer.uv)
    matching = python_project(
        tmp_path / "matching", f'\n[tool.uv]\nrequired-version = "=={current}"\n'
    )
    add_dependency(uv_installer, matching, "six", "1.16.0")
    (matching / "pyproject.toml").write_text(
        (matching / "pyproject.toml").read_text().replace(f"=={current}", "<0.2")
    )
    with pytest.raises(InstallError, match=r"pins uv <0\.2"):
        cache.prepare(uv_installer, read_inputs(matching, uv_installer))


def test_only_the_approved_index_and_exact_versions_are_accepted(
    tmp_path: Path, uv_installer: UvInstaller, cache: DependencyCache
) -> None:
    workspace = python_project(tmp_path / "workspace")
    for name, version in (
        ("six", ">=1.0"),
        ("git+https://example.com/x.git", "1.0"),
        ("six", "1.16.0 ; extra"),
        ("../local", "1.0"),
    ):
        with pytest.raises(UsageError, match="will not install"):
            add_dependency(uv_installer, workspace, name, version)
    for declared, refusal in (
        ('\n[tool.uv.sources]\nsix = { git = "https://github.com/benjaminp/six" }\n', "git"),
        ('\n[[tool.uv.index]]\nurl = "https://mirror.example/simple"\n', "not approved"),
    ):
        elsewhere = python_project(tmp_path / refusal, declared)
        with pytest.raises(InstallError, match=refusal):
            add_dependency(uv_installer, elsewhere, "six", "1.16.0")
    direct = python_project(tmp_path / "direct")
    text = (direct / "pyproject.toml").read_text()
    (direct / "pyproject.toml").write_text(text.replace("[]", '["six @ https://x.test/six.whl"]'))
    with pytest.raises(InstallError, match="URL, path or git"):
        add_dependency(uv_installer, direct, "attrs", "23.2.0")
    assert uv_installer.runner.commands == []

    add_dependency(uv_installer, workspace, "six", "1.16.0")
    lock = (workspace / "uv.lock").read_text()
    elsewhere = UvInstaller(
        uv=uv_installer.uv, index_url="https://mirror.example/simple", runner=uv_installer.runner
    )
    with pytest.raises(InstallError, match="index cairn has not approved"):
        cache.prepare(elsewhere, read_inputs(workspace, elsewhere))
    git = lock.replace(
        'source = { registry = "https://pypi.org/simple" }',
        'source = { git = "https://github.com/benjaminp/six?rev=1.16.0" }',
    )
    (workspace / "uv.lock").write_text(git)
    calls = len(uv_installer.runner.commands)
    with pytest.raises(InstallError, match="from a git source"):
        cache.prepare(uv_installer, read_inputs(workspace, uv_installer))
    assert len(uv_installer.runner.commands) == calls
    with cache.store.begin() as conn:
        assert {r.status for r in ledger.list_entries(conn)} == {CacheStatus.failed}
