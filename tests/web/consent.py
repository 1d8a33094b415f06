"""A forge's consent page in front of FakeForge's OAuth endpoint, as GitHub shows one.

FakeForge's /login/oauth/authorize grants at once; a person at a real forge sees a page first,
and may close the window there. This page offers Allow (on to FakeForge, which redirects back
with a code) and Deny (back with error=access_denied), so a test can also just close it.
"""

from __future__ import annotations

import html
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from cairn.testing.loopback import LoopbackServer


class ConsentPage:
    """Serves /authorize on 127.0.0.1; Allow forwards the query to `forge_url`'s authorize."""

    def __init__(self, forge_url: str) -> None:
        self.forge_url = forge_url
        self.shown = 0
        self._http = LoopbackServer(self, _Handler)
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/authorize"

    def close(self) -> None:
        self._http.shutdown()
        self._http.close_connections()
        self._http.server_close()
        self._thread.join()


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        owner: ConsentPage = self.server.owner  # type: ignore[attr-defined]
        query = dict(parse_qsl(urlsplit(self.path).query))
        owner.shown += 1
        allow = f"{owner.forge_url}/login/oauth/authorize?{urlencode(query)}"
        deny = f"{query.get('redirect_uri', '')}?" + urlencode(
            {"error": "access_denied", "state": query.get("state", "")}
        )
        page = (
            "<!doctype html><title>Authorize cairn</title><h1>Authorize cairn?</h1>"
            f'<a id="allow" href="{html.escape(allow)}">Allow</a> '
            f'<a id="deny" href="{html.escape(deny)}">Deny</a>'
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)
