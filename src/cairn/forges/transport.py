"""One door to a forge's REST API: timeouts, auth headers, and failures in plain words.

A failure never carries the credential: cairn's own messages never name it, and a forge's
own message is cut short and has the credential masked before it is quoted.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import httpx

from cairn.errors import ForgeAccessDenied, ForgeError

DEFAULT_TIMEOUT = 30.0
_QUOTED = 200


class ForgeHTTP:
    """Calls to one forge API (`api`), authenticated by `headers`, named `forge` in errors."""

    def __init__(
        self,
        forge: str,
        api: str,
        *,
        headers: Mapping[str, str],
        secret: str,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.forge = forge
        self.host = urlsplit(api).netloc
        self._secret = secret
        self._api = api.rstrip("/")
        self._headers = {**headers, "User-Agent": "cairn"}
        self._transport = transport
        self._timeout = timeout

    def call(
        self,
        method: str,
        path: str,
        *,
        permission: str,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        missing_ok: bool = False,
    ) -> Any:
        """The JSON answer of one call; None for a 404 when `missing_ok`.

        `permission` is what the call needs, named as the forge's token settings name it: a
        401 or 403 answer says that it is missing.
        """
        try:
            # A client per call: no connection outlives it, whoever forgets to close a forge.
            with httpx.Client(
                headers=self._headers, timeout=self._timeout, transport=self._transport
            ) as client:
                response = client.request(method, self._api + path, json=body, params=params)
        except httpx.TimeoutException:
            raise ForgeError(
                f"{self.forge} at {self.host} did not answer within {self._timeout:g} s; "
                "check --forge-url and the network, then resume"
            ) from None
        except httpx.HTTPError:
            raise ForgeError(
                f"the connection to {self.forge} at {self.host} broke before it answered; "
                "check --forge-url and the network, then resume (cairn checks what happened "
                "before repeating anything)"
            ) from None
        if response.status_code == 404 and missing_ok:
            return None
        if response.status_code >= 400:
            raise self._refusal(response, permission)
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            # A proxy's, captive portal's or maintenance page's HTML, or not a forge at all.
            raise ForgeError(
                f"{self.forge} at {self.host} did not answer JSON; check --forge-url"
            ) from None

    def _refusal(self, response: httpx.Response, permission: str) -> ForgeError:
        status = response.status_code
        limited = _rate_limited(response)
        if limited is not None:
            # GitHub spends its rate limit with a 403: no permission is missing, and a person
            # told to grant one would chase the wrong thing.
            return ForgeError(
                f"{self.forge} at {self.host} is rate limiting the credential ({status}); "
                f"{limited}, then resume (nothing is missing from the credential)"
            )
        if status == 401:
            return ForgeAccessDenied(
                f"{self.forge} refused the credential (401): it is wrong, expired or revoked; "
                f"give the room a token with {permission}"
            )
        if status == 403:
            return ForgeAccessDenied(
                f"the credential lacks {permission} ({self.forge} answered 403); "
                "grant it, or give the room a token that has it"
            )
        return ForgeError(f"{self.forge} refused the call ({status}): {self._quote(response)}")

    def _quote(self, response: httpx.Response) -> str:
        try:
            message: Any = response.json().get("message", "")
        except (ValueError, AttributeError):
            message = ""
        text = " ".join(str(message).split())[:_QUOTED] or "no reason given"
        return text.replace(self._secret, "***") if self._secret else text


def _rate_limited(response: httpx.Response) -> str | None:
    """When to try again if `response` is a rate limit (a 429, or GitHub's 403 with its
    limit spent or a secondary limit's Retry-After); None for any other refusal."""
    headers = response.headers
    retry = headers.get("retry-after", "").strip()
    spent = headers.get("x-ratelimit-remaining", "").strip() == "0"
    if response.status_code == 429 or (response.status_code == 403 and (spent or retry)):
        if retry.isdigit():
            return f"wait {int(retry)} s"
        reset = headers.get("x-ratelimit-reset", "").strip()
        if reset.isdigit():
            when = datetime.fromtimestamp(int(reset), tz=UTC).strftime("%H:%M UTC")
            return f"wait until {when}"
        return "wait a while"
    return None
