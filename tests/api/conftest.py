"""A real cairn API server on 127.0.0.1 (Uvicorn in a thread) over the `team` installation.

Fixtures:

- `api`: an `Api` whose server serves `team`'s store; `api.client(name)` is an httpx client
  carrying that person's token (`None`: no token). People as in tests/authority: admins
  `admin` and `bob` and member `alice` of group `default` (strict policy, room `sample`), and
  `carol`, admin of group `others` only.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx
import pytest
import uvicorn
from pydantic import SecretStr

from authority.conftest import team  # noqa: F401  (the installation, people and room)
from cairn.api import create_app
from cairn.store import Store, identity
from cairn.testing.harness import Cairn

PEOPLE = ("admin", "bob", "alice", "carol")
SECRET_KEY = "a-long-secret-key-for-the-api-tests"


@dataclass
class Api:
    url: str
    team: Cairn
    tokens: dict[str, str]
    clients: list[httpx.Client] = field(default_factory=list)

    def client(self, name: str | None) -> httpx.Client:
        """An httpx client for the server, with `name`'s bearer token (none for None)."""
        headers = {"Authorization": f"Bearer {self.tokens[name]}"} if name else {}
        made = httpx.Client(base_url=self.url, headers=headers, timeout=30)
        self.clients.append(made)
        return made

    def script(self, steps_yaml: str) -> str:
        """A script job's YAML, as a submit body's `script` carries it."""
        return steps_yaml


@contextmanager
def serve(app: object) -> Iterator[str]:
    """Run `app` under Uvicorn on a free loopback port until the generator is closed."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, timeout_graceful_shutdown=2, lifespan="on"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the API server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@pytest.fixture
def api(team: Cairn, store: Store) -> Iterator[Api]:  # noqa: F811
    with store.begin() as conn:
        tokens = {
            name: identity.issue_token(conn, identity.get_user(conn, name).id) for name in PEOPLE
        }
    # A key for stored forge credentials, as a host that keeps them sets CAIRN_SECRET_KEY.
    config = team.config.model_copy(update={"secret_key": SecretStr(SECRET_KEY)})
    app = create_app(config, store=store)
    with serve(app) as url:
        made = Api(url=url, team=team, tokens=tokens)
        yield made
        for client in made.clients:
            client.close()
