"""Fakes and fixtures shipped with cairn, for its own tests, the demo, and users' tests.

- `harness`: `Cairn` / `make_cairn`, a whole installation in a temporary folder.
- `repos`: sample git repositories and bare Python and npm projects.
- `installers`: `FakeInstaller`, an installer without network; `fake_project` for it.
- `auditor`: `FakeAuditor`, an auditor that reports the advisories it was given.
- `stores`: throwaway SQLite and PostgreSQL stores.
- `silent_server`: a server that accepts connections and never answers.
- `openai_server`: `ScriptedOpenAIServer`, an OpenAI-compatible chat completions server on
  127.0.0.1 that replays scripted answers per conversation (`openai_script`: the answers).
- `anthropic_server`: `ScriptedAnthropicServer`, an Anthropic Messages API server on 127.0.0.1
  (streaming, tool use, per-conversation scripts, drops and hangs; `anthropic_script`: the
  replies). `clis`: the real coding CLIs, pinned and cached, for tests that drive them.
- `responses_server`: `ScriptedResponsesServer`, the same for OpenAI's Responses API (what
  Codex CLI speaks), streaming its events (`responses_script`: the wire, `CustomToolCall`,
  `NamespacedToolCall`).
- `fake_forge`: `FakeForge`, a GitHub- or GitLab-shaped forge on 127.0.0.1 (REST API, git
  over smart HTTP, OAuth), recording every call (`fake_forge_api`, `fake_forge_state`).
- `plugin`: the pytest plugin (entry point `cairn`) offering all of the above as fixtures;
  the only module here that imports pytest.
"""

# Stdlib only: importing these keeps `import cairn.testing` (and the pytest plugin) light.
from cairn.testing.anthropic_script import (
    Reply,
    ToolUse,
    fault_reply,
    text_reply,
    tool_use_reply,
)
from cairn.testing.anthropic_server import RecordedMessages, ScriptedAnthropicServer
from cairn.testing.fake_forge import FakeForge, RecordedCall
from cairn.testing.openai_script import (
    Answer,
    Fault,
    FinishReason,
    ToolCall,
    fault_answer,
    json_call_answer,
    text_answer,
    tool_call_answer,
)
from cairn.testing.openai_server import RecordedRequest, ScriptedOpenAIServer
from cairn.testing.responses_script import (
    CustomToolCall,
    NamespacedToolCall,
    codex_catalog_entry,
)
from cairn.testing.responses_server import RecordedResponsesRequest, ScriptedResponsesServer

__all__ = [
    "Answer",
    "CustomToolCall",
    "FakeForge",
    "Fault",
    "FinishReason",
    "NamespacedToolCall",
    "RecordedCall",
    "RecordedMessages",
    "RecordedRequest",
    "RecordedResponsesRequest",
    "Reply",
    "ScriptedAnthropicServer",
    "ScriptedOpenAIServer",
    "ScriptedResponsesServer",
    "ToolCall",
    "ToolUse",
    "codex_catalog_entry",
    "fault_answer",
    "fault_reply",
    "json_call_answer",
    "text_answer",
    "text_reply",
    "tool_call_answer",
    "tool_use_reply",
]
