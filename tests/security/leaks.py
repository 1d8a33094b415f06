"""Generated secrets of every kind cairn must mask, planted in realistic text, and the property.

Point the property at anything that turns text into something a person sees:

    check_producer(lambda planted: my_api.post_and_read(planted.text))

`produce` receives a `Planted` (its `text`, plus the `environ` and `configured` secrets the
producer's sanitizer must know about) and returns what a person would see: a string, or any
JSON-like structure of strings. The check fails when any planted secret, or any 12-character
piece of one, survives in it. No planted secret shares such a piece with `fixed_words`, the
text an answer may show whatever was planted, so a piece found is always a secret's own.
"""

from __future__ import annotations

import ast
import base64
import json
import string
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cairn

ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "_-"
PIECE = 12  # no run of this many characters of a secret may survive


@dataclass(frozen=True)
class Planted:
    """Text carrying secrets, and the secrets (the sensitive parts only) it carries."""

    text: str
    secrets: tuple[str, ...]
    environ: dict[str, str] = field(default_factory=dict)
    configured: tuple[str, ...] = ()


def _body(alphabet: str, size: int | tuple[int, int]) -> st.SearchStrategy[str]:
    low, high = (size, size) if isinstance(size, int) else size
    return st.text(alphabet, min_size=low, max_size=high)


