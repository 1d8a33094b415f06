"""FakeForge's OAuth authorization-code flow, driven with httpx as a browser and a server would."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import httpx

from cairn.testing.fake_forge import FakeForge

BACK = "http://127.0.0.1:9/onboarding/callback"


def _follow(forge: FakeForge, page: httpx.Response, link: str) -> dict[str, list[str]]:
    """Click `link` on the authorization page; the query the browser is sent back with."""
    found = re.search(rf'id="{link}" href="([^"]+)"', page.text)
    assert found, page.text
    href = found.group(1).replace("&amp;", "&")
    answer = httpx.get(forge.url + href, follow_redirects=False)
    assert answer.status_code == 302
    where = urlsplit(answer.headers["location"])
    assert f"{where.scheme}://{where.netloc}{where.path}" == BACK
    return parse_qs(where.query)


def _authorize_page(forge: FakeForge, client: str) -> httpx.Response:
    params = {"client_id": client, "redirect_uri": BACK, "state": "s-42"}
    page = httpx.get(f"{forge.url}/login/oauth/authorize", params=params)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert ">Authorize<" in page.text and ">Cancel<" in page.text
    return page


def test_authorize_gives_a_code_that_exchanges_for_a_token_the_forge_accepts(
    fake_forge: FakeForge,
) -> None:
    client, secret = fake_forge.register_oauth_app(user="alice")
    back = _follow(fake_forge, _authorize_page(fake_forge, client), "authorize")
    assert back["state"] == ["s-42"] and "error" not in back
    [code] = back["code"]
    exchanged = httpx.post(
        f"{fake_forge.url}/login/oauth/access_token",
        data={"client_id": client, "client_secret": secret, "code": code, "redirect_uri": BACK},
        headers={"Accept": "application/json"},
    )
    assert exchanged.status_code == 200, exchanged.text
    token = exchanged.json()["access_token"]
    repo = httpx.get(
        f"{fake_forge.api_url}/repos/acme/app", headers={"Authorization": f"Bearer {token}"}
    )
    assert repo.status_code == 200 and repo.json()["full_name"] == "acme/app"
    assert fake_forge.calls[-1].user == "alice"
    again = httpx.post(
        f"{fake_forge.url}/login/oauth/access_token",
        json={"client_id": client, "client_secret": secret, "code": code},
    )
    assert again.status_code == 400 and again.json()["error"] == "bad_verification_code"
    assert all(token not in repr(call) and secret not in repr(call) for call in fake_forge.calls)


def test_cancel_sends_the_browser_back_with_access_denied(fake_forge: FakeForge) -> None:
    client, _ = fake_forge.register_oauth_app()
    back = _follow(fake_forge, _authorize_page(fake_forge, client), "cancel")
    assert back == {"error": ["access_denied"], "state": ["s-42"]}


def test_wrong_clients_secrets_and_redirects_are_refused(fake_forge: FakeForge) -> None:
    client, secret = fake_forge.register_oauth_app()
    unknown = httpx.get(
        f"{fake_forge.url}/login/oauth/authorize",
        params={"client_id": "nobody", "redirect_uri": BACK},
    )
    assert unknown.status_code == 400 and "not registered" in unknown.text
    no_back = httpx.get(f"{fake_forge.url}/login/oauth/authorize", params={"client_id": client})
    assert no_back.status_code == 400 and "redirect_uri" in no_back.text
    [code] = _follow(fake_forge, _authorize_page(fake_forge, client), "authorize")["code"]
    url = f"{fake_forge.url}/login/oauth/access_token"
    wrong_secret = httpx.post(url, data={"client_id": client, "client_secret": "x", "code": code})
    assert wrong_secret.status_code == 401
    elsewhere = {"client_id": client, "client_secret": secret, "code": code}
    moved = httpx.post(url, data=elsewhere | {"redirect_uri": "http://127.0.0.1:9/other"})
    assert moved.status_code == 400, "a code works only for the redirect it was issued for"
    unused = httpx.post(url, data=elsewhere)
    assert unused.status_code == 400, "a refused exchange used the code up"
