"""`cairn show`'s agent, usage and transcript summary, read from the job's own ledgers."""

from __future__ import annotations

from typing import Any

import pytest

from cairn.jobs.transcript import MAX_CALLS, TARGET_LIMIT
from cairn.jobs.view import job_detail
from cairn.store import Store, context_steps, identity, leases, progress, rooms
from cairn.store import jobs as job_ledger
from cairn.store.records import Job, StepKind
from cairn.testing.harness import Cairn

SPEC = {
    "adapter": "openai",
    "model": "qwen2.5-coder",
    "base_url": "http://127.0.0.1:8000/v1",
    "api_key_env": "OPENAI_API_KEY",
    "max_turn_steps": 40,
    "context_tokens": 32000,
    "temperature": None,
    "stream": True,
    "tool_protocol": "auto",
}


def _jobs(store: Store, count: int = 1) -> list[Job]:
    with store.begin() as conn:
        user = identity.add_user(conn, "alice")
        group = identity.add_group(conn, "team")
        identity.set_membership(conn, group.id, user.id, "member")
        room = rooms.create_room(
            conn, name="backend", group_id=group.id, repo="/srv/repo.git", base_branch="main"
        )
        return [
            job_ledger.submit(
                conn,
                room_id=room.id,
                requester_id=user.id,
                text=f"task {n}",
                agent=SPEC,
                scope={},
            )
            for n in range(count)
        ]


def _result(call: int, name: str, target: str | None, ok: bool = True) -> dict[str, Any]:
    return {"call_id": f"call-{call}", "name": name, "target": target, "ok": ok, "content": ""}


def _conversation(store: Store, job: Job, results: list[dict[str, Any]]) -> None:
    """Write the job's conversation as its runner would: under the lease, step by step."""
    with store.begin() as conn:
        claimed = leases.claim(conn, "runner-a", 60, job_id=job.id)
        assert claimed is not None
        token = claimed.fencing_token
        seq = 1
        context_steps.append(conn, job.id, token, seq, StepKind.request, {"content": "task"})
        for result in results:
            seq += 1
            answer = {"content": "I will call a tool: SECRET-MODEL-TEXT", "tool_calls": []}
            context_steps.append(conn, job.id, token, seq, StepKind.assistant, answer)
            seq += 1
            context_steps.append(conn, job.id, token, seq, StepKind.tool_result, result)


def test_show_reports_the_stored_spec_and_adds_up_usage_with_model_requests(store: Store) -> None:
    job, other = _jobs(store, 2)
    with store.begin() as conn:
        progress.add_usage(
            conn,
            job.id,
            agent="openai",
            seconds=1.25,
            input_tokens=100,
            output_tokens=20,
            model_requests=3,
        )
        progress.add_usage(
            conn,
            job.id,
            agent="openai",
            seconds=0.5,
            run_kind="corrective",
            input_tokens=40,
            output_tokens=5,
            model_requests=2,
        )
        progress.add_usage(conn, other.id, agent="openai", seconds=9, model_requests=9)
        detail = job_detail(conn, job.id).model_dump(mode="json")
    assert detail["agent"] == SPEC
    assert detail["usage"] == {
        "agent_runs": 2,
        "corrective_runs": 1,
        "model_requests": 5,
        "input_tokens": 140,
        "output_tokens": 25,
        "seconds": 1.75,
    }


def test_a_job_without_a_conversation_has_an_empty_transcript_summary(store: Store) -> None:
    (job,) = _jobs(store)
    with store.begin() as conn:
        detail = job_detail(conn, job.id)
    assert detail.transcript_summary.model_dump() == {"calls": (), "omitted": 0}
    assert detail.usage.model_requests == 0


