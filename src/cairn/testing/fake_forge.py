"""FakeForge: a GitHub- or GitLab-shaped forge on 127.0.0.1, over real HTTP, with real git.

It serves the REST subset cairn's forge clients use (`fake_forge_api`: GitHub v3 under
/api/v3, GitLab v4 under /api/v4), real git over smart HTTP through `git http-backend` at
/{owner}/{name}.git (basic auth, the token as password), and a minimal OAuth authorization
authorization-code flow (`fake_forge_oauth`: /login/oauth/authorize shows Authorize and
Cancel, /login/oauth/access_token gives a token the forge accepts) for web onboarding.

    with FakeForge(tmp_path, kind="github") as forge:
        forge.create_repo("acme/app", source=sample_repo)
        token = forge.add_token(scopes={"read", "write"})
        forge.git_url("acme/app")  # http://127.0.0.1:PORT/acme/app.git

Every call is recorded (`calls`), without its credential. `fail_after(method, path)` makes
the forge do a call, then drop the connection before answering, as a lost response does.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import socket
import subprocess
import threading
from base64 import b64decode
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from cairn.testing import fake_forge_api as api
from cairn.testing.fake_forge_oauth import OAuthApps, read_form
from cairn.testing.fake_forge_oauth import Page as OAuthPage
from cairn.testing.fake_forge_state import READ, WRITE, ForgeWorld, Protection, Pull, Token
from cairn.testing.loopback import LoopbackServer

__all__ = ["READ", "WRITE", "FakeForge", "Protection", "Pull", "RecordedCall"]

_GIT_PATH = re.compile(r"/(?P<repo>[\w.-]+/[\w.-]+)\.git(?P<rest>/.*)$")


@dataclass(frozen=True)
class RecordedCall:
    """One request as the forge received it (its credential reduced to whose it was)."""

    method: str
    path: str
    status: int
    user: str | None  # whose token authorized it; None when none or a wrong one
    body: Any = None
    dropped: bool = False  # the forge acted, then dropped the connection unanswered


@dataclass(frozen=True)
class Refusal:
    """An answer the forge gives instead of doing a call (`FakeForge.refuse`)."""

    status: int
    headers: dict[str, str]
    message: str


class FakeForge:
    """A forge of `kind` ("github" or "gitlab") serving bare repositories under `root`."""

    def __init__(self, root: Path, *, kind: str = "github") -> None:
        if kind not in ("github", "gitlab"):
            raise ValueError(f"kind must be github or gitlab, not {kind!r}")
        self.kind = kind
        self.world = ForgeWorld(root)
        self.test_token: str | None = None  # the `fake_forge` fixture's read-and-write token
        self._lock = threading.RLock()
        self._calls: list[RecordedCall] = []
        self._faults: list[tuple[str, re.Pattern[str], list[int]]] = []
        self._refusals: list[tuple[str, re.Pattern[str], list[int], Refusal]] = []
        self._oauth = OAuthApps(self.world)
        self._http = LoopbackServer(self, _Handler)
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    # Where things are.

    @property
    def url(self) -> str:
        """The forge's web base, as a room's --forge-url names it."""
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/v3" if self.kind == "github" else f"{self.url}/api/v4"

    def git_url(self, repo: str) -> str:
        return f"{self.url}/{repo}.git"

    # Setting the world up.

    def create_repo(
        self, repo: str, *, source: Path | None = None, default_branch: str = "main"
    ) -> Path:
        """A bare repository `owner/name`, holding `source`'s HEAD as its default branch."""
        with self._lock:
            return self.world.create_repo(repo, source=source, default_branch=default_branch)

    def add_token(self, *, user: str = "cairn-bot", scopes: Iterable[str] = (READ, WRITE)) -> str:
        """A new token of `user` with `scopes` (read: see; write: push and change PRs)."""
        token = f"fake_{secrets.token_hex(12)}"
        with self._lock:
            self.world.tokens[token] = Token(user, frozenset(scopes))
        return token

    def protect(
        self, repo: str, branch: str, *, approvals: int = 0, checks: Iterable[str] = ()
    ) -> None:
        """Require `approvals` approving reviews (not the author's) and passing `checks`."""
        with self._lock:
            self.world.protection[(repo, branch)] = Protection(approvals, tuple(checks))

    def set_check(self, repo: str, ref: str, name: str, state: str) -> None:
        """Report check `name` on branch or commit `ref`: success, failure or pending."""
        with self._lock:
            sha = self.world.branch_sha(repo, ref) or ref
            self.world.checks.setdefault((repo, sha), {})[name] = state

    def set_status(self, repo: str, ref: str, context: str, state: str) -> None:
        """Report GitHub commit status `context` (the older Statuses API, which many CI
        systems use instead of check runs) on `ref`: success, failure, error or pending."""
        with self._lock:
            sha = self.world.branch_sha(repo, ref) or ref
            self.world.statuses.setdefault((repo, sha), {})[context] = state

    def add_review(self, repo: str, number: int, user: str, state: str = "approved") -> None:
        """A review of pull request `number` by `user`: approved or changes_requested."""
        with self._lock:
            self._pull(repo, number).reviews.append((user, state))

    def close_by_hand(self, repo: str, number: int) -> None:
        """Someone closed pull request `number` in the forge's web page."""
        with self._lock:
            pull = self._pull(repo, number)
            pull.state, pull.closed_by_hand = "closed", True

    def fail_after(self, method: str, path: str, *, times: int = 1) -> None:
        """Do the next `times` calls matching `method` and the `path` regex, then drop them."""
        with self._lock:
            self._faults.append((method, re.compile(path), [times]))

    def refuse(
        self,
        method: str,
        path: str,
        status: int,
        *,
        headers: dict[str, str] | None = None,
        message: str = "refused",
        times: int = 1,
    ) -> None:
        """Answer the next `times` API calls matching `method` and the `path` regex with
        `status` (a 5xx, a rate limit's 403 or 429 with its headers) without doing them."""
        with self._lock:
            refusal = Refusal(status, dict(headers or {}), message)
            self._refusals.append((method, re.compile(path), [times], refusal))

    def register_oauth_app(
        self, *, scopes: Iterable[str] = (READ, WRITE), user: str = "oauth-user"
    ) -> tuple[str, str]:
        """An OAuth app: (client id, client secret); its access tokens act as `user`."""
        with self._lock:
            return self._oauth.register(scopes, user)

    # Reading what happened.

    @property
    def calls(self) -> tuple[RecordedCall, ...]:
        with self._lock:
            return tuple(self._calls)

    def pulls(self, repo: str) -> list[Pull]:
        """The repository's pull requests, every state, oldest first."""
        with self._lock:
            return list(self.world.pulls.get(repo, []))

    def branch_sha(self, repo: str, branch: str) -> str | None:
        with self._lock:
            return self.world.branch_sha(repo, branch)

    def close(self) -> None:
        self._http.shutdown()
        self._http.close_connections()
        self._http.server_close()
        self._thread.join()

    def __enter__(self) -> FakeForge:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # The handler's side.

    def _pull(self, repo: str, number: int) -> Pull:
        pull = self.world.find_pull(repo, number)
        if pull is None:
            raise KeyError(f"no pull request {number} in {repo}")
        return pull

    def token_of(self, value: str | None) -> Token | None:
        with self._lock:
            return self.world.tokens.get(value or "")

    def record(self, call: RecordedCall) -> None:
        with self._lock:
            self._calls.append(call)

    def should_drop(self, method: str, path: str) -> bool:
        with self._lock:
            for want, pattern, left in self._faults:
                if want == method and pattern.search(path) and left[0] > 0:
                    left[0] -= 1
                    return True
        return False

    def refusal_for(self, method: str, path: str) -> Refusal | None:
        with self._lock:
            for want, pattern, left, refusal in self._refusals:
                if want == method and pattern.search(path) and left[0] > 0:
                    left[0] -= 1
                    return refusal
        return None

    def api_answer(self, call: api.Call) -> api.Answer:
        with self._lock:
            return api.answer(self.world, self.kind, call)

    def oauth_answer(
        self, method: str, path: str, query: dict[str, str], form: dict[str, str]
    ) -> OAuthPage:
        with self._lock:
            return self._oauth.answer(method, path, query, form)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    @property
    def forge(self) -> FakeForge:
        server = self.server
        assert isinstance(server, LoopbackServer)
        forge: FakeForge = server.owner
        return forge

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: the calls are recorded instead

    def do_GET(self) -> None:
        self._dispatch()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def _dispatch(self) -> None:
        split = urlsplit(self.path)
        path, query = split.path, dict(parse_qsl(split.query))
        body = self._body()
        git = _GIT_PATH.match(path)
        if git is not None:
            self._git(git["repo"], git["rest"], split.query, body)
        elif path.startswith("/login/oauth/"):
            self._oauth(path, query, body)
        elif path.startswith(("/api/v3/", "/api/v4/")):
            self._api(path[len("/api/v3") :], query, body)
        elif path == "/api/graphql" and self.forge.kind == "github":
            self._api("/graphql", query, body)
        else:
            self._send(404, {"message": "Not Found"})

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            self.rfile.readline()
            return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _api_token(self) -> str | None:
        if self.forge.kind == "gitlab" and self.headers.get("PRIVATE-TOKEN"):
            return self.headers["PRIVATE-TOKEN"]
        scheme, _, value = (self.headers.get("Authorization") or "").partition(" ")
        return value if scheme.lower() in ("bearer", "token") else None

    def _api(self, path: str, query: dict[str, str], raw: bytes) -> None:
        token = self.forge.token_of(self._api_token())
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            self._send(400, {"message": "Problems parsing JSON"})
            return
        refusal = self.forge.refusal_for(self.command, path)
        if refusal is not None:
            user = token.user if token else None
            self.forge.record(RecordedCall(self.command, path, refusal.status, user, body))
            self._send(refusal.status, {"message": refusal.message}, refusal.headers)
            return
        base = self.forge.api_url
        call = api.Call(self.command, path, query, body, token, base)
        status, answer = self.forge.api_answer(call)
        self._finish(path, status, token, body, answer)

    def _finish(self, path: str, status: int, token: Token | None, body: Any, answer: Any) -> None:
        dropped = self.forge.should_drop(self.command, path)
        user = token.user if token else None
        self.forge.record(RecordedCall(self.command, path, status, user, body, dropped))
        if dropped:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        self._send(status, answer)

    def _send(self, status: int, answer: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _basic_token(self) -> Token | None:
        scheme, _, value = (self.headers.get("Authorization") or "").partition(" ")
        if scheme.lower() != "basic":
            return None
        with contextlib.suppress(ValueError):
            _, _, password = b64decode(value).decode().partition(":")
            return self.forge.token_of(password)
        return None

    def _git(self, repo: str, rest: str, query: str, body: bytes) -> None:
        token = self._basic_token()
        pushing = "git-receive-pack" in rest or "service=git-receive-pack" in query
        need = WRITE if pushing else READ
        known = repo in self.forge.world.repos
        if token is None:
            self.forge.record(RecordedCall(self.command, f"/{repo}.git{rest}", 401, None))
            challenge = {"WWW-Authenticate": 'Basic realm="fake forge"'}
            self._send(401, {"message": "Authentication required"}, challenge)
            return
        if not known or need not in token.scopes:
            status = 404 if not known or READ not in token.scopes else 403
            self.forge.record(RecordedCall(self.command, f"/{repo}.git{rest}", status, token.user))
            self._send(status, {"message": "Permission denied" if status == 403 else "Not Found"})
            return
        status, headers, output = self._http_backend(repo, rest, query, body, token.user)
        self.forge.record(RecordedCall(self.command, f"/{repo}.git{rest}", status, token.user))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(output)))
        self.end_headers()
        self.wfile.write(output)

    def _http_backend(
        self, repo: str, rest: str, query: str, body: bytes, user: str
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        environ = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": str(self.forge.world.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": f"/{repo}.git{rest}",
            "QUERY_STRING": query,
            "REQUEST_METHOD": self.command,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_USER": user,
            "REMOTE_ADDR": "127.0.0.1",
            "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
            "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
            "GIT_CONFIG_NOSYSTEM": "1",
            "HOME": str(self.forge.world.root),
        }
        done = subprocess.run(
            ["git", "http-backend"], input=body, env=environ, capture_output=True, check=False
        )
        head, _, output = done.stdout.partition(b"\r\n\r\n")
        status, headers = 200, []
        for line in head.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value.strip()))
        return status, headers, output

    def _oauth(self, path: str, query: dict[str, str], raw: bytes) -> None:
        form = read_form(raw, self.headers.get("Content-Type", ""))
        page = self.forge.oauth_answer(self.command, path, query, form)
        self.forge.record(RecordedCall(self.command, path, page.status, None))
        self.send_response(page.status)
        for name, value in page.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(page.body)))
        self.end_headers()
        self.wfile.write(page.body)