def _distinct(strategy: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Values that cannot pass for an English word or a hex id (as a real secret would not).

    Without this, shrinking may settle on a value such as `worktree_val`, which cairn's own
    output contains for reasons that have nothing to do with the planted text.
    """
    return strategy.filter(lambda v: any(c.isupper() for c in v) and any(c.isdigit() for c in v))


def _prefixed(prefixes: list[str], alphabet: str, size: int | tuple[int, int]) -> Any:
    """(the random body, the whole token): the prefix says which kind, the body is the secret."""
    return st.builds(lambda p, b: (b, p + b), st.sampled_from(prefixes), _body(alphabet, size))


def _jwt(header: dict[str, str], payload: dict[str, Any], signature: bytes) -> str:
    def part(raw: bytes) -> str:
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    return ".".join(
        [part(json.dumps(header).encode()), part(json.dumps(payload).encode()), part(signature)]
    )


def _basic(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


def _pem(kind: str, body: bytes) -> str:
    lines = base64.b64encode(body).decode()
    wrapped = "\n".join(lines[i : i + 64] for i in range(0, len(lines), 64))
    return f"-----BEGIN {kind}PRIVATE KEY-----\n{wrapped}\n-----END {kind}PRIVATE KEY-----"


# Each kind: a strategy of (the secret's sensitive part, the snippet that carries it).
TOKENS: dict[str, st.SearchStrategy[tuple[str, str]]] = {
    "github": _prefixed(["ghp_", "gho_", "ghu_", "ghs_", "ghr_"], ALNUM, 36),
    "github_fine_grained": _prefixed(["github_pat_"], ALNUM + "_", 82),
    "gitlab": _prefixed(["glpat-", "gldt-", "glrt-", "glptt-"], URLSAFE, 20),
    "openai": _prefixed(["sk-", "sk-proj-", "sk-svcacct-"], URLSAFE, (40, 120)),
    "anthropic": _prefixed(["sk-ant-api03-", "sk-ant-admin01-"], URLSAFE, 93),
    "aws_key_id": _prefixed(["AKIA", "ASIA"], string.ascii_uppercase + string.digits, 16),
    "google_api_key": _prefixed(["AIza"], URLSAFE, 35),
    "google_oauth": _prefixed(["ya29."], URLSAFE, (60, 120)),
    "slack": st.builds(
        lambda kind, a, b, c: (c, f"xox{kind}-{a}-{b}-{c}"),
        st.sampled_from("bpaso"),
        _body(string.digits, 12),
        _body(string.digits, 13),
        _body(ALNUM, 24),
    ),
    "stripe": _prefixed(["sk_live_", "sk_test_", "rk_live_", "whsec_"], ALNUM, (24, 99)),
    "npm": _prefixed(["npm_"], ALNUM, 36),
    "pypi": _prefixed(["pypi-AgEIcHlwaS5vcmc"], URLSAFE, (60, 160)),
    "jwt": st.builds(
        _jwt,
        st.fixed_dictionaries({"alg": st.sampled_from(["HS256", "RS256"]), "typ": st.just("JWT")}),
        st.fixed_dictionaries({"sub": _body(ALNUM, (4, 20)), "exp": st.integers(0, 2**31)}),
        st.binary(min_size=32, max_size=64),
    ).map(lambda token: (token.split(".", 1)[1], token)),
}
_PASSWORD = _distinct(_body(ALNUM + "-_.~!*$", (10, 32)))
_B64 = string.ascii_letters + string.digits + "+/"


def _with_context(template: str, value: st.SearchStrategy[str]) -> Any:
    return value.map(lambda v: (v, template.format(v=v)))


CARRIED: dict[str, st.SearchStrategy[tuple[str, str]]] = {
    "private_key": st.builds(
        lambda kind, body: (_pem(kind, body), _pem(kind, body)),
        st.sampled_from(["", "RSA ", "EC ", "OPENSSH ", "ENCRYPTED "]),
        st.binary(min_size=48, max_size=400),
    ).map(lambda pair: (pair[0].split("\n", 2)[1], pair[1])),
    "authorization_bearer": _with_context("Authorization: Bearer {v}", _body(URLSAFE, (20, 60))),
    "authorization_basic": _with_context(
        "authorization: Basic {v}",
        st.builds(_basic, _PASSWORD, _PASSWORD),
    ),
    "cookie": _with_context("Cookie: sessionid={v}; theme=dark", _body(ALNUM, (20, 40))),
    "set_cookie": _with_context("Set-Cookie: auth={v}; Path=/; HttpOnly", _body(ALNUM, 32)),
    "url_password": st.one_of(
        _with_context("https://deploy:{v}@git.example.com/org/app.git", _PASSWORD),
        _with_context("postgresql://app:{v}@db.internal:5432/app", _PASSWORD),
        _with_context("redis://:{v}@cache:6379/0", _PASSWORD),
        _with_context("mongodb+srv://admin:{v}@cluster0.example.net/db", _PASSWORD),
    ),
    "connection_string": st.one_of(
        _with_context("Server=db;Database=app;User Id=sa;Password={v};", _PASSWORD),
        _with_context("host=db dbname=app user=app password={v} sslmode=require", _PASSWORD),
        _with_context("jdbc:mysql://db:3306/app?user=app&password={v}", _PASSWORD),
    ),
    "assignment": st.one_of(
        _with_context("aws_secret_access_key = {v}", _body(_B64, 40)),
        _with_context('"SecretAccessKey": "{v}"', _body(_B64, 40)),
        _with_context("DB_PASSWORD={v}", _PASSWORD),
        _with_context("api_key: '{v}'", _body(URLSAFE, (16, 40))),
        _with_context("--password {v}", _PASSWORD),
        _with_context("clientSecret={v}", _body(URLSAFE, (16, 40))),
    ),
    "slack_webhook": _with_context(
        "https://hooks.slack.com/services/T{v}/B0123456789/abcdefghijklmnopqrstuvwx",
        _body(string.ascii_uppercase + string.digits, 10),
    ),
    **TOKENS,
}

# Realistic surroundings: where a secret shows up in what a command or service prints.
CONTEXTS: tuple[Callable[[str], str], ...] = (
    lambda s: (
        "Traceback (most recent call last):\n"
        '  File "/srv/app/client.py", line 41, in connect\n'
        f"    session = open_session({s!r})\n"
        f"RuntimeError: the server refused {s}\n"
    ),
    lambda s: (
        "Cloning into 'app'...\n"
        f"remote: Invalid credentials ({s})\n"
        f"fatal: Authentication failed for {s}\n"
    ),
    lambda s: json.dumps({"error": "unauthorized", "detail": s, "status": 401}, indent=2),
    lambda s: f"2024-05-01T10:00:00Z INFO request sent\n{s}\n2024-05-01T10:00:01Z ERROR 403\n",
    lambda s: f"settings:\n  retries: 3\n  upstream: {s}\n",
    lambda s: f"$ make deploy\n{s}\nmake: *** [deploy] Error 1",
)


def _literals(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value


@cache
def fixed_words() -> str:
    """What an answer may show whatever was planted: the string literals of cairn and this file.

    Hypothesis draws text from the string literals of the code under test, so a generated
    secret can be one of cairn's own words, as `authentication_error` (a literal of its test
    Anthropic server) drawn as a bearer token: masked, it still left `uthenticatio` in the
    audit log, in the planted `fatal: Authentication failed` line around it. cairn's literals
    hold the fixed wording of its answers, this file's the text planted around the secrets.
    """
    files = [*sorted(Path(cairn.__file__).parent.rglob("*.py")), Path(__file__)]
    return "\n".join(literal for path in files for literal in _literals(path))


@cache
def _fixed_pieces() -> frozenset[str]:
    words = fixed_words()
    return frozenset(words[i : i + PIECE] for i in range(len(words) - PIECE + 1))


def fixed_piece(secret: str) -> str | None:
    """The first piece of `secret`, cut as `leaked` cuts it, that is in `fixed_words`, or None."""
    if len(secret) < PIECE:
        return secret if secret in fixed_words() else None
    pieces = (secret[i : i + PIECE] for i in range(len(secret) - PIECE + 1))
    return next((piece for piece in pieces if piece in _fixed_pieces()), None)


def _own(strategy: st.SearchStrategy[Any], secret: Callable[[Any], str] = lambda v: v) -> Any:
    """`strategy` without the values whose secret shares a piece with `fixed_words`.

    Only cairn's own words are left out: a generated body (random letters) shares no piece
    with them, so every kind is still planted, and any piece the property finds is a leak.
    """
    return strategy.filter(lambda value: fixed_piece(secret(value)) is None)


@st.composite
def planted_texts(
    draw: st.DrawFn, kinds: tuple[str, ...] = tuple(CARRIED), *, configured: bool = True
) -> Planted:
    """Text with 1-4 secrets of the given kinds, an environment value and a configured secret."""
    chosen = draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=4))
    secrets: list[str] = []
    parts: list[str] = []
    for kind in chosen:
        secret, snippet = draw(_own(CARRIED[kind], lambda pair: pair[0]))
        secrets.append(secret)
        parts.append(draw(st.sampled_from(CONTEXTS))(snippet))
    # Names are shown (as `[NAME]`) by design; values never are.
    name = draw(st.sampled_from(["APP_SETTING", "DEPLOY_TARGET", "UPSTREAM", "X_INTERNAL"]))
    env_value = draw(_own(_distinct(_body(ALNUM + "-_.:/", (12, 40)))))
    parts.insert(draw(st.integers(0, len(parts))), f"using {env_value} as {name.lower()}")
    extra: tuple[str, ...] = ()
    if configured:
        extra = (draw(_own(_distinct(_body(ALNUM + "-_", (12, 40))))),)
        parts.insert(draw(st.integers(0, len(parts))), f"configured value: {extra[0]} (do not log)")
    return Planted(
        text="\n".join(parts),
        secrets=(*secrets, env_value, *extra),
        environ={name: env_value},
        configured=extra,
    )


def shown_strings(shown: object) -> Iterator[str]:
    """Every string inside what a person sees (a string or a JSON-like structure)."""
    if isinstance(shown, str):
        yield shown
    elif isinstance(shown, dict):
        for key, value in shown.items():
            yield from shown_strings(key)
            yield from shown_strings(value)
    elif isinstance(shown, list | tuple):
        for item in shown:
            yield from shown_strings(item)


def leaked(secret: str, shown: object) -> str | None:
    """The first piece of `secret` found in `shown`, or None."""
    size = min(PIECE, len(secret))
    pieces = {secret[i : i + size] for i in range(len(secret) - size + 1)}
    for text in shown_strings(shown):
        for piece in pieces:
            if piece in text:
                return piece
    return None


def assert_no_leak(planted: Planted, shown: object) -> None:
    """Fail when `shown` carries any planted secret, or any 12-character piece of one."""
    for secret in planted.secrets:
        piece = leaked(secret, shown)
        assert piece is None, f"{piece!r} of a planted secret survived in:\n{shown!r}"


def check_producer(
    produce: Callable[[Planted], object],
    *,
    max_examples: int = 100,
    kinds: tuple[str, ...] = tuple(CARRIED),
) -> None:
    """Run the property: for generated planted text, what `produce` shows leaks no secret."""

    @settings(
        max_examples=max_examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(planted_texts(kinds))
    def property_holds(planted: Planted) -> None:
        assert_no_leak(planted, produce(planted))

    property_holds()
