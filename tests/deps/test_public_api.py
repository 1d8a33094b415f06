"""The public surface of `cairn.deps` is exactly its `__all__`; the installer registry."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

import cairn.deps
from cairn.config import Config
from cairn.deps import NpmInstaller, UvInstaller, get_installer, installer_kinds
from cairn.deps.installer import configured_installer
from cairn.errors import UsageError

from .conftest import uv_path


def test_the_public_surface_is_exactly_all() -> None:
    public = {name for name in vars(cairn.deps) if not name.startswith("_")}
    modules = {n for n, v in vars(cairn.deps).items() if isinstance(v, ModuleType)}
    assert set(cairn.deps.__all__) == public - modules - {"annotations"}
    assert all(hasattr(cairn.deps, name) for name in cairn.deps.__all__)


def test_installers_are_found_by_short_name_and_a_wrong_name_lists_the_valid_ones() -> None:
    assert isinstance(get_installer("uv", uv=uv_path()), UvInstaller)
    assert isinstance(get_installer("npm", npm="npm", node="node"), NpmInstaller)
    assert list(installer_kinds()) == ["uv", "npm"]  # the order a workspace is prepared in
    assert {kind.ecosystem for kind in installer_kinds().values()} == {"pypi", "npm"}
    with pytest.raises(UsageError, match="unknown installer 'pip'; valid installers: npm, uv"):
        get_installer("pip")
    with pytest.raises(UsageError, match="no known installer was named; valid installers"):
        get_installer("/home/alice/bin/uv")


def test_an_ecosystem_s_installer_is_built_from_the_configuration(tmp_path: Path) -> None:
    config = Config(home=tmp_path, uv_command=uv_path(), pypi_index="https://pypi.example/simple")
    built = configured_installer(config, "pypi")
    assert isinstance(built, UvInstaller)
    assert (built.uv, built.index_url) == (str(uv_path()), "https://pypi.example/simple")
    assert built.download_cache == config.downloads_dir / "uv"
    with pytest.raises(UsageError, match="unknown ecosystem 'conda'; valid ecosystems: npm, pypi"):
        configured_installer(config, "conda")
