"""`cairn agent check` for an `openai` agent: key, endpoint, model and native tool calls.

Three requests, each the smallest that proves one need: the model list (the endpoint answers,
and the key is accepted), a one-line completion (the model exists and answers), and the same
with one tool offered (whether the model calls tools natively). The key's value is sent, never
shown: a check names the variable that holds it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

import openai

from cairn.agents.checks import CHECK_MARKER, Check, failed, passed, skipped
from cairn.agents.openai_agent import PLACEHOLDER_KEY
from cairn.agents.openai_spec import (
    BASE_URL_ENV,
    DEFAULT_BASE_URL,
    checked_base_url,
    settings_from_spec,
)
from cairn.errors import UsageError
from cairn.sanitize import bound, mask_secret_shapes, strip_control

if TYPE_CHECKING:
    from cairn.config import Config

TIMEOUT = 30.0
"""Seconds each of the check's requests may take."""
TOOL_NAME = "report_ok"
ASK_OK = f"This is `{CHECK_MARKER}`, a connectivity test. Reply with the single word OK."
ASK_TOOL = f"This is `{CHECK_MARKER}`, a test of tool calls. Call the {TOOL_NAME} tool, once."
_TOOL = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": "Report that the check reached you.",
        "parameters": {"type": "object", "properties": {}},
    },
}
_LISTED_MODELS = 5


def check_openai(spec: Mapping[str, Any], config: Config) -> list[Check]:
    """The checks of an openai agent on this runner, in order: key set, endpoint, key
    accepted, model, tool calls."""
    settings = settings_from_spec(spec)
    environment = config.environment
    key_env = settings.api_key_env
    key = environment.get(key_env) or None
    try:
        url = settings.base_url or checked_base_url(
            environment.get(BASE_URL_ENV) or None, f"the runner's {BASE_URL_ENV}"
        )
    except UsageError as exc:
        fix = f"give the runner's {BASE_URL_ENV} a URL like http://localhost:8000/v1"
        return [_key_set(key_env, key, None), failed("endpoint", str(exc), fix)]
    base_url = url or DEFAULT_BASE_URL
    where = _shown(base_url) if settings.base_url else _where(url)
    sdk = openai.OpenAI(
        base_url=base_url, api_key=key or PLACEHOLDER_KEY, max_retries=0, timeout=TIMEOUT
    )
    try:
        return _run(sdk, settings.model, settings.tool_protocol, key_env, key, where)
    finally:
        sdk.close()


def _run(
    sdk: openai.OpenAI, model: str, protocol: str, key_env: str, key: str | None, where: str
) -> list[Check]:
    try:
        listed = [item.id for item in sdk.models.list()]
    except openai.APIConnectionError:  # also a timeout
        fix = f"start the model server, or point the agent at one (--base-url, {BASE_URL_ENV})"
        down = failed("endpoint", f"nothing answers at {where}", fix)
        because = "the endpoint does not answer"
        checks = [_key_set(key_env, key, None), down]
        return [*checks, *(skipped(name, because) for name in ("key", "model", "tool calls"))]
    except openai.APIStatusError as exc:
        listed = []
        if exc.status_code in (401, 403):
            return [
                _key_set(key_env, key, False),
                passed("endpoint", f"{where} answers"),
                _refused_key(key_env, key, exc.status_code),
                skipped("model", "the endpoint refused the key"),
                skipped("tool calls", "the endpoint refused the key"),
            ]
    answered = passed("endpoint", f"{where} answers")
    tried = _complete(sdk, model, key_env, key, listed)
    if isinstance(tried, Check):  # the completion failed: the key or the model is at fault
        key_ok = tried.name != "key"
        accepted = passed("key", "the endpoint accepted it") if key_ok else tried
        model_check = tried if key_ok else skipped("model", "the endpoint refused the key")
        tools = skipped("tool calls", "the model did not answer")
        return [_key_set(key_env, key, key_ok), answered, accepted, model_check, tools]
    accepted = passed("key", "the endpoint accepted it")
    tools = _tool_calls(sdk, model, protocol)
    return [_key_set(key_env, key, True), answered, accepted, tried[0], tools]


