"""Hostile review of the openai adapter: each test fails today and passes once fixed."""

from __future__ import annotations

import contextlib
from pathlib import Path

from tests.agents.support import ContextStore, Crash
from tests.agents.test_openai_agent import (
    MemoryConversation,
    agent_for,
    finish,
    turn_for,
    write,
)

from cairn.agents import OutcomeKind, Turn
from cairn.sanitize import Sanitizer
from cairn.store.records import StepKind
from cairn.testing import ScriptedOpenAIServer, ToolCall, tool_call_answer


def test_a_run_call_reusing_an_earlier_call_id_still_runs(
    openai_server: ScriptedOpenAIServer, workspace: Path
) -> None:
    """Servers that number calls per answer (or send none: the client's `call-0`) reuse ids.

    The `running` marker is keyed by call id and never cleared, so the second `run` is taken
    for an interrupted copy of the first and is never run.
    """
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
    """The edit journal (`pending_edit`) is keyed by call id too."""
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
    """`messages_from_steps` maps results by call id over the whole conversation: the first
    call is sent the second call's result."""
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


def test_a_write_resumed_after_a_crash_writes_what_the_model_asked_not_the_mask(
    openai_server: ScriptedOpenAIServer, workspace: Path
) -> None:
    """The saved arguments are masked; a call resumed after a crash between the answer's save
    and the tool's run is executed from them, so the file gets the mask instead of the text."""
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


def test_a_dependency_call_with_a_range_version_is_a_tool_error_not_the_jobs_end(
    openai_server: ScriptedOpenAIServer, workspace: Path
) -> None:
    """Contract: tool errors go back to the model as results. A `request_dependency` whose
    version is a range ends the turn as a dependency request, which the agent stage then
    refuses with StageFailed (agent_turns._ask_for_dependency): the whole job fails."""
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


def test_one_tool_result_larger_than_the_budget_is_cut_not_the_end_of_the_job(
    openai_server: ScriptedOpenAIServer, workspace: Path
) -> None:
    """The latest step is always kept whole; one `read_file` of a 40 KB file under a 2,000
    token budget makes every later request ContextTooBig and the turn fails."""
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


def _git_content_id(root: Path) -> str:
    """What `Worktree.content_id` measures: `git add --all` into a scratch index (ignored files
    are not part of it)."""
    import os
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(scratch) / "index")}
        for args in (["read-tree", "HEAD"], ["add", "--all"]):
            subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)
        done = subprocess.run(
            ["git", "write-tree"], cwd=root, env=env, check=True, capture_output=True, text=True
        )
        return done.stdout.strip()


def test_a_run_interrupted_after_it_appended_to_an_ignored_file_is_not_run_again(
    openai_server: ScriptedOpenAIServer, tmp_path: Path
) -> None:
    """Rule 9 / exactly-once: `_run` reruns a marked command whenever the workspace's content
    id is unchanged, but the content id leaves out .gitignored files, so a command that
    appended to one (a log, a counter, a local .env) appends twice after a crash."""
    import subprocess

    from tests.agents.test_openai_agent import CrashingConversation

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
    """`_save_answer` masks each call's arguments but stores its `name` and `id` as the model
    wrote them (unmasked and unbounded): an unknown tool named after the API key, or a call id
    holding an environment value, lands in the stored context steps."""
    import json

    from cairn.testing.openai_server import TEST_API_KEY

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
    """The context is meant to be bounded, yet `_save_answer` stores every call's arguments
    masked but never bounded: a 3 MB `write_file` (which the tool itself refuses, its limit is
    1 MiB) is saved whole in the job's context step and re-sent until elided."""
    import json

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


def test_a_huge_prose_answer_is_not_stored_whole_in_the_context(
    openai_server: ScriptedOpenAIServer, workspace: Path
) -> None:
    """Issue 13: the model's raw text is never stored beyond the bounded context. A 2 MB prose
    answer (no call) is stored whole as the assistant step's content."""
    import json

    from cairn.testing import text_answer

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
    """Some OpenAI-compatible servers (older Ollama, some proxies) stream each tool call whole
    in its own delta without `index`. `_Assembly.add` keys calls by `piece.index` only, so
    every such call lands under the key None: two calls come back as one call named after
    the last, with both argument texts glued together (the write is lost)."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from cairn.agents.openai_client import ModelClient

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
    """The repair's restriction lives only in `_repair`'s own call. A runner that dies while
    waiting for the repair answer resumes in `_loop`, which asks with ALL_TOOLS: the model is
    handed write_file and run again during what is a summary repair."""
    from cairn.agents.model_loop import REPAIR_NOTE

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
    """Issue 13: summary repair applies when the work is accepted but the `finish` summary is
    missing (no finish at all among the cases). A stream lost after a `write_file` ends
    `interrupted` in `_lost` with neither a summary nor a summary_repair record, so the
    review shows no summary and the evidence does not say one was never asked for."""
    from cairn.testing import Fault

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
