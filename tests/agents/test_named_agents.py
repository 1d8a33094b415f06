"""Named agents: the one validated `openai` spec and how `--agent NAME` resolves to it."""

from __future__ import annotations

from typing import Any

import pytest

from cairn.agents.openai_spec import (
    DEFAULT_CONTEXT_TOKENS,
    DEFAULT_MAX_TURN_STEPS,
    OpenAISpec,
    openai_spec,
    spec_for_model,
)
from cairn.agents.registry import load_agent_spec
from cairn.errors import UsageError

KEY = "sk-" + "live" + "9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c"


def test_a_spec_has_exactly_the_stored_fields_with_their_defaults() -> None:
    assert openai_spec({"model": "qwen"}) == {
        "adapter": "openai",
        "model": "qwen",
        "base_url": None,
        "api_key_env": "OPENAI_API_KEY",
        "max_turn_steps": DEFAULT_MAX_TURN_STEPS,
        "context_tokens": DEFAULT_CONTEXT_TOKENS,
        "temperature": None,
        "stream": True,
        "tool_protocol": "auto",
    }
    assert (DEFAULT_MAX_TURN_STEPS, DEFAULT_CONTEXT_TOKENS) == (40, 32_000)
    assert spec_for_model(" gpt-4o-mini ") == openai_spec({"model": "gpt-4o-mini"})
    stored = openai_spec({"model": "m", "base_url": "https://api.example.com/v1/"})
    assert stored["base_url"] == "https://api.example.com/v1"
    assert OpenAISpec.model_validate(stored).to_spec() == stored  # a stored spec reads back


@pytest.mark.parametrize(
    "url",
    [
        f"https://user:{KEY}@api.example.com/v1",
        f"https://{KEY}@api.example.com/v1",
        f"https://api.example.com/v1?key={KEY}",
        f"https://api.example.com/v1?access_token={KEY}",
        f"https://api.example.com/v1?x={KEY}",
    ],
)
def test_a_base_url_carrying_credentials_is_refused_without_echoing_it(url: str) -> None:
    with pytest.raises(UsageError) as refused:
        openai_spec({"model": "m", "base_url": url})
    assert str(refused.value).startswith("--base-url carries")
    assert KEY not in str(refused.value) and "api.example.com" not in str(refused.value)


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"model": "m", "base_url": "ftp://h/v1"}, "--base-url must be an http:// or https://"),
        ({"model": "m", "base_url": "http://h:port/v1"}, "--base-url is not a URL"),
        ({"model": "m", "api_key_env": KEY}, "--api-key-env looks like an API key"),
        ({"model": "m", "api_key_env": "sk-abc"}, "--api-key-env looks like an API key"),
        ({"model": "m", "api_key_env": "1KEY"}, "--api-key-env names an environment variable"),
        ({"model": "has space"}, "--model names the model"),
        ({"model": KEY}, "--model looks like a credential"),
        ({}, "--model is required"),
        ({"model": "m", "max_turn_steps": 0}, "--max-turn-steps should be greater"),
        ({"model": "m", "context_tokens": 10}, "--context-tokens should be greater"),
        ({"model": "m", "temperature": 3.0}, "--temperature should be less"),
        ({"model": "m", "tool_protocol": "xml"}, "--tool-protocol is one of auto, native, text"),
        ({"model": "m", "api_key": KEY}, "an openai agent has no setting 'api_key'"),
    ],
)
def test_bad_settings_are_usage_errors_naming_the_option(given: dict[str, Any], said: str) -> None:
    with pytest.raises(UsageError) as refused:
        openai_spec(given)
    assert said in str(refused.value)
    assert KEY not in str(refused.value)


def test_a_name_without_a_colon_resolves_through_the_lookup_and_is_copied() -> None:
    spec = openai_spec({"model": "qwen"})
    asked: list[str] = []

    def lookup(name: str) -> dict[str, Any] | None:
        asked.append(name)
        return spec if name == "local-qwen" else None

    resolved = load_agent_spec("local-qwen", named=lookup)
    assert resolved == spec and resolved is not spec
    assert asked == ["local-qwen"]
    with pytest.raises(UsageError, match=r"no agent named 'other'.*cairn agent list"):
        load_agent_spec("other", named=lookup)
    with pytest.raises(UsageError, match="names no known agent or adapter") as refused:
        load_agent_spec("/home/me/secret.yaml", named=lookup)
    assert "/home/me" not in str(refused.value)


def test_without_a_lookup_or_with_a_colon_the_adapter_builds_the_spec(tmp_path: Any) -> None:
    script = tmp_path / "a.yaml"
    script.write_text("steps:\n  - finish: {summary: done}\n")
    never = lambda name: pytest.fail(f"looked up {name}")  # noqa: E731
    assert load_agent_spec(f"script:{script}", named=never)["adapter"] == "script"
    with pytest.raises(UsageError, match="unknown agent adapter 'local-qwen'"):
        load_agent_spec("local-qwen")


def test_a_named_spec_carrying_a_credential_is_refused_like_any_spec() -> None:
    tampered = openai_spec({"model": "m"}) | {"base_url": f"https://x.test/?token={KEY}"}
    with pytest.raises(UsageError, match="looks like a credential"):
        load_agent_spec("bad", named=lambda _: tampered)
