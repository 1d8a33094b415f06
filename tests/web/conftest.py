"""The pages in a real browser: Debian's chromium (headless) driven by Playwright.

Fixtures:

- `site`: a `Site`: cairn's app (API and pages) under a real Uvicorn on 127.0.0.1 over the
  `team` installation (tests/authority: admins `admin` and `bob`, member `alice`, room
  `sample`), runs approved by policy, a real runner working in a thread, a FakeForge with an
  OAuth app (its consent page offers Authorize and Cancel), and `site.stream` to make the
  pages' progress streams fail.
- `browser`: one headless chromium for the session (never `playwright install`); `contexts`
  makes browser contexts that are closed before the server stops.
- `artifacts`: where screenshots go: $CAIRN_TEST_ARTIFACTS, else test-artifacts/web.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext
from pydantic import SecretStr
from starlette.types import ASGIApp, Receive, Scope, Send

from api.conftest import serve
from authority.conftest import team  # noqa: F401  (the installation, people and room)
from cairn.api import create_app
from cairn.jobs.runner import Runner
from cairn.store import Store, identity
from cairn.testing.fake_forge import FakeForge
from cairn.testing.harness import AUTO_RUNS, Cairn
from cairn.testing.repos import make_sample_repo
from cairn.web import ForgeApp

from .forms import Clients

CHROMIUM = "/usr/bin/chromium"
PEOPLE = ("admin", "bob", "alice", "carol")
_STREAMS = re.compile(r"^/(rooms|jobs)/\d+/events$")


@pytest.fixture
def store_url(sqlite_url: str) -> str:
    """The browser tests run on the embedded store only: they test pages, not the store."""
    return sqlite_url


class StreamSwitch:
    """ASGI wrapper: while `failing` is set, the pages' progress streams answer 503 and open
    ones are cut, as a proxy or an overloaded server would do."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.failing = threading.Event()
        self.refused = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        import anyio

        if scope["type"] != "http" or not _STREAMS.match(scope["path"]):
            await self.app(scope, receive, send)
            return
        if self.failing.is_set():
            self.refused += 1
            await send({"type": "http.response.start", "status": 503, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return

        async def cut_when_failing() -> dict[str, object]:
            while not self.failing.is_set():
                with anyio.move_on_after(0.1):
                    return dict(await receive())
            return {"type": "http.disconnect"}

        await self.app(scope, cut_when_failing, send)


@dataclass
class Site:
    url: str
    team: Cairn
    tokens: dict[str, str]
    forge: FakeForge
    stream: StreamSwitch
    stop: threading.Event = field(default_factory=threading.Event)
    runner: threading.Thread | None = None

    def pause_runner(self) -> None:
        """Stop the runner, so that jobs stay where the test puts them."""
        self.stop.set()
        if self.runner is not None:
            self.runner.join(timeout=60)

    def resume_runner(self) -> None:
        """Start a runner again after `pause_runner`."""
        self.stop.clear()
        self.runner = _start_runner(self.team, self.stop)

    def release(self, job_id: int) -> None:
        """Let a script agent waiting in `run: until [ -e release.flag ]...` carry on."""
        (self.team.workspace(job_id) / "release.flag").write_text("go\n")


@pytest.fixture
def site(team: Cairn, store: Store, tmp_path: Path) -> Iterator[Site]:  # noqa: F811
    team.set_policy(**AUTO_RUNS)
    team.config = team.config.model_copy(update={"secret_key": SecretStr("k" * 32)})
    with store.begin() as conn:
        tokens = {
            name: identity.issue_token(conn, identity.get_user(conn, name).id) for name in PEOPLE
        }
    forge = FakeForge(tmp_path / "forge")
    forge.create_repo("acme/app", source=make_sample_repo(tmp_path / "forge-source"))
    client_id, client_secret = forge.register_oauth_app()
    app = create_app(
        team.config,
        store=store,
        forge_app=ForgeApp(
            kind="github",
            url=forge.url,
            client_id=client_id,
            client_secret=client_secret,
        ),
    )
    switch = StreamSwitch(app)
    stop = threading.Event()
    runner = _start_runner(team, stop)
    try:
        with serve(switch) as url:
            made = Site(url, team, tokens, forge, switch, stop, runner)
            yield made
    finally:
        made.stop.set()
        _release_every_job(team)
        if made.runner is not None:
            made.runner.join(timeout=60)
        forge.close()


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(
            "the browser tests need Debian's chromium: run  sh scripts/require-tools chromium",
            pytrace=False,
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield launched
        launched.close()


@pytest.fixture
def contexts(site: Site, browser: Browser) -> Iterator[Callable[..., BrowserContext]]:
    """New browser contexts (own cookies and storage), closed before the server stops."""
    made: list[BrowserContext] = []

    def new(**options: Any) -> BrowserContext:
        made.append(browser.new_context(**options))
        return made[-1]

    yield new
    for context in made:
        context.close()


@pytest.fixture
def clients(site: Site) -> Iterator[Clients]:
    """httpx clients with cookie jars (a browser's part without the browser)."""
    made = Clients(site.url)
    yield made
    made.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    folder = Path(os.environ.get("CAIRN_TEST_ARTIFACTS") or "test-artifacts") / "web"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _start_runner(installation: Cairn, stop: threading.Event) -> threading.Thread:
    """A real runner in a thread, working whatever is queued until `stop` is set."""

    def work() -> None:
        while not stop.is_set():
            Runner(installation.store, installation.config).work(until_idle=True)
            stop.wait(0.2)

    runner = threading.Thread(target=work, daemon=True)
    runner.start()
    return runner


def _release_every_job(installation: Cairn) -> None:
    """Let any script agent still waiting for its release flag end, so the runner stops."""
    from cairn.store import jobs as job_ledger

    with installation.store.begin() as conn:
        ids = [job.id for job in job_ledger.list_jobs(conn)]
    for job_id in ids:
        if installation.workspace(job_id).is_dir():
            (installation.workspace(job_id) / "release.flag").write_text("go\n")