def _key_set(key_env: str, key: str | None, accepted: bool | None) -> Check:
    if key is not None:
        return passed("key set", f"{key_env} is set (its value is never shown)")
    if accepted:
        return passed("key set", f"{key_env} is not set, and the endpoint needs no key")
    return failed(
        "key set",
        f"{key_env} is not set in the runner's environment",
        f"set {key_env} to the endpoint's API key where the runner runs",
    )


def _refused_key(key_env: str, key: str | None, status: int) -> Check:
    if key is None:
        return failed(
            "key",
            f"the endpoint wants a key (HTTP {status}) and {key_env} is not set",
            f"set {key_env} to the endpoint's API key where the runner runs",
        )
    return failed(
        "key",
        f"the endpoint refused the key in {key_env} (HTTP {status})",
        f"set {key_env} to a key the endpoint accepts",
    )


def _complete(
    sdk: openai.OpenAI, model: str, key_env: str, key: str | None, listed: list[str]
) -> tuple[Check] | Check:
    """A one-line completion: the model check passed, or the check that failed."""
    messages = [{"role": "system", "content": ASK_OK}, {"role": "user", "content": "OK?"}]
    try:
        sdk.chat.completions.create(model=model, messages=cast(Any, messages), max_tokens=16)
    except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
        return _refused_key(key_env, key, exc.status_code)
    except openai.NotFoundError:
        known = ", ".join(_safe(name) for name in listed[:_LISTED_MODELS])
        also = f" (it lists {known})" if known else ""
        return failed(
            "model",
            f"the endpoint has no model {_safe(model)!r} (HTTP 404){also}",
            "add the agent again with --model naming a model the endpoint serves",
        )
    except openai.APIConnectionError:
        fix = "check that the model server stays up, then run the check again"
        return failed("model", "the connection broke before the model answered", fix)
    except openai.APIStatusError as exc:
        said = _said(exc)
        return failed(
            "model",
            f"the endpoint refused a one-line request (HTTP {exc.status_code}){said}",
            "check the model's name and the server's log",
        )
    return (passed("model", f"{_safe(model)} answered a one-line request"),)


def _tool_calls(sdk: openai.OpenAI, model: str, protocol: str) -> Check:
    """Whether the model calls a tool natively, and what that means for its tool protocol."""
    if protocol == "text":
        return passed("tool calls", "not needed: the agent writes its calls as text")
    messages = [{"role": "system", "content": ASK_TOOL}, {"role": "user", "content": "Go."}]
    native = False
    try:
        answer = sdk.chat.completions.create(
            model=model, messages=cast(Any, messages), tools=cast(Any, [_TOOL]), max_tokens=64
        )
        calls = answer.choices[0].message.tool_calls or [] if answer.choices else []
        native = any(getattr(call, "function", None) is not None for call in calls)
    except openai.APIError:
        native = False  # a server that refuses `tools` has no native tool calls
    if native:
        return passed("tool calls", "the model calls tools natively")
    if protocol == "auto":
        return passed(
            "tool calls",
            "the model did not call the tool natively; with --tool-protocol auto cairn "
            "reads calls it writes as text",
        )
    return failed(
        "tool calls",
        "the model did not call the tool natively, and the agent's --tool-protocol is native",
        "add the agent again with --tool-protocol auto (or text)",
    )


def _shown(url: str) -> str:
    """The endpoint as a check shows it: scheme, host, port and path, nothing else."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}".rstrip("/")


def _where(url: str | None) -> str:
    """The runner's endpoint, named by its variable: environment values are masked in
    everything cairn prints."""
    return f"the endpoint in {BASE_URL_ENV}" if url else "the OpenAI API"


def _safe(text: str) -> str:
    return bound(mask_secret_shapes(strip_control(text)), 80)


def _said(exc: openai.APIStatusError) -> str:
    message = _safe(str(exc.message))
    return f": {message}" if message else ""
