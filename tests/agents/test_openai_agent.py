"""The openai adapter at the agent interface, over real HTTP to ScriptedOpenAIServer.

The conversation here is an in-memory stand-in for the job's fenced ledger (the job-level
tests in tests/jobs use the real one); everything else is real: the SDK, the server, the
workspace tools, the sandbox.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
import threading
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from tests.agents.support import ContextStore, Crash, _tree_of

from cairn.agents import OpenAIAgent, OutcomeKind, Turn
from cairn.agents.model_loop import NATIVE_CORRECTION, REPAIR_NOTE
from cairn.agents.openai_client import ModelClient
from cairn.agents.openai_spec import settings_from_spec
from cairn.config import Config
from cairn.errors import UsageError
from cairn.sanitize import Sanitizer
from cairn.store.records import ContextStep, StepKind
from cairn.testing import (
    Fault,
    ScriptedOpenAIServer,
    ToolCall,
    fault_answer,
    json_call_answer,
    text_answer,
    tool_call_answer,
)
from cairn.testing.openai_server import TEST_API_KEY


class MemoryConversation:
    """The Conversation protocol over a list: what the job's ledger stores, in memory."""

    def __init__(self) -> None:
        self.saved: list[ContextStep] = []

    def steps(self) -> list[ContextStep]:
        return list(self.saved)

    def append(self, kind: StepKind, payload: Mapping[str, Any]) -> ContextStep:
        # A JSON round trip: what is stored must be storable.
        data = json.loads(json.dumps(dict(payload)))
        step = ContextStep(len(self.saved) + 1, 1, len(self.saved) + 1, kind, data, 1, _NOW)
        self.saved.append(step)
        return step

    def restart(self, opening: Sequence[tuple[StepKind, Mapping[str, Any]]]) -> list[ContextStep]:
        self.saved = []
        for kind, payload in opening:
            self.append(kind, payload)
        return self.steps()

    def payloads(self, kind: StepKind) -> list[dict[str, Any]]:
        return [step.payload for step in self.saved if step.kind is kind]


_NOW = datetime(2026, 1, 1, tzinfo=UTC)


def spec(**settings: Any) -> dict[str, Any]:
    return {"adapter": "openai", "model": "qwen-test", **settings}


def agent_for(
    server: ScriptedOpenAIServer, environ: Mapping[str, str] | None = None, **settings: Any
) -> OpenAIAgent:
    environment = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": TEST_API_KEY}
    config = Config(home=Path("/nonexistent-home"), environment={**environment, **(environ or {})})
    return OpenAIAgent.from_spec(spec(**settings), config)


def turn_for(
    workspace: Path,
    conversation: MemoryConversation,
    request: str,
    store: ContextStore | None = None,
    **fields: Any,
) -> Turn:
    saved = store if store is not None else ContextStore()
    return Turn(
        job_id=1,
        workspace=workspace,
        request=request,
        state=saved.last,
        save_state=saved,
        workspace_id=lambda: _tree_of(workspace),
        conversation=conversation,
        **fields,
    )


def write(path: str, content: str) -> ToolCall:
    return ToolCall("write_file", {"path": path, "content": content})


def finish(summary: str) -> ToolCall:
    return ToolCall("finish", {"summary": summary})


@pytest.mark.parametrize("stream", [True, False])
def test_an_edit_turn_saves_each_answer_and_result_and_ends_changed(
    openai_server: ScriptedOpenAIServer, workspace: Path, stream: bool
) -> None:
    openai_server.add_answers(
        "add hello",
        tool_call_answer(write("hello.txt", "hi\n"), ToolCall("read_file", {"path": "hello.txt"})),
        tool_call_answer(finish("added hello.txt")),
    )
    conversation = MemoryConversation()
    agent = agent_for(openai_server, stream=stream)
    outcome = agent.run_turn(turn_for(workspace, conversation, "add hello"))

    assert (outcome.kind, outcome.summary) == (OutcomeKind.changed, "added hello.txt")
    assert (workspace / "hello.txt").read_text() == "hi\n"
    kinds = [step.kind.value for step in conversation.saved]
    assert kinds == [
        "system",
        "request",
        "assistant",
        "tool_result",
        "tool_result",
        "assistant",
        "tool_result",
    ]
    results = conversation.payloads(StepKind.tool_result)
    assert results[0] == {
        "call_id": "call-3-0",
        "name": "write_file",
        "target": "hello.txt",
        "ok": True,
        "content": "wrote hello.txt (3 bytes)",
    }
    assert results[1]["content"] == "hi\n", "parallel calls run in order"
    second = openai_server.requests_for("add hello")[1]
    assert [m["role"] for m in second.messages] == ["system", "user", "assistant", "tool", "tool"]
    assert bool(second.body.get("stream")) is stream
    assert outcome.usage.model_requests == 2
    assert outcome.usage.input_tokens == sum(r.prompt_tokens for r in openai_server.requests)
    assert outcome.usage.output_tokens > 0 and outcome.usage.seconds > 0
    assert all(r.authorization_matched for r in openai_server.requests)


