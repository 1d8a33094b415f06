"""Bounded, masked text for anything a user sees: no secrets, no local paths, no internal commands.

Every text a person can read (diagnoses, summaries, reasons, feed, CLI errors) goes through
one `Sanitizer` when it is *written*, so the store never holds what it must not show. It masks
known secret shapes (provider tokens, JWTs, private keys, credentials in headers, URLs and
assignments), the values of the environment and of configured secrets, replaces local paths
with placeholders, drops cairn's own command lines, strips terminal control characters (so
text cannot hide or fake what the CLI prints beside it), and bounds the length.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from cairn.errors import CairnError

if TYPE_CHECKING:
    from cairn.config import Config

DIAGNOSIS_LIMIT = 500
SUMMARY_LIMIT = 4000
CUT_MARKER = " …[cut]"
MASK = "[secret]"
INTERNAL_COMMAND = "[internal command]"
_MIN_SECRET_NAMED = 4
_MIN_ANY_VALUE = 6
# Variables whose values are locations, not secrets, even though "pwd" reads like a password.
_NOT_SECRET_NAMES = frozenset({"PWD", "OLDPWD"})
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|PWD|KEY|AUTH|CREDENTIAL|COOKIE|SESSION", re.I)

_T = r"[A-Za-z0-9_-]"  # the characters of most token bodies
_START = r"(?<![A-Za-z0-9_])"  # a token starts where no token character precedes it
TOKEN_SHAPES: tuple[str, ...] = (
    r"gh[pousr]_[A-Za-z0-9]{20,}",  # GitHub classic, OAuth, user, server, refresh
    rf"github_pat_{_T}{{20,}}",  # GitHub fine-grained
    rf"gl(?:pat|dt|rt|ptt|ft|imt|oas|cbt|soat|ffct|agent)-{_T}{{16,}}",  # GitLab
    rf"GR1348941{_T}{{16,}}",  # GitLab runner registration
    rf"sk-ant-{_T}{{16,}}",  # Anthropic
    rf"sk-(?:proj-|svcacct-|admin-)?{_T}{{16,}}",  # OpenAI
    r"(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[A-Z0-9]{16}",  # AWS key ids
    rf"AIza{_T}{{30,}}",  # Google API keys
    rf"ya29\.{_T}{{16,}}",  # Google OAuth access tokens
    rf"GOCSPX-{_T}{{16,}}",  # Google OAuth client secrets
    rf"1//0{_T}{{20,}}",  # Google refresh tokens
    r"xox[abposre]-[A-Za-z0-9-]{10,}",  # Slack
    r"xapp-[A-Za-z0-9-]{10,}",  # Slack app-level
    r"(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}",  # Stripe
    r"whsec_[A-Za-z0-9]{16,}",  # Stripe webhook secrets
    r"npm_[A-Za-z0-9]{30,}",  # npm
    rf"pypi-{_T}{{16,}}",  # PyPI
    r"eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*",  # JWT (and JWS/JWE heads)
)
_TOKENS = re.compile(_START + "(?:" + "|".join(TOKEN_SHAPES) + ")")
_SLACK_HOOK = re.compile(r"hooks\.slack\.com/(?:services|workflows)/([A-Za-z0-9/_-]+)")
_KEY_END = r"-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
_PRIVATE_KEY = re.compile(
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:" + _KEY_END + r"|\Z)", re.S
)
# A key's END line and the base64 lines above it: a text cut after its BEGIN line (the last
# lines of a command's output) still holds the key's body.
_PRIVATE_KEY_END = re.compile(_KEY_END)
_KEY_BODY_LINE = re.compile(r"[A-Za-z0-9+/=]+\r?")
# A header whose whole value is a credential: masked to the end of its quote or line. Quotes
# may be JSON-escaped (`\"`) when the text is JSON inside JSON.
_HEADER = re.compile(
    r"(?i)(?<![\w-])((?:proxy-)?authorization|(?:set-)?cookie|x-api-key|api-key|x-auth-token"
    r"|private-token|x-amz-security-token|x-goog-api-key)(\\?[\"']?\s*[:=]\s*)(\\?[\"']?)"
)
_BEARER = re.compile(r"(?i)(?<![\w-])(bearer|basic|token)(\s+)([A-Za-z0-9._~+/=-]{8,})")
# `scheme://user:password@host`; a raw `@` in a password: the last one before the host ends it.
_URL_USERINFO = re.compile(
    r"(?i)\b([a-z][a-z0-9+.-]{0,30}://)([^\s/@'\"<>:]{0,256})(:[^\s'\"<>]{0,256}?)?@"
    r"(?=[^\s@'\"<>/]*(?:[\s'\"<>/]|$))"
)
# `name = value`, `"name": "value"`, `name: value`, `--name value`: the name decides. Only the
# name and separator are matched, so a value may itself hold a further assignment.
_ASSIGNMENT_HEAD = re.compile(r"(?<![\w-])([A-Za-z_][\w.-]*)(\\?[\"']?\s*[:=]\s*)")
_FLAG_HEAD = re.compile(r"(?<![\w-])(--[A-Za-z][\w-]*)([ \t]+)(?=[^\s\"'])(?!--)")
_VALUE = re.compile(
    r'\\"(?:[^"\\\r\n]|\\[^"])*\\"|"[^"\r\n]*"|\'[^\'\r\n]*\'|[^\s"\',;&<>{}\[\]()\\]+'
)
_NAME_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_SECRET_ANY_WORDS = frozenset(
    {"password", "passwd", "secret", "token", "credential", "apikey", "passphrase"}
)
_SECRET_LAST_WORDS = _SECRET_ANY_WORDS | {
    "pwd", "pass", "secrets", "key", "auth", "authorization", "credentials", "cookie",
    "session", "sessionid", "privatekey", "signature", "sig", "dsn",
}  # fmt: skip

# cairn's own command lines (hardened git, the sandbox) say how cairn works, not what failed.
_INTERNAL_LINE = re.compile(
    r"(?m)^[^\n]*(?:\bbwrap\s+--|core\.hooksPath=/dev/null|GIT_CONFIG_PARAMETERS)[^\n]*$"
)
_PYTHON_COMMAND = re.compile(r"Command '\[[^\n]*?\]'")
_PRIVATE_TMP = re.compile(re.escape(tempfile.gettempdir().rstrip("/")) + r"/cairn-[\w.-]+")
_PATH_END = r"(?![\w.-])"  # `/home/al` is not a prefix of `/home/alice`

# What a terminal obeys instead of printing: escape sequences are removed whole, so `\x1b[8m`
# leaves no `[8m` behind. CSI (`ESC [` or C1 `\x9b`); the string controls OSC, DCS, SOS, PM
# and APC up to their terminator (never past a line end, so a stray opener costs one line, not
# the rest of the text); the other escapes; then any single C0 control but newline and tab,
# DEL, C1, and the bidi overrides and isolates that reorder what a reader sees.
_TERMINAL_CONTROL = re.compile(
    r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]?"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]"
)


class Sanitizer:
    """Masks secrets, known local paths and environment values, then bounds the length."""

    def __init__(
        self,
        *,
        paths: Mapping[str, Path | str] | None = None,
        environ: Mapping[str, str] | None = None,
        secrets: Iterable[str] = (),
    ) -> None:
        table: dict[str, tuple[str, bool]] = {}
        for placeholder, path in (paths or {}).items():
            for variant in _path_variants(path):
                table.setdefault(variant, (placeholder, True))
        for name, value in (os.environ if environ is None else environ).items():
            _add_environment_value(table, name, value)
        for secret in secrets:
            for variant in {secret, secret.strip()}:
                if len(variant) >= _MIN_SECRET_NAMED:
                    table[variant] = (MASK, False)
        # One pass, longest first: a workspace path inside the home is replaced before the
        # home, and an environment value holding a path is replaced whole.
        ordered = sorted(table, key=len, reverse=True)
        alternatives = [re.escape(v) + (_PATH_END if table[v][1] else "") for v in ordered]
        self._literal = re.compile("|".join(alternatives)) if alternatives else None
        self._table = table

    def mask(self, text: str) -> str:
        """Strip control characters; replace secrets, known paths, environment values, commands."""
        # Stripped first: an escape sequence inside a token must not hide it from its pattern.
        text = strip_control(text)
        text = _INTERNAL_LINE.sub(INTERNAL_COMMAND, text)
        text = _PYTHON_COMMAND.sub(f"Command {INTERNAL_COMMAND}", text)
        spans = secret_spans(text)
        if self._literal is not None:
            spans += [
                (m.start(), m.end(), self._table[m.group(0)][0])
                for m in self._literal.finditer(text)
            ]
        return _PRIVATE_TMP.sub("<tmp>", _replaced(text, spans))

    def clean(self, text: str, limit: int = DIAGNOSIS_LIMIT) -> str:
        """Mask, then bound to `limit` characters (the marker counts toward the limit)."""
        return bound(self.mask(text).strip(), limit)


Span = tuple[int, int, str]


def strip_control(text: str) -> str:
    """`text` without escape sequences, control characters (but newline, tab) or bidi overrides."""
    return _TERMINAL_CONTROL.sub("", text)


def mask_secret_shapes(text: str) -> str:
    """Mask what looks like a secret wherever it appears, whatever its surroundings."""
    return _replaced(text, secret_spans(text))


def secret_spans(text: str) -> list[Span]:
    """Where `text` holds something shaped like a secret: (start, end, replacement) each.

    Every shape is found in the original text and overlapping finds are merged afterwards,
    so masking one (an environment value inside a token) never hides another from its pattern.
    """
    spans = shape_spans(text)
    for head in (_ASSIGNMENT_HEAD, _FLAG_HEAD):
        spans += _assignment_spans(head, text)
    return spans


def shape_spans(text: str) -> list[Span]:
    """The secrets found by their own shape (tokens, keys, URL or header credentials), not name."""
    spans = [(m.start(), m.end(), MASK) for p in (_PRIVATE_KEY, _TOKENS) for m in p.finditer(text)]
    spans += _key_body_spans(text)
    spans += [(m.start(1), m.end(1), MASK) for m in _SLACK_HOOK.finditer(text)]
    spans += _header_spans(text)
    spans += [(m.start(3), m.end(3), MASK) for m in _BEARER.finditer(text) if _is_credential(m)]
    spans += [span for m in _URL_USERINFO.finditer(text) for span in _userinfo_spans(m)]
    return spans


def _key_body_spans(text: str) -> list[Span]:
    """Each private key's END line with the base64 lines right above it (its body), whether
    or not its BEGIN line is still there; each walk upwards stops at the last END line."""
    spans: list[Span] = []
    floor = 0
    for end in _PRIVATE_KEY_END.finditer(text):
        start = end.start()
        while start > floor:
            cut = start - 1 if text[start - 1] == "\n" else start
            line_start = max(text.rfind("\n", floor, cut) + 1, floor)
            if not _KEY_BODY_LINE.fullmatch(text, line_start, cut):
                break
            start = line_start
        spans.append((start, end.end(), MASK))
        floor = end.end()
    return spans


def _replaced(text: str, spans: list[Span]) -> str:
    """`text` with each span replaced; overlapping spans of different finds become one mask."""
    merged: list[Span] = []
    for start, end, replacement in sorted(spans, key=lambda span: (span[0], -span[1])):
        if start >= end:
            continue
        if merged and start < merged[-1][1]:
            first, last, kept = merged[-1]
            if end > last or replacement != kept:
                merged[-1] = (first, max(end, last), MASK)
            continue
        merged.append((start, end, replacement))
    out: list[str] = []
    position = 0
    for start, end, replacement in merged:
        out.append(text[position:start] + replacement)
        position = end
    return "".join(out) + text[position:]


def is_secret_name(name: str) -> bool:
    """True when a variable, key or flag of this name holds a secret (`API_KEY`, `dbPassword`)."""
    words = [w.lower() for w in _NAME_WORDS.findall(name)]
    if not words:
        return False
    joined = "".join(words)
    return (
        words[-1] in _SECRET_LAST_WORDS
        or any(w in _SECRET_ANY_WORDS for w in words)
        or joined.endswith(("apikey", "privatekey", "accesskey", "secretkey"))
    )


def _header_spans(text: str) -> list[Span]:
    spans: list[Span] = []
    for match in _HEADER.finditer(text):
        quote, start = match.group(3), match.end()
        ends = (text.find("\n", start), text.find(quote, start) if quote else -1)
        spans.append((start, min((i for i in ends if i >= 0), default=len(text)), MASK))
    return spans


def _is_credential(match: re.Match[str]) -> bool:
    scheme, value = match.group(1), match.group(3)
    # `Bearer` always carries a credential; `Basic`/`token` only when the word looks encoded,
    # so prose such as "token validation" stays readable.
    return (
        scheme.lower() == "bearer"
        or any(c.isdigit() or c in "=+/" for c in value)
        or (any(c.islower() for c in value) and any(c.isupper() for c in value[1:]))
    )


def _userinfo_spans(match: re.Match[str]) -> list[Span]:
    if match.group(3) is not None:
        return [(match.start(3) + 1, match.end(3), MASK)]
    # A bare userinfo is a user name (`git@`), unless it is long enough to be a token.
    return [(match.start(2), match.end(2), MASK)] if len(match.group(2)) >= 16 else []


def _assignment_spans(head: re.Pattern[str], text: str) -> list[Span]:
    spans: list[Span] = []
    for match in head.finditer(text):
        if not is_secret_name(match.group(1)):
            continue
        value = _VALUE.match(text, match.end())
        if value is not None:
            spans.append((value.start(), value.end(), _masked_value(value.group(0))))
    return spans


def _masked_value(value: str) -> str:
    for quote in ('\\"', '"', "'"):
        if len(value) >= 2 * len(quote) and value.startswith(quote) and value.endswith(quote):
            return f"{quote}{MASK}{quote}"
    return MASK


def bound(text: str, limit: int) -> str:
    """Cut `text` to at most `limit` characters on a character boundary, marking the cut."""
    if len(text) <= limit:
        return text
    if limit <= len(CUT_MARKER):
        return text[: max(0, limit)]
    return text[: limit - len(CUT_MARKER)].rstrip() + CUT_MARKER


def tail(text: str, limit: int) -> str:
    """The end of `text` in at most `limit` characters, never starting inside a word.

    Output is often cut before it is masked; starting after a line or word break keeps a
    secret from surviving as an unrecognizable half. A single unbroken run longer than the
    whole budget is kept as it is: no secret shape is that long without a break.
    """
    if len(text) <= limit:
        return text
    kept = text[len(text) - max(0, limit) :]
    line = kept.find("\n")
    if line >= 0 and kept[line + 1 :].strip():
        return kept[line + 1 :]
    word = min((i for i in (kept.find(" "), kept.find("\t"), line) if i >= 0), default=-1)
    return kept[word + 1 :] if word >= 0 else kept


def _add_environment_value(table: dict[str, tuple[str, bool]], name: str, value: str) -> None:
    secret_named = name.upper() not in _NOT_SECRET_NAMES and (
        bool(_SECRET_NAME.search(name)) or is_secret_name(name)
    )
    floor = _MIN_SECRET_NAMED if secret_named else _MIN_ANY_VALUE
    placeholder = MASK if secret_named else f"[{_shown_name(name)}]"
    for variant in {value, value.strip()}:
        if len(variant) >= floor and variant not in table:
            table[variant] = (placeholder, False)


def _shown_name(name: str) -> str:
    # The placeholder names the variable; a name is the user's own, but keep it plain and short.
    return re.sub(r"[^\w.-]", "_", name)[:40] or "env"


def _path_variants(path: Path | str) -> set[str]:
    raw = str(path).rstrip("/")
    variants = {raw}
    with contextlib.suppress(OSError, RuntimeError, ValueError):
        variants.add(str(Path(raw).resolve()))
    return {v for v in variants if len(v) > 1}


def _user_home() -> Path | None:
    try:
        return Path.home()
    except (RuntimeError, KeyError):
        return None


def user_sanitizer(
    config: Config, repository: str | None = None, *, secrets: Iterable[str] = ()
) -> Sanitizer:
    """The sanitizer every user-visible text goes through (with a room's local repository path)."""
    paths: dict[str, Path | str] = {
        "<cairn-home>": config.home,
        "<workspaces>": config.workspaces_dir,
    }
    if repository and "://" not in repository:
        paths["<repository>"] = repository
    home = _user_home()
    if home is not None:
        paths["~"] = home
    return Sanitizer(paths=paths, secrets=secrets)


def edge_sanitizer(environ: Mapping[str, str] | None = None) -> Sanitizer:
    """For text printed at the edge (CLI errors): the user sanitizer, even when config is broken."""
    try:
        from cairn.config import Config  # the CLI's error path: pydantic only when it is needed

        return user_sanitizer(Config.from_env(environ))
    except CairnError:
        home = _user_home()
        return Sanitizer(paths={"~": home} if home else {}, environ=environ)
