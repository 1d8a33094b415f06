"""cairn's pytest plugin: the fixtures cairn's own tests use, for testing your cairn set-up.

Installed with cairn (entry point `pytest11: cairn`), so any pytest run in an environment that
has cairn gets these fixtures; a conftest.py fixture of the same name takes precedence.

- `store_url`: a fresh, migrated store URL, parametrized "sqlite" and "postgres" (marked
  `postgres`); `store`: that store, open. `sqlite_url` / `postgres_url`: one backend only,
  each a copy of a store migrated once per session (per xdist worker), not a new migration.
  `empty_store_url`: a reachable database with no cairn tables, on both backends.
  `postgres_admin`: an AUTOCOMMIT engine on the server's `postgres` database.
  PostgreSQL is 127.0.0.1:5432 (or $CAIRN_TEST_POSTGRES); when unreachable the "postgres"
  variants skip, or fail under CAIRN_REQUIRE_POSTGRES=1.
- `cairn`: a `Cairn` installation (see cairn.testing.harness) on `store`, runs auto-approved.
- `turns`: every turn a script agent was handed in the test (cairn.testing.harness.Turns).
- `sample_repo`: a small Python project in git (cairn.testing.repos.make_sample_repo).
- `fake_installer` / `fake_auditor`: cairn.testing.installers.FakeInstaller and
  cairn.testing.auditor.FakeAuditor, fresh for each test.
- `openai_server`: a `ScriptedOpenAIServer` (cairn.testing.openai_server) with no script yet
  (`add_answers(marker, ...)`) and the API key `openai_server.api_key`; closed after the test.
- `anthropic_server`: a `ScriptedAnthropicServer` (cairn.testing.anthropic_server) with no
  script yet and the key `anthropic_server.api_key`; closed after the test.
- `claude_code_cli`: the real Claude Code binary, its pinned version installed once into a
  cache shared between runs (cairn.testing.clis); skips when it cannot be installed, or fails
  under CAIRN_REQUIRE_CLIS=1.
- `codex_cli`: the real Codex CLI binary, installed and cached the same way.
- `aider_cli`: the real Aider (PyPI `aider-chat`), its pinned version installed once into its
  own venv in the same cache; skips or fails the same way.
- `responses_server`: a scripted server for OpenAI's Responses API, a
  `ScriptedResponsesServer` (cairn.testing.responses_server), keyed like `openai_server`.
- `fake_forge`: a GitHub-shaped `FakeForge` (cairn.testing.fake_forge) on 127.0.0.1 holding
  `acme/app` (a copy of `sample_repo`), with a read-and-write token `fake_forge.test_token`;
  `fake_forge.kind` is "gitlab" when the test is parametrized indirectly with "gitlab".
- `package_downloads`: one package download cache for the whole session (also exported as
  CAIRN_PACKAGE_DOWNLOADS while a test that uses it runs).

Only this module imports pytest; cairn's other testing modules work without it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from cairn.store import Store
    from cairn.testing.anthropic_server import ScriptedAnthropicServer
    from cairn.testing.auditor import FakeAuditor
    from cairn.testing.fake_forge import FakeForge
    from cairn.testing.harness import Cairn, Turns
    from cairn.testing.installers import FakeInstaller
    from cairn.testing.openai_server import ScriptedOpenAIServer
    from cairn.testing.responses_server import ScriptedResponsesServer

# Heavy modules (SQLAlchemy, the store) are imported inside the fixtures: pytest loads this
# plugin in every run of an environment that has cairn, also runs that never use it.
BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]


def pytest_configure(config: pytest.Config) -> None:
    """Register the `postgres` marker, for projects running with --strict-markers."""
    config.addinivalue_line("markers", "postgres: needs the PostgreSQL test server")


@pytest.fixture(scope="session")
def package_downloads(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The package managers' download cache for every cairn installation of the session."""
    folder = tmp_path_factory.mktemp("package-downloads")
    # Also for installations configured from the environment (the CLI, `cairn demo`).
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CAIRN_PACKAGE_DOWNLOADS", str(folder))
        yield folder


@pytest.fixture(scope="session")
def postgres_admin() -> Iterator[Engine]:
    """An AUTOCOMMIT engine on the `postgres` database; skips (or fails) when unreachable."""
    from cairn.testing.stores import REQUIRE_POSTGRES, admin_engine

    engine, unreachable = admin_engine()
    if unreachable is not None:
        if os.environ.get(REQUIRE_POSTGRES) == "1":
            pytest.fail(f"{REQUIRE_POSTGRES}=1 but {unreachable}", pytrace=False)
        pytest.skip(unreachable)
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def postgres_template(postgres_admin: Engine) -> Iterator[str]:
    """The name of a database migrated once per session, cloned by every `postgres_url`."""
    from cairn.testing.stores import drop_database, migrated_template

    name = migrated_template(postgres_admin)
    yield name
    drop_database(postgres_admin, name)


@pytest.fixture
def postgres_url(postgres_admin: Engine, postgres_template: str) -> Iterator[str]:
    """A fresh migrated PostgreSQL store of its own, dropped after the test."""
    from cairn.testing import stores

    name = stores.unique_database_name("cairn_test")
    stores.create_database(postgres_admin, name, template=postgres_template)
    yield stores.postgres_database_url(name)
    stores.drop_database(postgres_admin, name)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite store migrated once per session (per xdist worker), copied by `sqlite_url`."""
    from cairn.testing.stores import migrated_sqlite_template

    return migrated_sqlite_template(tmp_path_factory.mktemp("sqlite-template"))


@pytest.fixture
def sqlite_url(tmp_path: Path, sqlite_template: Path) -> str:
    """A fresh migrated SQLite store file of its own in the test's temporary directory."""
    from cairn.testing.stores import copy_sqlite_store

    return copy_sqlite_store(sqlite_template, tmp_path / "cairn.db")


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest) -> str:
    """A fresh store URL on each backend in turn."""
    return str(request.getfixturevalue(f"{request.param}_url"))


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """An open, migrated store on each backend in turn."""
    from cairn.store import Store

    opened = Store.open(store_url, create=True)
    yield opened
    opened.close()