def test_a_fenced_json_call_in_the_text_is_that_tool_call(
    openai_server: ScriptedOpenAIServer, workspace: Path
) -> None:
    openai_server.add_answers(
        "text job",
        json_call_answer("write_file", {"path": "a.txt", "content": "A"}, preface="Writing."),
        json_call_answer("finish", {"summary": "wrote a.txt"}, fenced=False),
    )
    conversation = MemoryConversation()
    outcome = agent_for(openai_server).run_turn(turn_for(workspace, conversation, "text job"))
    assert (outcome.kind, outcome.summary) == (OutcomeKind.changed, "wrote a.txt")
    assert (workspace / "a.txt").read_text() == "A"
    second = openai_server.requests_for("text job")[1]
    # Sent back as the text protocol: the call as text, its result as a user message.
    assert [m["role"] for m in second.messages] == ["system", "user", "assistant", "user"]
    assert "Result of write_file" in second.messages[-1]["content"]


def test_text_that_is_no_call_gets_one_correction_then_the_usual_rules(
    openai_server: ScriptedOpenAIServer, workspace: Path
) -> None:
    openai_server.add_answers(
        "chatty", text_answer("I would edit the file."), text_answer("Still just talking.")
    )
    conversation = MemoryConversation()
    outcome = agent_for(openai_server).run_turn(turn_for(workspace, conversation, "chatty"))
    assert outcome.kind is OutcomeKind.no_change
    requests = openai_server.requests_for("chatty")
    assert len(requests) == 2
    # auto accepts text calls, so the correction says how to write one.
    assert "as JSON in a ```json block" in requests[1].messages[-1]["content"]


def test_a_dependency_call_ends_the_turn_and_its_decision_becomes_its_result(
    openai_server: ScriptedOpenAIServer, workspace: Path
) -> None:
    ask = ToolCall(
        "request_dependency",
        {"ecosystem": "pypi", "name": "termcolor", "version": "2.4.0", "reason": "colour"},
    )
    openai_server.add_answers("colour", tool_call_answer(ask), tool_call_answer(finish("no-op")))
    conversation, store = MemoryConversation(), ContextStore()
    agent = agent_for(openai_server)
    first = agent.run_turn(turn_for(workspace, conversation, "colour", store))
    assert first.kind is OutcomeKind.dependency_request and first.dependency is not None
    assert (first.dependency.name, first.dependency.version) == ("termcolor", "2.4.0")

    note = "dependency termcolor==2.4.0 was approved and installed: ..."
    agent.run_turn(turn_for(workspace, conversation, "colour", store, notes=(note,)))
    resumed = openai_server.requests_for("colour")[1]
    assert resumed.messages[-1] == {
        "role": "tool",
        "tool_call_id": "call-3-0",
        "content": note,
    }
    result = conversation.payloads(StepKind.tool_result)[0]
    assert (result["target"], result["ok"]) == ("pypi:termcolor==2.4.0", True)


def test_a_drop_mid_stream_is_interrupted_and_saves_no_partial_answer(
    openai_server: ScriptedOpenAIServer, workspace: Path
) -> None:
    openai_server.add_answers(
        "drop",
        tool_call_answer(write("x.txt", "x")).with_fault(Fault.drop_connection, after_chunks=3),
    )
    conversation = MemoryConversation()
    outcome = agent_for(openai_server).run_turn(turn_for(workspace, conversation, "drop"))
    assert outcome.kind is OutcomeKind.interrupted
    assert [s.kind.value for s in conversation.saved] == ["system", "request"]
    assert not (workspace / "x.txt").exists()


