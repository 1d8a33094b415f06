"""What saving a job's conversation costs as it grows: append-only steps against one blob.

For each backend (SQLite, and PostgreSQL when it answers at 127.0.0.1:5432) one job is
claimed in a fresh store, then its conversation is saved the way a runner saves it, one
fenced transaction per step (commit and its fsync included):

- `append`: `store.context_steps.append`, one row per step (issue 13's ledger);
- `blob`:   `store.contexts.save` of the whole message list, rewritten at every step (the
            shape the context had before issue 13).

A save at step k is timed over a window of steps ending at k; the table shows the median of
the windows of several conversations (a new job each) at steps 10, 100 and 1,000, and the
ratio of step 1,000 to step 10 for each way.

    .venv/bin/python benchmarks/agent_context.py [--steps 10,100,1000] [--window 9] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cairn.store import Store, context_steps, contexts, identity, leases, rooms
from cairn.store import jobs as job_ledger
from cairn.store.records import ContextStep, Job, StepKind
from cairn.testing import stores
from cairn.testing.openai_script import ToolCall, tool_call_answer
from cairn.testing.openai_server import ScriptedOpenAIServer

# One step as a tool-calling loop saves it: a bounded tool result (about 1 kB of text).
TOOL_RESULT = {"call_id": "call_0", "name": "read_file", "content": "x = 1\n" * 170}

Save = Callable[[Store, Job, int], None]


def message(seq: int) -> dict[str, Any]:
    """The payload of step `seq` (each one distinct, so nothing compresses them away)."""
    return {**TOOL_RESULT, "call_id": f"call_{seq}"}


def append_step(store: Store, job: Job, seq: int) -> None:
    """Save step `seq` as one new row."""
    with store.fenced(job.id, job.fencing_token) as conn:
        context_steps.append(
            conn, job.id, job.fencing_token, seq, StepKind.tool_result, message(seq)
        )


def save_blob(store: Store, job: Job, seq: int) -> None:
    """Save step `seq` by rewriting the job's whole conversation, steps 1 to `seq`."""
    state = {"messages": [message(n) for n in range(1, seq + 1)]}
    with store.fenced(job.id, job.fencing_token) as conn:
        contexts.save(conn, job.id, "openai", state)


def measure(
    store: Store, save: Save, targets: list[int], window: int, *, every_step: bool
) -> dict[int, list[float]]:
    """Seconds of each save in the `window` steps ending at each target step, for a new job.

    `every_step`: save every step from 1 (appends, whose cost could grow with the rows before
    them); otherwise only the timed ones (a blob rewrite depends on the step alone).
    """
    job = claimed_job(store)
    windows = {k: range(max(1, k - window + 1), k + 1) for k in targets}
    wanted = {n for steps in windows.values() for n in steps}
    timed: dict[int, float] = {}
    for seq in range(1, max(targets) + 1):
        if not every_step and seq not in wanted:
            continue
        started = time.perf_counter()
        save(store, job, seq)
        timed[seq] = time.perf_counter() - started
    return {k: [timed[n] for n in steps] for k, steps in windows.items()}


def medians(
    store: Store, save: Save, targets: list[int], options: argparse.Namespace, *, every_step: bool
) -> dict[int, float]:
    """The median save at each target step, over every round's window (a new job per round)."""
    samples: dict[int, list[float]] = {k: [] for k in targets}
    for _ in range(options.rounds):
        for k, took in measure(store, save, targets, options.window, every_step=every_step).items():
            samples[k].extend(took)
    return {k: statistics.median(took) for k, took in samples.items()}


def claimed_job(store: Store) -> Job:
    """A new job in its own room, claimed by this process."""
    with store.begin() as conn:
        name = f"bench-{uuid.uuid4().hex[:8]}"
        user = identity.add_user(conn, name)
        group = identity.add_group(conn, name)
        room = rooms.create_room(conn, name=name, group_id=group.id, repo="/r", base_branch="main")
        job = job_ledger.submit(
            conn, room_id=room.id, requester_id=user.id, text="bench", agent={}, scope={}
        )
        taken = leases.claim(conn, "bench-runner", 3600, job_id=job.id)
    assert taken is not None, "a fresh job is claimable"
    return taken


@contextmanager
def fresh_store(backend: str, folder: Path) -> Iterator[Store | None]:
    """A migrated store of `backend`, removed afterwards; None when PostgreSQL is unreachable."""
    if backend == "sqlite":
        store = Store.open(f"sqlite:///{folder}/{backend}-{time.monotonic_ns()}.db", create=True)
        try:
            yield store
        finally:
            store.close()
        return
    admin, unreachable = stores.admin_engine()
    if unreachable:
        print(f"postgres: skipped ({unreachable.splitlines()[0]})")
        yield None
        return
    name = stores.unique_database_name("cairn_bench_context")
    stores.create_database(admin, name)
    store = Store.open(stores.postgres_database_url(name), create=True)
    try:
        yield store
    finally:
        store.close()
        stores.drop_database(admin, name)
        admin.dispose()


def report(backend: str, results: dict[str, dict[int, float]], targets: list[int]) -> None:
    """One line per way of saving: median ms at each target step, then last / first."""
    header = "".join(f"{f'step {k:,}':>13}" for k in targets)
    print(f"{backend:<10}{header}{f'{targets[-1]:,} vs {targets[0]:,}':>16}")
    for way, medians in results.items():
        cells = "".join(f"{medians[k] * 1000:>11.2f}ms" for k in targets)
        ratio = medians[targets[-1]] / medians[targets[0]]
        print(f"  {way:<8}{cells}{ratio:>15.2f}x")


