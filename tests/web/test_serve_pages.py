"""`cairn serve` serves the pages too, with the forge OAuth app of CAIRN_FORGE_OAUTH_*."""

from __future__ import annotations

import subprocess
import time

import httpx
import pytest

from acceptance.conftest import CAIRN, Cli
from api.test_serve import _free_port
from authority.conftest import cli, strict_home  # noqa: F401  (a home with admin and alice)

from .forms import sign_in, text_of

pytestmark = pytest.mark.acceptance


def test_cairn_serve_serves_the_pages_and_their_scripts(cli: Cli) -> None:  # noqa: F811
    cli.room()
    token = cli.json("user", "token", "admin")["token"]
    port = _free_port()
    env = {
        **cli.env,
        "CAIRN_FORGE_OAUTH_CLIENT_ID": "client-1",
        "CAIRN_FORGE_OAUTH_CLIENT_SECRET": "not-shown-anywhere",
    }
    server = subprocess.Popen(
        [str(CAIRN), "serve", "--port", str(port)],
        env=env,
        cwd=cli.tmp,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{url}/api/health")
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and server.poll() is None, "serve did not start"
                time.sleep(0.1)
        with httpx.Client(base_url=url, timeout=30) as browser:
            sign_in(browser, token)
            onboarding = browser.get("/onboarding?group=1")
            assert "Authorize at the forge" in text_of(onboarding)
            assert "not-shown-anywhere" not in onboarding.text
            for path in ("/static/cairn.js", "/static/vendor/htmx-2.0.11.min.js"):
                assert browser.get(path).status_code == 200
    finally:
        server.terminate()
        out, err = server.communicate(timeout=20)
    assert token not in out + err and "Traceback" not in err


def test_half_an_oauth_app_is_refused_with_what_to_set(cli: Cli) -> None:  # noqa: F811
    done = subprocess.run(
        [str(CAIRN), "serve", "--port", str(_free_port())],
        env={**cli.env, "CAIRN_FORGE_OAUTH_CLIENT_ID": "client-1"},
        cwd=cli.tmp,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "CAIRN_FORGE_OAUTH_CLIENT_SECRET" in done.stderr + done.stdout
    assert "Traceback" not in done.stderr