@pytest.mark.parametrize("fault", [Fault.no_finish_reason, Fault.server_error])
def test_a_stream_without_finish_reason_or_a_failing_server_is_interrupted(
    openai_server: ScriptedOpenAIServer, workspace: Path, fault: Fault
) -> None:
    answers = [text_answer("half").with_fault(fault)] * (3 if fault is Fault.server_error else 1)
    openai_server.add_answers("lost", *answers)
    outcome = agent_for(openai_server).run_turn(turn_for(workspace, MemoryConversation(), "lost"))
    assert outcome.kind is OutcomeKind.interrupted
    # The SDK's own retries (two) came first for a failing server.
    assert len(openai_server.requests_for("lost")) == len(answers)


def test_a_hang_past_the_timeout_is_interrupted(
    openai_server: ScriptedOpenAIServer, workspace: Path
) -> None:
    openai_server.add_answers("hang", *[fault_answer(Fault.hang)] * 3)
    settings = settings_from_spec(spec())
    agent = OpenAIAgent(
        settings, base_url=openai_server.base_url, api_key=TEST_API_KEY, timeout=0.3
    )
    outcome = agent.run_turn(turn_for(workspace, MemoryConversation(), "hang"))
    assert outcome.kind is OutcomeKind.interrupted
    assert "did not answer within" in (outcome.diagnosis or "")


def test_a_wrong_key_fails_naming_the_variable_never_the_key(
    openai_server: ScriptedOpenAIServer, workspace: Path
) -> None:
    openai_server.add_answers("auth", text_answer("unused"))
    agent = agent_for(openai_server, {"MY_KEY": "sk-wrong-key-123456"}, api_key_env="MY_KEY")
    outcome = agent.run_turn(turn_for(workspace, MemoryConversation(), "auth"))
    assert outcome.kind is OutcomeKind.failed
    assert "MY_KEY" in (outcome.diagnosis or "") and "401" in (outcome.diagnosis or "")
    assert "sk-wrong-key" not in (outcome.diagnosis or "")


def test_a_resumed_turn_never_reruns_a_call_with_a_saved_result(
    openai_server: ScriptedOpenAIServer, workspace: Path
) -> None:
    append = ToolCall("run", {"command": "echo once >> log.txt"})
    openai_server.add_answers("resume", tool_call_answer(append, finish("ran")))
    conversation, store = MemoryConversation(), ContextStore()
    agent = agent_for(openai_server)
    agent.run_turn(turn_for(workspace, conversation, "resume", store))
    # A runner that died after the run's result was saved, before finish's: finish is pending.
    conversation.saved = conversation.saved[:-1]
    outcome = agent.run_turn(turn_for(workspace, conversation, "resume", store))
    assert outcome.kind is OutcomeKind.changed
    assert (workspace / "log.txt").read_text() == "once\n"
    assert len(openai_server.requests_for("resume")) == 1, "a saved answer is not asked again"


def test_a_missing_summary_is_repaired_with_finish_the_only_tool(
    openai_server: ScriptedOpenAIServer, workspace: Path
) -> None:
    openai_server.add_answers(
        "repair",
        tool_call_answer(write("r.txt", "r"), finish("  ")),
        tool_call_answer(finish("wrote r.txt")),
    )
    outcome = agent_for(openai_server).run_turn(turn_for(workspace, MemoryConversation(), "repair"))
    assert (outcome.summary, outcome.summary_repair) == ("wrote r.txt", "repaired")
    asked = openai_server.requests_for("repair")[1]
    assert asked.tool_names == ["finish"]
    assert asked.messages[-1]["content"] == REPAIR_NOTE


def test_the_budget_trims_old_results_but_keeps_request_and_follow_ups(
    openai_server: ScriptedOpenAIServer, workspace: Path
) -> None:
    (workspace / "big.txt").write_text("line of a big file\n" * 200)
    read = ToolCall("read_file", {"path": "big.txt"})
    openai_server.add_answers(
        "budget", *[tool_call_answer(read)] * 4, tool_call_answer(finish("read"))
    )
    budget = 3_000
    conversation = MemoryConversation()
    turn = turn_for(workspace, conversation, "budget", follow_ups=("also keep this follow-up",))
    agent_for(openai_server, context_tokens=budget).run_turn(turn)
    requests = openai_server.requests_for("budget")
    assert len(requests) == 5
    assert max(r.prompt_tokens for r in requests) <= budget
    last = requests[-1]
    assert "budget" in last.text and "also keep this follow-up" in last.text
    assert "[elided: read_file big.txt" in last.text