class StoreConversation:
    """The Conversation protocol over the store, one fenced transaction per call, as the
    runner's `JobConversation` (which needs a whole job drive) does it."""

    def __init__(self, store: Store, job: Job) -> None:
        self.store, self.job = store, job

    def steps(self) -> list[ContextStep]:
        with self.store.fenced(self.job.id, self.job.fencing_token) as conn:
            return context_steps.steps(conn, self.job.id)

    def append(self, kind: StepKind, payload: Any) -> ContextStep:
        with self.store.fenced(self.job.id, self.job.fencing_token) as conn:
            last = context_steps.last_step(conn, self.job.id)
            seq = 1 if last is None else last.seq + 1
            return context_steps.append(
                conn, self.job.id, self.job.fencing_token, seq, kind, payload
            )

    def restart(self, opening: Any) -> list[ContextStep]:
        with self.store.fenced(self.job.id, self.job.fencing_token) as conn:
            return context_steps.replace(conn, self.job.id, self.job.fencing_token, opening)


def _script(server: ScriptedOpenAIServer, marker: str, steps: int) -> None:
    read = ToolCall("read_file", {"path": "module.py"})
    answers = [tool_call_answer(read) for _ in range(steps)]
    server.add_answers(marker, *answers, tool_call_answer(ToolCall("finish", {"summary": "ok"})))


def bare_loop(server: ScriptedOpenAIServer, marker: str, steps: int) -> float:
    """Seconds of a plain SDK loop through the same answers: no store, no tools, no budget."""
    import openai

    from cairn.agents.model_tools import openai_tools

    tools = openai_tools()
    messages: list[Any] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": marker},
    ]
    started = time.perf_counter()
    with openai.OpenAI(base_url=server.base_url, api_key="bench", max_retries=2) as client:
        for _ in range(steps + 1):
            stream = client.chat.completions.create(
                model="bench",
                messages=messages,
                tools=tools,  # type: ignore[arg-type]
                stream=True,
                stream_options={"include_usage": True},
            )
            calls: dict[int, dict[str, str]] = {}
            for chunk in stream:
                for choice in chunk.choices:
                    for piece in choice.delta.tool_calls or []:
                        call = calls.setdefault(piece.index, {"id": "", "name": "", "args": ""})
                        call["id"] = piece.id or call["id"]
                        if piece.function is not None:
                            call["name"] = piece.function.name or call["name"]
                            call["args"] += piece.function.arguments or ""
            listed = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["args"]},
                }
                for c in calls.values()
            ]
            messages.append({"role": "assistant", "content": None, "tool_calls": listed})
            for call in listed:
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": MODULE})
    return time.perf_counter() - started


MODULE = "x = 1\n" * 170


def cairn_loop(server: ScriptedOpenAIServer, marker: str, steps: int, folder: Path) -> float:
    """Seconds of one openai-adapter turn through the same answers, saved in a real store."""
    import cairn.agents.model_loop  # noqa: F401 - imported before the clock starts, as the SDK is
    from cairn.agents.base import Turn
    from cairn.agents.openai_agent import OpenAIAgent
    from cairn.agents.openai_spec import settings_from_spec

    workspace = folder / "workspace"
    workspace.mkdir(exist_ok=True)
    (workspace / "module.py").write_text(MODULE)
    store = Store.open(f"sqlite:///{folder}/loop-{time.monotonic_ns()}.db", create=True)
    try:
        conversation = StoreConversation(store, claimed_job(store))
        settings = settings_from_spec({"adapter": "openai", "model": "bench"})
        agent = OpenAIAgent(settings, base_url=server.base_url, api_key="bench")
        turn = Turn(
            job_id=conversation.job.id,
            workspace=workspace,
            request=marker,
            state=None,
            save_state=lambda state, outcome=None: None,
            workspace_id=lambda: (workspace / "module.py").read_text(),
            conversation=conversation,
        )
        started = time.perf_counter()
        outcome = agent.run_turn(turn)
        took = time.perf_counter() - started
        assert outcome.usage.model_requests == steps + 1, outcome
        return took
    finally:
        store.close()


def loop_overhead(steps: int, folder: Path) -> None:
    """Print the time per model step of both loops and their ratio."""
    with ScriptedOpenAIServer() as server:
        _script(server, "bench-bare", steps)
        _script(server, "bench-cairn", steps)
        bare = bare_loop(server, "bench-bare", steps) / (steps + 1)
        ours = cairn_loop(server, "bench-cairn", steps, folder) / (steps + 1)
    print(
        f"openai loop, {steps + 1} model steps: bare SDK {bare * 1000:.2f} ms/step, "
        f"cairn {ours * 1000:.2f} ms/step, ratio {ours / bare:.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="10,100,1000", help="steps to report, ascending")
    parser.add_argument("--window", type=int, default=9, help="saves per median")
    parser.add_argument("--rounds", type=int, default=3, help="conversations per way")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--loop-steps", type=int, default=40, help="model steps of the loop run")
    options = parser.parse_args()
    targets = sorted(int(k) for k in options.steps.split(","))
    ways: dict[str, tuple[Save, bool]] = {"append": (append_step, True), "blob": (save_blob, False)}
    print(
        "median time of one save (a fenced transaction and its commit), "
        f"{options.rounds} conversations x {options.window} saves per cell"
    )
    with tempfile.TemporaryDirectory(prefix="cairn-agent-context-") as tmp:
        for backend in options.backends.split(","):
            with fresh_store(backend, Path(tmp)) as store:
                if store is not None:
                    results = {
                        way: medians(store, save, targets, options, every_step=every)
                        for way, (save, every) in ways.items()
                    }
                    report(backend, results, targets)
        print(f"a step is one tool result of {len(str(TOOL_RESULT['content']))} characters")
        loop_overhead(options.loop_steps, Path(tmp))


if __name__ == "__main__":
    main()
