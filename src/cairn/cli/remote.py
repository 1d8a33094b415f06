"""The CLI as an API client: with CAIRN_URL and CAIRN_TOKEN set, commands act as the token's user.

Locally the CLI opens the store and `--as` picks who acts (the store owner's switch). Against a
server nobody picks: the token says who you are, so `--as` is refused rather than ignored, and
an answer the server refused (401/403/404/409/422) becomes the same error, with the same exit
code, as the local command would raise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cairn.errors import (
    CairnError,
    InvalidState,
    NotAllowed,
    NotFound,
    StoreError,
    UsageError,
)

TIMEOUT_SECONDS = 60.0
AS_REFUSED = (
    "--as is not accepted with CAIRN_URL: over the API you act as the user whose token "
    "CAIRN_TOKEN holds; to act as someone else, use their token"
)

# The commands that work through the API; every other one is refused with REMOTE_ONLY_LOCAL.
REMOTE_COMMANDS = frozenset(
    {
        ("submit",),
        ("jobs",),
        ("show",),
        ("approve",),
        ("reject",),
        ("reply",),
        ("cancel",),
        ("resume",),
        ("retry",),
        ("room", "list"),
        ("room", "create"),  # a forge repository or a remote URL; a local path needs the host
        ("room", "rebind"),
        ("room", "check"),
        ("room", "set-agent"),
        ("group", "list"),
        ("group", "show"),
        ("group", "member", "add"),
        ("group", "member", "remove"),
        ("agent", "list"),
        ("agent", "add"),
        ("agent", "remove"),
        ("agent", "check"),  # the named agent's spec from the server; the check runs here
        ("schedule", "list"),
        ("schedule", "add"),
        ("schedule", "remove"),
        ("schedule", "fire"),
        ("audit", "verify"),
        ("audit", "head"),
        ("audit", "log"),
        ("user", "add"),
        ("user", "token"),
        ("user", "list"),
        ("group", "add"),
        ("group", "policy"),
        ("credential", "set"),
        ("credential", "list"),
        ("credential", "remove"),
    }
)
GROUPS = frozenset({"user", "group", "room", "agent", "credential", "cache", "schedule", "audit"})
SUBGROUPS = frozenset({("group", "member")})
GLOBAL_OPTIONS_WITH_VALUE = frozenset({"--home"})


class Unauthenticated(CairnError):
    """The server does not know the token (401)."""


_BY_STATUS: dict[int, type[CairnError]] = {
    401: Unauthenticated,
    403: NotAllowed,
    404: NotFound,
    409: InvalidState,
    413: UsageError,
    422: UsageError,
    503: StoreError,
}


def command_path(args: Sequence[str]) -> tuple[str, ...]:
    """The command a command line names (`("group", "member", "add")`), global options skipped."""
    words: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in GLOBAL_OPTIONS_WITH_VALUE and not words:
            skip = True
            continue
        if arg.startswith("-"):
            if words:
                break
            continue
        words.append(arg)
        path = tuple(words)
        if len(words) == 1 and arg not in GROUPS:
            break
        if len(words) == 2 and path not in SUBGROUPS:
            break
        if len(words) == 3:
            break
    return tuple(words)


def refuse_local_only(args: Sequence[str]) -> None:
    """Refuse, before anything runs, a command that has no meaning against a server."""
    if any(arg in ("--help", "-h") for arg in args):
        return
    path = command_path(args)
    if not path or path in REMOTE_COMMANDS:
        return
    if (path[0] in GROUPS and len(path) == 1) or path == ("group", "member"):
        return  # a group alone prints what it offers
    named = " ".join(path)
    raise UsageError(
        f"`cairn {named}` works on the store directly, so it runs on the cairn host itself, not "
        "through CAIRN_URL; unset CAIRN_URL to use it locally (as the store's owner)"
    )


@dataclass(frozen=True)
class Remote:
    """A cairn server and the token that says who the caller is."""

    url: str
    token: str

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Remote | None:
        """The server CAIRN_URL names, with CAIRN_TOKEN; None without CAIRN_URL (local mode)."""
        url = environ.get("CAIRN_URL", "").strip()
        if not url:
            return None
        if not url.startswith(("http://", "https://")):
            raise UsageError(
                "CAIRN_URL is the address of a cairn server, such as http://127.0.0.1:8765"
            )
        token = environ.get("CAIRN_TOKEN", "").strip()
        if not token:
            raise UsageError(
                "CAIRN_URL is set but CAIRN_TOKEN is not: set it to the API token that "
                "`cairn user add` (or `cairn user token`) printed for you"
            )
        return cls(url=url.rstrip("/"), token=token)

    def get(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        """The JSON of a GET, or the error the server answered with."""
        return self._call("GET", path, params=params)

    def post(self, path: str, body: Mapping[str, Any] | None = None) -> Any:
        """The JSON of a POST, or the error the server answered with."""
        return self._call("POST", path, body=body)

    def put(self, path: str, body: Mapping[str, Any]) -> Any:
        """The JSON of a PUT (`None` values sent as null), or the error the server answered with."""
        return self._call("PUT", path, body=body, keep_none=True)

    def delete(self, path: str) -> Any:
        """The JSON of a DELETE, or the error the server answered with."""
        return self._call("DELETE", path)

    def _call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Mapping[str, Any] | None = None,
        keep_none: bool = False,
    ) -> Any:
        import httpx

        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        try:
            with httpx.Client(base_url=self.url, timeout=TIMEOUT_SECONDS) as client:
                answer = client.request(
                    method,
                    path,
                    params={k: v for k, v in (params or {}).items() if v is not None},
                    json=None
                    if body is None
                    else {k: v for k, v in body.items() if keep_none or v is not None},
                    headers=headers,
                )
        except httpx.HTTPError as exc:
            raise StoreError(
                f"the cairn server at CAIRN_URL did not answer ({type(exc).__name__}); check "
                "the address and that `cairn serve` runs there, then try again"
            ) from None
        if answer.is_success:
            return answer.json() if answer.content else None
        raise _error_of(answer.status_code, _body(answer))


def _body(answer: Any) -> dict[str, Any]:
    try:
        found = answer.json()
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _error_of(status: int, body: Mapping[str, Any]) -> CairnError:
    """The error the local command would raise for this answer, next steps kept structured."""
    from cairn.next_action import from_data

    message = str(body.get("error") or f"the server refused the request (HTTP {status})")
    if status == 401:
        message = (
            "the server does not accept CAIRN_TOKEN: set it to the API token `cairn user add` "
            "(or `cairn user token`) printed for you"
        )
    try:
        steps = from_data(body.get("next") if isinstance(body.get("next"), list) else None)
    except (ValueError, KeyError, TypeError):
        steps = ()
    kind = _BY_STATUS.get(status, CairnError)
    return kind(message, next_actions=steps)


def local_script(agent: str | None) -> tuple[str | None, str | None]:
    """`(script, agent)` for the server: a local `script:PATH` travels as the file's YAML."""
    if agent is None or agent.partition(":")[0].strip() != "script":
        return None, agent
    from pathlib import Path

    path = Path(agent.partition(":")[2].strip()).expanduser()
    try:
        return path.read_text(encoding="utf-8"), None
    except (OSError, UnicodeDecodeError):
        raise UsageError(
            "--agent script:PATH names a script file that cannot be read here; check the path"
        ) from None
