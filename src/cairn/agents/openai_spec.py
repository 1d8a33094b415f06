"""The stored spec of an `openai` agent: its one validated shape, and its defaults.

    {"adapter": "openai", "model": str, "base_url": str | None,
     "api_key_env": str, "max_turn_steps": int, "context_tokens": int,
     "temperature": float | None, "stream": bool, "tool_protocol": "auto" | "native" | "text"}

A spec is stored with every job that uses it, so it never holds an API key: only the name of
the runner's environment variable that holds one (`api_key_env`). A base URL that carries
credentials (userinfo, a key or token in its query) is refused, and never echoed back.
`base_url` None means the runner's own OPENAI_BASE_URL (the `openai` SDK's default).

This module imports pydantic: import it where a spec is checked (the CLI, the adapter), not
from `cairn.agents` itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, Literal
from urllib.parse import parse_qsl, urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from cairn.errors import UsageError
from cairn.sanitize import secret_spans, strip_control

ADAPTER: Final = "openai"
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
BASE_URL_ENV = "OPENAI_BASE_URL"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MAX_TURN_STEPS = 40
DEFAULT_CONTEXT_TOKENS = 32_000
DEFAULT_STREAM = True
DEFAULT_TOOL_PROTOCOL: Final = "auto"
TOOL_PROTOCOLS = ("auto", "native", "text")

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_MODEL_NAME = re.compile(r"[^\s\x00-\x1f\x7f]{1,200}")
# Query parameters that carry a credential on the usual APIs (`?key=`, `?api-key=`, `?sig=`).
_CREDENTIAL_PARAM = re.compile(r"key|token|secret|passw|auth|sig|credential", re.IGNORECASE)
# Which CLI option sets which field: errors name what the person typed.
OPTIONS = {
    "adapter": "--adapter",
    "model": "--model",
    "base_url": "--base-url",
    "api_key_env": "--api-key-env",
    "max_turn_steps": "--max-turn-steps",
    "context_tokens": "--context-tokens",
    "temperature": "--temperature",
    "stream": "--stream/--no-stream",
    "tool_protocol": "--tool-protocol",
}


class OpenAISpec(BaseModel):
    """An `openai` agent's configuration, exactly as a job stores it."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    adapter: Literal["openai"] = ADAPTER
    model: str
    base_url: str | None = None
    api_key_env: str = DEFAULT_API_KEY_ENV
    max_turn_steps: int = Field(default=DEFAULT_MAX_TURN_STEPS, ge=1, le=1000)
    context_tokens: int = Field(default=DEFAULT_CONTEXT_TOKENS, ge=1000, le=10_000_000)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0, allow_inf_nan=False)
    stream: bool = DEFAULT_STREAM
    tool_protocol: Literal["auto", "native", "text"] = DEFAULT_TOOL_PROTOCOL

    @field_validator("model")
    @classmethod
    def _model(cls, value: str) -> str:
        if not _MODEL_NAME.fullmatch(value):
            raise ValueError(
                "names the model as the server knows it: 1 to 200 characters, no spaces"
            )
        if secret_spans(value):
            raise ValueError("looks like a credential, not a model name")
        return value

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str | None) -> str | None:
        return None if value is None else check_base_url(value)

    @field_validator("api_key_env")
    @classmethod
    def _api_key_env(cls, value: str) -> str:
        return check_api_key_env(value)

    def to_spec(self) -> dict[str, Any]:
        """The spec as a job stores it (every field present, defaults filled in)."""
        return self.model_dump(mode="json")


def openai_spec(given: Mapping[str, Any]) -> dict[str, Any]:
    """Validate `given` (unset fields take their defaults) into a storable spec.

    A UsageError names the option at fault and what it takes; it never repeats the value
    of a base URL or key variable, which may be a credential pasted by mistake.
    """
    try:
        return OpenAISpec.model_validate(dict(given)).to_spec()
    except ValidationError as exc:
        raise UsageError(_refusal(exc)) from None


def settings_from_spec(spec: Mapping[str, Any]) -> OpenAISpec:
    """A stored spec, validated (the adapter's view of it); a UsageError says what to set."""
    try:
        return OpenAISpec.model_validate(dict(spec))
    except ValidationError as exc:
        raise UsageError(f"the openai agent's configuration: {_refusal(exc)}") from None


def checked_base_url(url: str | None, where: str) -> str | None:
    """`url` checked as `check_base_url` does, a UsageError naming `where`; None stays None."""
    if url is None:
        return None
    try:
        return check_base_url(url)
    except ValueError as exc:
        raise UsageError(f"{where} {exc}") from None


def spec_for_model(model: str) -> dict[str, Any]:
    """The spec of `--agent openai:MODEL`: that model, every other field its default."""
    if not model.strip():
        raise UsageError("--agent openai needs a model, for example --agent openai:qwen2.5-coder")
    return openai_spec({"model": model.strip()})


def check_base_url(value: str) -> str:
    """`value` if it is an http(s) URL without credentials; ValueError saying why not."""
    text = strip_control(value).strip()
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise ValueError("is not a URL; give one like http://localhost:8000/v1") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http:// or https:// URL, like http://localhost:8000/v1")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise ValueError(
            "carries credentials (user:password@); cairn would store them with every job, so "
            "give the URL without them and the key in the variable --api-key-env names"
        )
    query = parse_qsl(parts.query, keep_blank_values=True)
    if any(_CREDENTIAL_PARAM.search(name) for name, _ in query) or secret_spans(text):
        raise ValueError(
            "carries a key or token in it; cairn would store it with every job, so give the "
            "URL without it and the key in the variable --api-key-env names"
        )
    if parts.fragment:
        raise ValueError("has a #fragment, which no API endpoint uses; leave it out")
    return text.rstrip("/")


def check_api_key_env(value: str) -> str:
    """`value` if it names an environment variable (never a key); ValueError saying why not."""
    if value.lower().startswith(("sk-", "sk_")) or secret_spans(value) or _key_shaped(value):
        raise ValueError(
            "looks like an API key; cairn stores only the NAME of the variable that holds the "
            "key (for example OPENAI_API_KEY): put the key in that variable on the runner"
        )
    if not _ENV_NAME.fullmatch(value):
        raise ValueError(
            "names an environment variable: letters, digits and '_', not starting with a digit "
            "(for example OPENAI_API_KEY)"
        )
    if value.startswith("CAIRN_"):
        raise ValueError("may not name one of cairn's own CAIRN_* variables")
    return value


def _key_shaped(value: str) -> bool:
    # Variable names are words; a long run of mixed case and digits is a key pasted by mistake.
    return len(value) >= 24 and bool(re.search(r"[a-z]", value)) and bool(re.search(r"\d", value))


def _refusal(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors(include_url=False, include_input=False):
        field = str(error["loc"][0]) if error["loc"] else ""
        option = OPTIONS.get(field)
        if option is None:
            problems.append(f"an openai agent has no setting {field!r}" if field else "bad spec")
            continue
        message = str(error["msg"]).removeprefix("Value error, ").replace("Input should", "should")
        if error["type"] == "missing":
            message = "is required"
        elif error["type"] == "literal_error" and field == "tool_protocol":
            message = f"is one of {', '.join(TOOL_PROTOCOLS)}"
        problems.append(f"{option} {message}")
    return "; ".join(problems)