def test_transcript_summary_lists_tool_calls_and_never_the_model_text(store: Store) -> None:
    job, other = _jobs(store, 2)
    _conversation(
        store,
        job,
        [
            _result(1, "read_file", "src/app.py"),
            _result(2, "replace_in_file", "src/app.py", ok=False),
            _result(3, "run", "python -m pytest -q"),
            _result(4, "finish", None),
        ],
    )
    _conversation(store, other, [_result(1, "write_file", "other.txt")])
    with store.begin() as conn:
        detail = job_detail(conn, job.id)
    assert detail.transcript_summary.model_dump(mode="json") == {
        "calls": [
            {"name": "read_file", "target": "src/app.py", "status": "ok"},
            {"name": "replace_in_file", "target": "src/app.py", "status": "error"},
            {"name": "run", "target": "python -m pytest -q", "status": "ok"},
            {"name": "finish", "target": None, "status": "ok"},
        ],
        "omitted": 0,
    }
    assert "SECRET-MODEL-TEXT" not in detail.model_dump_json()


def test_transcript_summary_is_bounded_and_counts_the_rest(store: Store) -> None:
    (job,) = _jobs(store)
    _conversation(store, job, [_result(n, "read_file", f"f{n}.py") for n in range(MAX_CALLS + 7)])
    with store.begin() as conn:
        summary = job_detail(conn, job.id).transcript_summary
    assert len(summary.calls) == MAX_CALLS
    assert summary.omitted == 7
    assert [c.target for c in summary.calls[:2]] == ["f0.py", "f1.py"]


def test_transcript_targets_are_masked_bounded_and_one_line(store: Store) -> None:
    key = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6"
    (job,) = _jobs(store)
    _conversation(
        store,
        job,
        [
            _result(1, "run", f"curl -H 'Authorization: Bearer {key}' https://x.test"),
            _result(2, "run", "echo one\n\x1b[31mtwo\x1b[0m"),
            _result(3, "write_file", "a/" * 200),
            _result(4, "<script>alert(1)</script>", "x"),
        ],
    )
    with store.begin() as conn:
        calls = job_detail(conn, job.id).transcript_summary.calls
    assert key not in calls[0].target  # type: ignore[operator]
    assert calls[1].target == "echo one two"
    assert len(calls[2].target or "") <= TARGET_LIMIT
    assert calls[3].name == "unknown"


def test_the_text_view_prints_the_usage_line_and_the_first_tool_calls(
    cairn: Cairn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from cairn.cli import main
    from cairn.cli.job_commands import TRANSCRIPT_LINES

    job = cairn.submit("steps:\n  - finish: {summary: done}\n")
    with cairn.store.begin() as conn:
        progress.add_usage(
            conn, job.id, agent="openai", seconds=2.0, input_tokens=9, output_tokens=3,
            model_requests=4,
        )  # fmt: skip
    calls = [_result(n, "read_file", f"src/f{n}.py") for n in range(TRANSCRIPT_LINES + 2)]
    _conversation(cairn.store, job, [*calls, _result(99, "run", "false", ok=False)])
    # The installation's store (the fixture's, not one under its home).
    url = cairn.store.engine.url.render_as_string(hide_password=False)
    monkeypatch.setenv("CAIRN_DATABASE_URL", url)
    main(["--home", str(cairn.config.home), "show", str(job.id)])
    out = capsys.readouterr().out
    assert "usage: 1 agent run, 4 model requests, 9 input and 3 output tokens, 2.0 s" in out
    assert f"tool calls ({TRANSCRIPT_LINES + 3}):" in out
    assert "  read_file src/f0.py  ok" in out
    assert f"src/f{TRANSCRIPT_LINES}.py" not in out
    assert "... and 3 more (`--json` lists up to 50)" in out
    assert "SECRET-MODEL-TEXT" not in out


def test_a_script_agent_is_shown_by_its_step_count_never_its_text(cairn: Cairn) -> None:
    said = "finish: {summary: 'the hidden words'}"
    job = cairn.submit(f"steps:\n  - write: {{path: a.txt, content: a}}\n  - {said}\n")
    detail = cairn.detail(job.id)
    assert detail["agent"] == {"adapter": "script", "steps": 2}
    assert "the hidden words" not in str(detail)
