"""The `openai` adapter: a tool-calling loop over any OpenAI-compatible chat completions server.

vLLM, Ollama, llama.cpp's server, LiteLLM and hosted APIs all speak it. The job's stored spec
says which model and where (`openai_spec`); the API key comes from the runner's environment
(`Config.environment`, the variable the spec names), never from the store. The loop itself is
`model_loop`; the HTTP call and its failures are `openai_client`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from cairn.agents.base import Outcome, OutcomeKind, Turn
from cairn.sanitize import MASK

if TYPE_CHECKING:  # pydantic stays out of every import of cairn.agents
    from cairn.agents.openai_spec import OpenAISpec
    from cairn.config import Config

# Sent when the key's variable is unset: local servers (Ollama, llama.cpp) want none, and the
# SDK refuses to start without one. Not a secret, and never a real key.
PLACEHOLDER_KEY = "cairn-no-key"
_MIN_MASKED_KEY = 6
DEFAULT_TIMEOUT = 300.0
"""Seconds one model request may take (a CPU-served local model can be slow)."""


class OpenAIAgent:
    """Drives an OpenAI-compatible model through the job's tools, one turn at a time."""

    name = "openai"

    def __init__(
        self,
        settings: OpenAISpec,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.settings = settings
        self.base_url = base_url
        self._api_key = api_key
        self.timeout = timeout

    def __repr__(self) -> str:  # never the key
        return f"OpenAIAgent(model={self.settings.model!r}, base_url={self.base_url!r})"

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], config: Config | None = None) -> OpenAIAgent:
        """Validate the spec; with the runner's `config`, take its endpoint and key as well.

        The spec's base_url wins over the runner's OPENAI_BASE_URL.
        """
        from cairn.agents.openai_spec import BASE_URL_ENV, checked_base_url, settings_from_spec

        settings = settings_from_spec(spec)
        if config is None:
            return cls(settings, base_url=settings.base_url)
        environment = config.environment
        base_url = settings.base_url or checked_base_url(
            environment.get(BASE_URL_ENV) or None, f"the runner's {BASE_URL_ENV}"
        )
        key = environment.get(settings.api_key_env) or None
        return cls(settings, base_url=base_url, api_key=key)

    @classmethod
    def spec_from_argument(cls, argument: str) -> dict[str, Any]:
        """`--agent openai:MODEL`: the spec with every default."""
        from cairn.agents.openai_spec import spec_for_model

        return spec_for_model(argument)

    def run_turn(self, turn: Turn) -> Outcome:
        """One turn of the loop in the job's own conversation."""
        # The SDK is imported only when a turn runs: `import cairn.agents` stays light.
        from cairn.agents.model_loop import LoopSettings, ModelLoop
        from cairn.agents.openai_client import ModelClient
        from cairn.agents.openai_spec import DEFAULT_BASE_URL

        if turn.conversation is None:
            return Outcome(
                OutcomeKind.failed,
                diagnosis="this runner keeps no conversation for the openai agent; upgrade it",
            )
        client = ModelClient(
            base_url=self.base_url or DEFAULT_BASE_URL,
            api_key=self._api_key or PLACEHOLDER_KEY,
            model=self.settings.model,
            key_env=self.settings.api_key_env,
            stream=self.settings.stream,
            temperature=self.settings.temperature,
            timeout=self.timeout,
        )
        loop_settings = LoopSettings(
            max_turn_steps=self.settings.max_turn_steps,
            context_tokens=self.settings.context_tokens,
            tool_protocol=self.settings.tool_protocol,
        )
        try:
            loop = ModelLoop(turn, turn.conversation, client, loop_settings, self._mask(turn))
            return loop.run()
        finally:
            client.close()

    def _mask(self, turn: Turn) -> Callable[[str], str]:
        """The turn's masker, with this runner's API key masked too (it may not be in the
        sanitizer's environment: a runner's Config may carry its own)."""
        key = self._api_key
        if not key or len(key) < _MIN_MASKED_KEY:
            return turn.mask

        def mask(text: str) -> str:
            return turn.mask(text.replace(key, MASK))

        return mask
