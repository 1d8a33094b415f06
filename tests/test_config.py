"""Configuration from the environment: dependency sources, audit and tools."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.config import NPM_REGISTRY, PYPI_INDEX, Config
from cairn.errors import UsageError


def test_dependency_settings_default_to_the_public_registries_and_the_home(tmp_path: Path) -> None:
    config = Config.from_env({}, home=tmp_path)
    assert (config.pypi_index, config.npm_registry) == (PYPI_INDEX, NPM_REGISTRY)
    assert config.deps_dir == tmp_path / "deps"
    assert config.downloads_dir == tmp_path / "downloads"
    assert (config.osv_dir, config.osv_url, config.uv_command, config.npm_command) == (
        None,
        None,
        None,
        None,
    )


def test_dependency_settings_come_from_the_environment(tmp_path: Path) -> None:
    config = Config.from_env(
        {
            "CAIRN_PYPI_INDEX": "https://pypi.example.com/simple",
            "CAIRN_NPM_REGISTRY": "http://127.0.0.1:4873/",
            "CAIRN_OSV_DIR": str(tmp_path / "osv"),
            "CAIRN_OSV_URL": "https://api.osv.dev",
            "CAIRN_PACKAGE_DOWNLOADS": str(tmp_path / "dl"),
            "CAIRN_UV": "/opt/uv/bin/uv",
        },
        home=tmp_path,
    )
    assert config.pypi_index == "https://pypi.example.com/simple"
    assert config.npm_registry == "http://127.0.0.1:4873/"
    assert config.osv_dir == tmp_path / "osv" and config.osv_url == "https://api.osv.dev"
    assert config.downloads_dir == tmp_path / "dl"
    assert config.uv_command == Path("/opt/uv/bin/uv")


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        ("CAIRN_PYPI_INDEX", "https://user:s3cret@pypi.example.com/simple", "credentials"),
        ("CAIRN_NPM_REGISTRY", "http://registry.example.com/", "https://"),
        ("CAIRN_OSV_URL", "file:///etc/passwd", "https://"),
        ("CAIRN_OSV_DIR", "relative/osv", "absolute path"),
        ("CAIRN_UV", "uv", "absolute path"),
    ],
)
def test_unusable_dependency_settings_name_the_variable(
    tmp_path: Path, name: str, value: str, said: str
) -> None:
    with pytest.raises(UsageError) as raised:
        Config.from_env({name: value}, home=tmp_path)
    assert name in str(raised.value) and said in str(raised.value)
    assert "s3cret" not in str(raised.value)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://postgres@db.example.com:5432/cairn",
        "postgresql+psycopg://postgres@db.example.com:5432/cairn",
        "sqlite:////srv/cairn/cairn.db",
    ],
)
def test_database_urls_of_both_postgresql_forms_are_accepted(tmp_path: Path, url: str) -> None:
    config = Config.from_env({"CAIRN_DATABASE_URL": url}, home=tmp_path)
    assert config.store_url == url


def test_a_database_url_of_another_kind_is_refused_with_what_to_set(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as raised:
        Config.from_env({"CAIRN_DATABASE_URL": "mysql://db.example.com/cairn"}, home=tmp_path)
    assert "postgresql://" in str(raised.value) and "CAIRN_DATABASE_URL" in str(raised.value)


def test_a_config_built_directly_reads_no_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAIRN_USER", "bob")
    monkeypatch.setenv("CAIRN_LEASE_SECONDS", "soon")
    config = Config(home=tmp_path, lease_seconds=2)
    assert (config.user, config.lease_seconds) == ("admin", 2)


def test_each_setting_has_one_variable_name(tmp_path: Path) -> None:
    environ = {"CAIRN_UV_COMMAND": "/opt/uv", "cairn_user": "bob", "CAIRN_NPM": "/opt/npm"}
    config = Config.from_env(environ, home=tmp_path)
    assert (config.uv_command, config.user, config.npm_command) == (None, "admin", Path("/opt/npm"))


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("soon", "must be a number of seconds, for example 15"),
        ("nan", "must be greater than zero"),
        ("-1", "must be greater than zero"),
        ("86401", "must be at most 86400 (one day)"),
    ],
)
def test_an_unusable_lease_says_what_to_set(tmp_path: Path, value: str, said: str) -> None:
    with pytest.raises(UsageError) as raised:
        Config.from_env({"CAIRN_LEASE_SECONDS": value}, home=tmp_path)
    assert str(raised.value) == f"CAIRN_LEASE_SECONDS {said}"


def test_from_env_carries_the_environment_for_agents_but_never_shows_it() -> None:
    config = Config.from_env({"CAIRN_HOME": "/srv/cairn", "OPENAI_API_KEY": "sk-never-shown-1"})
    assert config.environment["OPENAI_API_KEY"] == "sk-never-shown-1"
    assert "sk-never-shown-1" not in repr(config) and "environment" not in config.model_dump()
    assert Config(home=Path("/srv/cairn")).environment == {}


def test_a_config_with_an_environment_stays_hashable() -> None:
    config = Config(home=Path("/srv/cairn"), environment={"OPENAI_API_KEY": "k"})
    assert hash(config) == hash(Config(home=Path("/srv/cairn")))
