"""The Aider tests need bubblewrap's sandbox like every agent command, and a chat completions
server that finds a conversation's marker anywhere in it: Aider opens every request with the
same example exchange, so the job's own words come later."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cairn.testing.openai_server import TEST_API_KEY, ScriptedOpenAIServer


@pytest.fixture
def aider_server() -> Iterator[ScriptedOpenAIServer]:
    """A scripted chat completions server for Aider; script it with `add_answers`."""
    with ScriptedOpenAIServer(api_key=TEST_API_KEY, markers_anywhere=True) as server:
        yield server
