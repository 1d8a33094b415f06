"""The stored configuration of the `openai` adapter: its keys, defaults and validation.

The spec is stored with every job, so it names where the API key is (an environment
variable of the runner) and never holds the key itself; a base URL that carries credentials
(userinfo, or a key or token in its query) is refused without being echoed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from cairn.errors import UsageError
from cairn.sanitize import is_secret_name, shape_spans

ADAPTER = "openai"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
BASE_URL_ENV = "OPENAI_BASE_URL"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MAX_TURN_STEPS = 40
DEFAULT_CONTEXT_TOKENS = 32_000
MIN_CONTEXT_TOKENS = 1_000
PROTOCOLS = ("auto", "native", "text")
SPEC_KEYS = (
    "adapter",
    "model",
    "base_url",
    "api_key_env",
    "max_turn_steps",
    "context_tokens",
    "temperature",
    "stream",
    "tool_protocol",
)
_MODEL = re.compile(r"[\w.:/@+-]{1,200}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")


@dataclass(frozen=True)
class OpenAISettings:
    """A validated spec (`to_spec` gives back exactly the stored keys)."""

    model: str
    base_url: str | None = None
    api_key_env: str = DEFAULT_KEY_ENV
    max_turn_steps: int = DEFAULT_MAX_TURN_STEPS
    context_tokens: int = DEFAULT_CONTEXT_TOKENS
    temperature: float | None = None
    stream: bool = True
    tool_protocol: str = "auto"

    def to_spec(self) -> dict[str, Any]:
        """The storable spec: the adapter's name and every setting, nothing secret."""
        return {
            "adapter": ADAPTER,
            "model": self.model,
            "base_url": self.base_url,
            "api_key_env": self.api_key_env,
            "max_turn_steps": self.max_turn_steps,
            "context_tokens": self.context_tokens,
            "temperature": self.temperature,
            "stream": self.stream,
            "tool_protocol": self.tool_protocol,
        }


def settings_from_spec(spec: Mapping[str, Any]) -> OpenAISettings:
    """Validate a stored spec; every problem is a UsageError saying what to set."""
    unknown = sorted(str(key) for key in spec if key not in SPEC_KEYS)
    if unknown:
        shown = ", ".join(k if re.fullmatch(r"\w{1,40}", k) else "?" for k in unknown)
        raise UsageError(
            f"the openai agent's configuration has unknown settings ({shown}); "
            f"the settings are: {', '.join(SPEC_KEYS[1:])}"
        )
    model = spec.get("model")
    if not isinstance(model, str) or not _MODEL.fullmatch(model) or shape_spans(model):
        raise UsageError(
            "the openai agent needs a model name (letters, digits and . : / @ + - _), "
            "for example --agent openai:qwen2.5-coder:7b"
        )
    return OpenAISettings(
        model=model,
        base_url=checked_base_url(spec.get("base_url"), "the agent's base_url"),
        api_key_env=_key_env(spec.get("api_key_env", DEFAULT_KEY_ENV)),
        max_turn_steps=_count(spec, "max_turn_steps", DEFAULT_MAX_TURN_STEPS, 1, 10_000),
        context_tokens=_count(
            spec, "context_tokens", DEFAULT_CONTEXT_TOKENS, MIN_CONTEXT_TOKENS, 10_000_000
        ),
        temperature=_temperature(spec.get("temperature")),
        stream=_flag(spec.get("stream", True)),
        tool_protocol=_protocol(spec.get("tool_protocol", "auto")),
    )


def checked_base_url(url: object, where: str) -> str | None:
    """`url` when it is an http(s) URL without credentials; None stays None."""
    if url is None:
        return None
    if not isinstance(url, str) or not url.strip():
        raise UsageError(f"{where} must be an http:// or https:// URL, for example {_EXAMPLE}")
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - raises for a port that is not a number
    except ValueError:
        raise UsageError(f"{where} is not a valid URL; for example {_EXAMPLE}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"{where} must be an http:// or https:// URL, for example {_EXAMPLE}")
    if parts.username or parts.password or _query_carries_secret(parts.query):
        # Never echoed: the refused part is a credential.
        raise UsageError(
            f"{where} carries credentials; cairn would store it, so remove them and put the "
            f"key in an environment variable of the runner (api_key_env, {DEFAULT_KEY_ENV} "
            "by default)"
        )
    return url.strip()


_EXAMPLE = "http://127.0.0.1:11434/v1"


def _query_carries_secret(query: str) -> bool:
    pairs = parse_qsl(query, keep_blank_values=True)
    return any(is_secret_name(name) or shape_spans(value) for name, value in pairs) or bool(
        shape_spans(query)
    )


def _key_env(value: object) -> str:
    if not isinstance(value, str) or not _ENV_NAME.fullmatch(value):
        raise UsageError(
            "api_key_env must name an environment variable (letters, digits, _), "
            f"for example {DEFAULT_KEY_ENV}; it holds the name, never the key"
        )
    if value.startswith("CAIRN_"):
        raise UsageError("api_key_env may not name one of cairn's own CAIRN_* variables")
    return value


def _count(spec: Mapping[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = spec.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise UsageError(f"{key} must be a whole number from {low} to {high}")
    return value


def _temperature(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UsageError("temperature must be a number from 0 to 2")
    if not math.isfinite(value) or not 0 <= value <= 2:
        raise UsageError("temperature must be a number from 0 to 2")
    return float(value)


def _flag(value: object) -> bool:
    if not isinstance(value, bool):
        raise UsageError("stream must be true or false")
    return value


def _protocol(value: object) -> str:
    if value not in PROTOCOLS:
        raise UsageError(f"tool_protocol must be one of: {', '.join(PROTOCOLS)}")
    assert isinstance(value, str)
    return value