@pytest.fixture(params=BACKENDS)
def empty_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A reachable database holding no cairn tables yet, on each backend in turn."""
    from cairn.testing import stores

    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/empty.db"
        return
    admin: Engine = request.getfixturevalue("postgres_admin")
    name = stores.unique_database_name("cairn_empty")
    stores.create_database(admin, name)
    yield stores.postgres_database_url(name)
    stores.drop_database(admin, name)


@pytest.fixture
def cairn(store: Store, tmp_path: Path, package_downloads: Path) -> Cairn:
    """An installation on `store`: people admin, bob (admins) and alice, room `sample`."""
    from cairn.testing.harness import make_cairn

    # Runs are approved by policy here; cairn's tests/authority covers the run gate with people.
    return make_cairn(store, tmp_path, package_downloads=package_downloads)


@pytest.fixture
def turns() -> Iterator[Turns]:
    """The turns script agents are handed in this test (job, context, notes)."""
    from cairn.testing.harness import recording_turns

    with recording_turns() as recorded:
        yield recorded


@pytest.fixture
def sample_repo(tmp_path: Path) -> Path:
    """A small Python project with one commit on `main`, whose own tests pass."""
    from cairn.testing.repos import make_sample_repo

    return make_sample_repo(tmp_path / "sample-repo")


@pytest.fixture
def fake_installer() -> FakeInstaller:
    """An npm-shaped installer that needs no network (see cairn.testing.installers)."""
    from cairn.testing.installers import FakeInstaller

    return FakeInstaller()


@pytest.fixture
def fake_auditor() -> FakeAuditor:
    """An auditor with no advisories yet; append `Advisory`s to its `advisories`."""
    from cairn.testing.auditor import FakeAuditor

    return FakeAuditor()


@pytest.fixture
def openai_server() -> Iterator[ScriptedOpenAIServer]:
    """A scripted OpenAI-compatible server on 127.0.0.1; script it with `add_answers`."""
    from cairn.testing.openai_server import TEST_API_KEY, ScriptedOpenAIServer

    with ScriptedOpenAIServer(api_key=TEST_API_KEY) as server:
        yield server


@pytest.fixture
def anthropic_server() -> Iterator[ScriptedAnthropicServer]:
    """A scripted Anthropic Messages server on 127.0.0.1; script it with `add_answers`."""
    from cairn.testing.anthropic_server import TEST_ANTHROPIC_KEY, ScriptedAnthropicServer

    with ScriptedAnthropicServer(api_key=TEST_ANTHROPIC_KEY) as server:
        yield server


@pytest.fixture(scope="session")
def aider_cli() -> Path:
    """The pinned Aider's binary, in its own venv in the shared cache (built when missing)."""
    from cairn.testing.clis import AIDER, REQUIRE_CLIS, installed_pypi

    found = installed_pypi(AIDER)
    if isinstance(found, str):
        if os.environ.get(REQUIRE_CLIS) == "1":
            pytest.fail(f"{REQUIRE_CLIS}=1 but {found}", pytrace=False)
        pytest.skip(found)
    return found


@pytest.fixture(scope="session")
def claude_code_cli() -> Path:
    """The pinned Claude Code CLI's binary, installed into the shared cache when missing."""
    from cairn.testing.clis import CLAUDE_CODE, REQUIRE_CLIS, installed

    found = installed(CLAUDE_CODE)
    if isinstance(found, str):
        if os.environ.get(REQUIRE_CLIS) == "1":
            pytest.fail(f"{REQUIRE_CLIS}=1 but {found}", pytrace=False)
        pytest.skip(found)
    return found


@pytest.fixture(scope="session")
def codex_cli() -> Path:
    """The pinned Codex CLI's binary, installed into the shared cache when missing."""
    from cairn.testing.clis import CODEX, REQUIRE_CLIS, installed

    found = installed(CODEX)
    if isinstance(found, str):
        if os.environ.get(REQUIRE_CLIS) == "1":
            pytest.fail(f"{REQUIRE_CLIS}=1 but {found}", pytrace=False)
        pytest.skip(found)
    return found


@pytest.fixture
def responses_server() -> Iterator[ScriptedResponsesServer]:
    """A scripted Responses API server on 127.0.0.1; script it with `add_answers`."""
    from cairn.testing.openai_server import TEST_API_KEY
    from cairn.testing.responses_server import ScriptedResponsesServer

    with ScriptedResponsesServer(api_key=TEST_API_KEY) as server:
        yield server


@pytest.fixture
def fake_forge(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FakeForge]:
    """A FakeForge (github, or the indirect parameter's kind) holding `acme/app`."""
    from cairn.testing.fake_forge import FakeForge
    from cairn.testing.repos import make_sample_repo

    kind = str(getattr(request, "param", "github"))
    source = make_sample_repo(tmp_path / "forge-source")
    with FakeForge(tmp_path / "forge", kind=kind) as forge:
        forge.create_repo("acme/app", source=source)
        forge.test_token = forge.add_token()
        yield forge