def test_secrets_in_run_output_never_reach_the_saved_steps(
    openai_server: ScriptedOpenAIServer, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAIRN_TEST_SERVICE_TOKEN", "tok-5e6f7a8b9c0d1e2f")
    from cairn.sanitize import Sanitizer

    leak = ToolCall("run", {"command": f"echo {TEST_API_KEY} tok-5e6f7a8b9c0d1e2f"})
    openai_server.add_answers(
        "secret", tool_call_answer(leak), tool_call_answer(finish(f"key {TEST_API_KEY}"))
    )
    conversation, store = MemoryConversation(), ContextStore()
    turn = turn_for(workspace, conversation, "secret", store, mask=Sanitizer().mask)
    outcome = agent_for(openai_server).run_turn(turn)
    stored = json.dumps([step.payload for step in conversation.saved]) + json.dumps(store.saved)
    for secret in (TEST_API_KEY, "tok-5e6f7a8b9c0d1e2f"):
        assert secret not in stored and secret not in (outcome.summary or "")
    assert "exit code 0" in conversation.payloads(StepKind.tool_result)[0]["content"]


def test_the_spec_is_validated_without_a_key_and_credentials_are_refused() -> None:
    stored = OpenAIAgent.spec_from_argument("qwen2.5-coder:7b")
    assert stored == {
        "adapter": "openai",
        "model": "qwen2.5-coder:7b",
        "base_url": None,
        "api_key_env": "OPENAI_API_KEY",
        "max_turn_steps": 40,
        "context_tokens": 32000,
        "temperature": None,
        "stream": True,
        "tool_protocol": "auto",
    }
    assert isinstance(OpenAIAgent.from_spec(stored, None), OpenAIAgent)
    for url in ("http://user:pw@127.0.0.1:8000/v1", "https://h.example/v1?api_key=abc123"):
        with pytest.raises(UsageError, match=r"carries (credentials|a key or token)") as refused:
            OpenAIAgent.from_spec({**stored, "base_url": url}, None)
        assert "pw" not in str(refused.value) and "abc123" not in str(refused.value)
    for bad, said in [
        ({"tool_protocol": "xml"}, "--tool-protocol"),
        ({"max_turn_steps": 0}, "--max-turn-steps"),
        ({"temperature": 9}, "--temperature"),
        ({"api_key": "sk-x"}, "no setting 'api_key'"),
        ({"base_url": "ftp://h/v1"}, "http"),
    ]:
        with pytest.raises(UsageError, match=said):
            OpenAIAgent.from_spec({**stored, **bad}, None)
    with pytest.raises(UsageError, match="needs a model"):
        OpenAIAgent.spec_from_argument(" ")


def test_the_spec_base_url_wins_over_the_runners(openai_server: ScriptedOpenAIServer) -> None:
    config = Config(home=Path("/x"), environment={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    agent = OpenAIAgent.from_spec(spec(base_url=openai_server.base_url), config)
    assert agent.base_url == openai_server.base_url
    assert OpenAIAgent.from_spec(spec(), config).base_url == "http://127.0.0.1:9/v1"
    assert "environment" not in repr(config) and "environment" not in config.model_dump()


def test_a_runner_that_loses_the_job_stops_waiting_for_the_model_at_once(
    openai_server: ScriptedOpenAIServer, workspace: Path
) -> None:
    import threading
    import time

    openai_server.add_answers("stop", fault_answer(Fault.hang))
    lost = threading.Event()
    conversation = MemoryConversation()
    turn = turn_for(workspace, conversation, "stop", stop_requested=lost.is_set)
    threading.Timer(0.5, lost.set).start()
    started = time.monotonic()
    outcome = agent_for(openai_server).run_turn(turn)
    assert outcome.kind is OutcomeKind.interrupted
    assert time.monotonic() - started < 5, "not the 300 s request timeout"
    assert [s.kind.value for s in conversation.saved] == ["system", "request"]


def test_the_text_protocol_offers_no_native_tools_and_reads_calls_from_the_text(
    openai_server: ScriptedOpenAIServer, workspace: Path
) -> None:
    openai_server.add_answers(
        "text only",
        json_call_answer("write_file", {"path": "t.txt", "content": "t"}),
        json_call_answer("finish", {"summary": "wrote t.txt"}),
    )
    agent = agent_for(openai_server, tool_protocol="text")
    outcome = agent.run_turn(turn_for(workspace, MemoryConversation(), "text only"))
    assert (outcome.kind, outcome.summary) == (OutcomeKind.changed, "wrote t.txt")
    first = openai_server.requests_for("text only")[0]
    assert "tools" not in first.body and "```json" in first.messages[0]["content"]


def test_the_native_protocol_takes_no_call_from_the_text(
    openai_server: ScriptedOpenAIServer, workspace: Path
) -> None:
    call = json_call_answer("write_file", {"path": "n.txt", "content": "n"})
    openai_server.add_answers("native only", call, call)
    agent = agent_for(openai_server, tool_protocol="native")
    outcome = agent.run_turn(turn_for(workspace, MemoryConversation(), "native only"))
    assert outcome.kind is OutcomeKind.no_change and not (workspace / "n.txt").exists()
    corrected = openai_server.requests_for("native only")[1]
    assert corrected.messages[-1] == {"role": "user", "content": NATIVE_CORRECTION}


def test_a_budget_too_small_for_what_is_always_kept_fails_before_any_request(
    openai_server: ScriptedOpenAIServer, workspace: Path
) -> None:
    openai_server.add_answers("tiny", tool_call_answer(finish("never asked")))
    agent = agent_for(openai_server, context_tokens=1_000)
    outcome = agent.run_turn(turn_for(workspace, MemoryConversation(), "tiny " + "x" * 5000))
    assert outcome.kind is OutcomeKind.failed
    assert "--context-tokens" in (outcome.diagnosis or "")
    assert openai_server.requests == ()


def test_the_step_limit_ends_the_turn_failed_or_with_a_summary_repair(
    openai_server: ScriptedOpenAIServer, workspace: Path
) -> None:
    look = ToolCall("list_files", {"path": "."})
    openai_server.add_answers("idle", *[tool_call_answer(look)] * 3)
    idle = agent_for(openai_server, max_turn_steps=3)
    outcome = idle.run_turn(turn_for(workspace, MemoryConversation(), "idle"))
    assert outcome.kind is OutcomeKind.failed and "all 3 steps" in (outcome.diagnosis or "")

    openai_server.add_answers(
        "busy",
        tool_call_answer(write("w.txt", "w")),
        tool_call_answer(look),
        tool_call_answer(finish("wrote w.txt")),
    )
    busy = agent_for(openai_server, max_turn_steps=2)
    outcome = busy.run_turn(turn_for(workspace, MemoryConversation(), "busy"))
    assert (outcome.kind, outcome.summary_repair) == (OutcomeKind.changed, "repaired")
    assert openai_server.requests_for("busy")[-1].tool_names == ["finish"]


class CrashingConversation(MemoryConversation):
    """Dies (as a runner would) at the first save of a tool result."""

    crashed = False

    def append(self, kind: StepKind, payload: Mapping[str, Any]) -> ContextStep:
        if kind is StepKind.tool_result and not self.crashed:
            self.crashed = True
            raise Crash("the runner died before the result was saved")
        return super().append(kind, payload)


def test_an_edit_made_before_a_crash_is_not_made_again_on_resume(
    openai_server: ScriptedOpenAIServer, workspace: Path
) -> None:
    (workspace / "app.py").write_text("x = 1\n")
    double = ToolCall("replace_in_file", {"path": "app.py", "old": "x = 1", "new": "x = 1\nx = 1"})
    openai_server.add_answers("edit once", tool_call_answer(double, finish("doubled x")))
    conversation, store = CrashingConversation(), ContextStore()
    agent = agent_for(openai_server)
    with pytest.raises(Crash):
        agent.run_turn(turn_for(workspace, conversation, "edit once", store))
    assert (workspace / "app.py").read_text() == "x = 1\nx = 1\n", "the edit happened"

    outcome = agent.run_turn(turn_for(workspace, conversation, "edit once", store))
    assert (outcome.kind, outcome.summary) == (OutcomeKind.changed, "doubled x")
    assert (workspace / "app.py").read_text() == "x = 1\nx = 1\n", "and happened once"
    replaced = conversation.payloads(StepKind.tool_result)[0]
    assert replaced["ok"] and replaced["content"] == "replaced one occurrence in app.py"
    assert len(openai_server.requests_for("edit once")) == 1


def _git_content_id(root: Path) -> str:
    """What `Worktree.content_id` measures: `git add --all` into a scratch index (ignored files
    are not part of it)."""
    with tempfile.TemporaryDirectory() as scratch:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(scratch) / "index")}
        for args in (["read-tree", "HEAD"], ["add", "--all"]):
            subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)
        done = subprocess.run(
            ["git", "write-tree"], cwd=root, env=env, check=True, capture_output=True, text=True
        )
        return done.stdout.strip()


def test_a_run_call_reusing_an_earlier_call_id_still_runs(
    openai_server: ScriptedOpenAIServer, workspace: Path
) -> None:
    """Servers that number calls per answer (or send none) reuse ids: cairn saves each call under
    its own id, so a later `run` is never taken for an interrupted copy of an earlier one."""
    first = ToolCall("run", {"command": "echo a >> log.txt"}, id="call_0")
    second = ToolCall("run", {"command": "echo b >> log.txt"}, id="call_0")
    openai_server.add_answers(
        "same ids",
        tool_call_answer(first),
        tool_call_answer(second),
        tool_call_answer(finish("appended twice")),
    )
    outcome = agent_for(openai_server).run_turn(
        turn_for(workspace, MemoryConversation(), "same ids")
    )
    assert outcome.kind is OutcomeKind.changed
    assert (workspace / "log.txt").read_text() == "a\nb\n"


def test_a_write_file_call_reusing_an_earlier_call_id_writes_its_own_content(
    openai_server: ScriptedOpenAIServer, workspace: Path
) -> None:
    """The edit record of one call is never the record of a later call that reused its id."""
    openai_server.add_answers(
        "same write ids",
        tool_call_answer(ToolCall("write_file", {"path": "a.txt", "content": "one\n"}, id="c1")),
        tool_call_answer(ToolCall("write_file", {"path": "a.txt", "content": "two\n"}, id="c1")),
        tool_call_answer(finish("wrote twice")),
    )
    agent_for(openai_server).run_turn(turn_for(workspace, MemoryConversation(), "same write ids"))
    assert (workspace / "a.txt").read_text() == "two\n"


def test_reused_call_ids_send_each_call_its_own_result(
    openai_server: ScriptedOpenAIServer, workspace: Path
) -> None:
    (workspace / "x.txt").write_text("content of x\n")
    (workspace / "y.txt").write_text("content of y\n")
    openai_server.add_answers(
        "same read ids",
        tool_call_answer(ToolCall("read_file", {"path": "x.txt"}, id="r")),
        tool_call_answer(ToolCall("read_file", {"path": "y.txt"}, id="r")),
        tool_call_answer(finish("read both")),
    )
    agent_for(openai_server).run_turn(turn_for(workspace, MemoryConversation(), "same read ids"))
    last = openai_server.requests_for("same read ids")[-1]
    tool_contents = [m["content"] for m in last.messages if m.get("role") == "tool"]
    assert len(tool_contents) == 2
    assert "content of x" in tool_contents[0] and "content of y" in tool_contents[1]


def test_a_write_resumed_on_masked_arguments_is_asked_again_never_written_masked(
    openai_server: ScriptedOpenAIServer, workspace: Path
) -> None:
    """The saved arguments are masked; a call resumed after a crash (answer saved, tool not yet
    run) whose arguments masking changed is answered "make the call again", so the file gets
    what the model asked for, never the mask."""
    value = "greeting-value-2026"  # any environment value of six characters or more is masked
    sanitizer = Sanitizer(environ={"CAIRN_REVIEW_GREETING": value})
    content = f"GREETING = '{value}'\n"
    openai_server.add_answers(
        "masked resume",
        tool_call_answer(write("app.py", content), finish("wrote app.py")),
        # Resumed, the call is answered "make the call again" (its exact text was not kept).
        tool_call_answer(write("app.py", content), finish("wrote app.py")),
    )
    conversation = MemoryConversation()
    store = ContextStore(crash_after=1)  # the opening saves; the edit's intent save crashes
    agent = agent_for(openai_server)
    with contextlib.suppress(Crash):
        agent.run_turn(
            turn_for(workspace, conversation, "masked resume", store, mask=sanitizer.mask)
        )
    assert not (workspace / "app.py").exists(), "the crash came before the write"
    store.crash_after = None
    agent.run_turn(turn_for(workspace, conversation, "masked resume", store, mask=sanitizer.mask))
    assert (workspace / "app.py").read_text() == content


def test_a_dependency_call_with_a_range_version_is_a_tool_error_not_the_turns_end(
    openai_server: ScriptedOpenAIServer, workspace: Path
) -> None:
    """A `request_dependency` no person could approve (a range version) is a tool error result
    back to the model, not a dependency request that would fail the job."""
    ask = ToolCall(
        "request_dependency",
        {"ecosystem": "pypi", "name": "requests", "version": ">=2.0", "reason": "http"},
    )
    openai_server.add_answers(
        "bad version",
        tool_call_answer(ask),
        tool_call_answer(write("a.txt", "a"), finish("done without it")),
    )
    conversation = MemoryConversation()
    outcome = agent_for(openai_server).run_turn(turn_for(workspace, conversation, "bad version"))
    assert outcome.kind is not OutcomeKind.dependency_request
    result = conversation.payloads(StepKind.tool_result)[0]
    assert result["ok"] is False


def test_one_tool_result_larger_than_the_budget_is_cut_not_the_end_of_the_turn(
    openai_server: ScriptedOpenAIServer, workspace: Path
) -> None:
    """The latest step is kept whole when it fits; one `read_file` of a 40 KB file under a 2,000
    token budget is sent cut to its head and tail instead of ending the turn."""
    (workspace / "big.txt").write_text("a line of a big file\n" * 2_000)
    openai_server.add_answers(
        "one huge result",
        tool_call_answer(ToolCall("read_file", {"path": "big.txt"})),
        tool_call_answer(write("a.txt", "a"), finish("read it, wrote a")),
    )
    outcome = agent_for(openai_server, context_tokens=2_000).run_turn(
        turn_for(workspace, MemoryConversation(), "one huge result")
    )
    assert outcome.kind is OutcomeKind.changed, outcome.diagnosis
    assert len(openai_server.requests_for("one huge result")) == 2


def test_a_run_interrupted_after_it_appended_to_an_ignored_file_is_not_run_again(
    openai_server: ScriptedOpenAIServer, tmp_path: Path
) -> None:
    """Rule 9 / exactly-once: a command marked as started is never run again after a crash, even
    when the content id (which leaves out .gitignored files) shows no change."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".gitignore").write_text("build.log\n")
    for args in (
        ["init", "-q"],
        ["add", ".gitignore"],
        ["-c", "user.name=r", "-c", "user.email=r@x", "commit", "-qm", "start"],
    ):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    append = ToolCall("run", {"command": "echo once >> build.log"})
    openai_server.add_answers("ignored append", tool_call_answer(append, finish("logged")))
    conversation, store = CrashingConversation(), ContextStore()
    agent = agent_for(openai_server)

    def turn() -> Turn:
        return Turn(
            job_id=1,
            workspace=repo,
            request="ignored append",
            state=store.last,
            save_state=store,
            workspace_id=lambda: _git_content_id(repo),
            conversation=conversation,
        )

    with contextlib.suppress(Crash):
        agent.run_turn(turn())
    assert (repo / "build.log").read_text() == "once\n", "the command ran before the crash"
    agent.run_turn(turn())
    assert (repo / "build.log").read_text() == "once\n", "and ran once"


def test_a_tool_name_or_call_id_carrying_a_secret_is_not_stored_raw(
    openai_server: ScriptedOpenAIServer, workspace: Path
) -> None:
    """An unknown tool's name is saved as `unknown` and every call gets cairn's own id: neither
    the API key in a name nor an environment value in an id lands in the stored steps."""
    value = "service-value-4242"
    sanitizer = Sanitizer(environ={"CAIRN_REVIEW_VALUE": value})
    odd = ToolCall(f"leak_{TEST_API_KEY}", {"path": "x"}, id=f"id-{value}")
    openai_server.add_answers(
        "odd name", tool_call_answer(odd), tool_call_answer(write("a", "a"), finish("done"))
    )
    conversation = MemoryConversation()
    agent_for(openai_server).run_turn(
        turn_for(workspace, conversation, "odd name", mask=sanitizer.mask)
    )
    stored = json.dumps([step.payload for step in conversation.saved])
    assert TEST_API_KEY not in stored
    assert value not in stored


def test_a_huge_call_argument_is_not_stored_whole_in_the_context(
    openai_server: ScriptedOpenAIServer, workspace: Path
) -> None:
    """A 3 MB `write_file` (over the tool's 1 MiB limit) is saved without its arguments and
    answered as a tool error."""
    huge = write("big.txt", "x" * 3_000_000)
    openai_server.add_answers(
        "huge argument",
        tool_call_answer(huge),
        tool_call_answer(write("a.txt", "a"), finish("wrote a small file instead")),
    )
    conversation = MemoryConversation()
    agent = agent_for(openai_server, stream=False)  # streamed, 3 MB takes minutes to parse
    agent.run_turn(turn_for(workspace, conversation, "huge argument"))
    biggest = max(len(json.dumps(step.payload)) for step in conversation.saved)
    assert biggest < 1_200_000, f"a stored step of {biggest:,} characters"
    refused = conversation.payloads(StepKind.tool_result)[0]
    assert refused["ok"] is False and "over the limit" in refused["content"]


def test_a_huge_prose_answer_is_not_stored_whole_in_the_context(
    openai_server: ScriptedOpenAIServer, workspace: Path
) -> None:
    """The model's prose is saved masked and bounded, never a 2 MB answer whole."""
    openai_server.add_answers(
        "huge prose",
        text_answer("blah " * 400_000),
        tool_call_answer(write("a.txt", "a"), finish("wrote a")),
    )
    conversation = MemoryConversation()
    agent_for(openai_server, stream=False).run_turn(turn_for(workspace, conversation, "huge prose"))
    biggest = max(len(json.dumps(step.payload)) for step in conversation.saved)
    assert biggest < 200_000, f"a stored step of {biggest:,} characters"


def test_streamed_tool_calls_without_an_index_are_kept_apart() -> None:
    """Some OpenAI-compatible servers (older Ollama, some proxies) stream each tool call whole in
    its own delta without `index`: each new id (or name) starts a new call."""

    def chunk(delta: dict[str, object], reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": reason}
        body = {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m"}
        return b"data: " + json.dumps({**body, "choices": [choice]}).encode() + b"\n\n"

    def call(call_id: str, name: str, arguments: dict[str, str]) -> dict[str, object]:
        function = {"name": name, "arguments": json.dumps(arguments)}
        return {"id": call_id, "type": "function", "function": function}

    class NoIndex(BaseHTTPRequestHandler):
        def log_message(self, *_: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["content-length"]))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            write_call = call("a", "write_file", {"path": "a.txt", "content": "a"})
            finish_call = call("b", "finish", {"summary": "s"})
            self.wfile.write(chunk({"role": "assistant", "tool_calls": [write_call]}))
            self.wfile.write(chunk({"tool_calls": [finish_call]}))
            self.wfile.write(chunk({}, "tool_calls") + b"data: [DONE]\n\n")

    server = ThreadingHTTPServer(("127.0.0.1", 0), NoIndex)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = ModelClient(
        base_url=f"http://127.0.0.1:{server.server_address[1]}/v1",
        api_key="k",
        model="m",
        key_env="K",
    )
    try:
        answer = client.complete([{"role": "user", "content": "x"}], None)
    finally:
        client.close()
        server.shutdown()
        server.server_close()
    assert [(c.id, c.name) for c in answer.calls] == [("a", "write_file"), ("b", "finish")]


def test_a_summary_repair_resumed_after_a_crash_still_offers_only_finish(
    openai_server: ScriptedOpenAIServer, workspace: Path
) -> None:
    """A runner that dies while waiting for the repair answer resumes the repair, `finish` the
    only tool."""
    openai_server.add_answers(
        "repair crash",
        tool_call_answer(write("r.txt", "r"), finish("")),
        tool_call_answer(finish("wrote r.txt")),  # the repair answer the crash lost
        tool_call_answer(finish("wrote r.txt")),  # the answer to the resumed request
    )
    conversation, store = MemoryConversation(), ContextStore()
    agent = agent_for(openai_server)
    agent.run_turn(turn_for(workspace, conversation, "repair crash", store))
    notes = [s for s in conversation.saved if s.payload.get("content") == REPAIR_NOTE]
    assert notes, "the turn went to summary repair"
    # The runner died after saving the repair note, before the repair answer was saved.
    conversation.saved = conversation.saved[: conversation.saved.index(notes[0]) + 1]
    outcome = agent.run_turn(turn_for(workspace, conversation, "repair crash", store))
    resumed = openai_server.requests_for("repair crash")[-1]
    assert resumed.tool_names == ["finish"]
    assert outcome.summary == "wrote r.txt"


def test_a_stream_lost_after_an_edit_records_a_summary_repair_or_its_limit(
    openai_server: ScriptedOpenAIServer, workspace: Path
) -> None:
    """A stream lost after a `write_file` asks for the summary (rule 9 keeps the change), so the
    review shows a summary or says why there is none."""
    openai_server.add_answers(
        "lost after edit",
        tool_call_answer(write("w.txt", "w")),
        tool_call_answer(finish("wrote w.txt")).with_fault(Fault.drop_connection, after_chunks=2),
        tool_call_answer(finish("wrote w.txt")),
    )
    outcome = agent_for(openai_server).run_turn(
        turn_for(workspace, MemoryConversation(), "lost after edit")
    )
    assert (workspace / "w.txt").read_text() == "w"
    assert outcome.summary or outcome.summary_repair is not None
