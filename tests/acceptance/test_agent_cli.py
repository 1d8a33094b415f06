"""Named agents through the real CLI: `cairn agent`, `--agent NAME`, room defaults, `show`."""

from __future__ import annotations

import json

import pytest

from .conftest import Cli

pytestmark = pytest.mark.acceptance

KEY = "sk-proj-" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe"
LOCAL = {
    "adapter": "openai",
    "model": "qwen2.5-coder:7b",
    "base_url": "http://127.0.0.1:11434/v1",
    "api_key_env": "OLLAMA_KEY",
    "max_turn_steps": 12,
    "context_tokens": 16000,
    "temperature": 0.2,
    "stream": False,
    "tool_protocol": "text",
}
DONE = """
steps:
  - write: {path: notes.txt, content: "hello\\n"}
  - finish: {summary: "Wrote notes.txt."}
"""


def _add_local(cli: Cli, name: str = "local-qwen", *extra: str) -> None:
    cli(
        "agent", "add", name, "--adapter", "openai", "--model", "qwen2.5-coder:7b",
        "--base-url", "http://127.0.0.1:11434/v1/", "--api-key-env", "OLLAMA_KEY",
        "--max-turn-steps", "12", "--context-tokens", "16000", "--temperature", "0.2",
        "--no-stream", "--tool-protocol", "text", *extra,
    )  # fmt: skip


def _error(cli: Cli, *args: str, expect: int = 2) -> str:
    done = cli(*args, expect=expect)
    assert done.stderr.startswith("error: "), done.stderr
    return done.stderr


def test_agent_add_stores_exactly_the_spec_and_list_shows_it(cli: Cli) -> None:
    _add_local(cli)
    cli("agent", "add", "hosted", "--adapter", "openai", "--model", "gpt-4o-mini")
    listed = cli.json("agent", "list")
    assert listed == [
        {"name": "local-qwen", **LOCAL},
        {
            "name": "hosted",
            "adapter": "openai",
            "model": "gpt-4o-mini",
            "base_url": None,
            "api_key_env": "OPENAI_API_KEY",
            "max_turn_steps": 40,
            "context_tokens": 32000,
            "temperature": None,
            "stream": True,
            "tool_protocol": "auto",
        },
    ]
    text = cli("agent", "list").stdout
    assert "local-qwen" in text and "key from OLLAMA_KEY" in text


def test_agent_add_refuses_bad_input_with_clear_errors_and_echoes_no_credential(cli: Cli) -> None:
    add = ("agent", "add", "a1", "--adapter", "openai", "--model", "m")
    with_creds = _error(cli, *add, "--base-url", f"https://me:{KEY}@api.example.com/v1")
    assert "--base-url carries credentials" in with_creds and KEY not in with_creds
    in_query = _error(cli, *add, "--base-url", f"https://api.example.com/v1?api-key={KEY}")
    assert "--base-url carries a key or token" in in_query and KEY not in in_query
    as_key = _error(cli, *add, "--api-key-env", KEY)
    assert "looks like an API key" in as_key and KEY not in as_key
    assert "names an environment variable" in _error(cli, *add, "--api-key-env", "MY-KEY")
    assert "lower-case" in _error(cli, "agent", "add", "Bad Name", *add[3:])
    assert "name of an agent adapter" in _error(cli, "agent", "add", "openai", *add[3:])
    assert "--adapter is one of openai" in _error(cli, "agent", "add", "a1", "--adapter", "x",
                                                   "--model", "m")  # fmt: skip
    assert "--tool-protocol is one of auto, native, text" in _error(
        cli, *add, "--tool-protocol", "xml"
    )
    assert "--max-turn-steps" in _error(cli, *add, "--max-turn-steps", "0")
    cli(*add)
    assert "already exists" in _error(cli, *add)
    assert [a["name"] for a in cli.json("agent", "list")] == ["a1"]


def test_only_an_admin_adds_or_removes_a_named_agent(cli: Cli) -> None:
    refused = _error(cli, "agent", "add", "a1", "--adapter", "openai", "--model", "m",
                     "--as", "alice", expect=1)  # fmt: skip
    assert "only an admin of a group can add a named agent" in refused
    _add_local(cli)
    refused = _error(cli, "agent", "remove", "local-qwen", "--as", "alice", expect=1)
    assert "only an admin" in refused
    cli("agent", "remove", "local-qwen")
    assert cli.json("agent", "list") == []
    assert "no agent named 'local-qwen'" in _error(cli, "agent", "remove", "local-qwen", expect=1)


def test_a_job_submitted_with_a_named_agent_stores_its_spec(cli: Cli) -> None:
    cli.room()
    _add_local(cli)
    job = cli.json("submit", "sample", "Tidy up", "--agent", "local-qwen", "--as", "alice")["id"]
    detail = cli.show(job)
    assert detail["agent"] == LOCAL
    # The job keeps its copy: removing the named agent changes nothing about it.
    cli("agent", "remove", "local-qwen")
    assert cli.show(job)["agent"] == LOCAL
    unknown = _error(cli, "submit", "sample", "Tidy up", "--agent", "local-qwen")
    assert "no agent named 'local-qwen'" in unknown and "cairn agent list" in unknown


def test_a_room_default_agent_is_used_when_a_job_names_none(cli: Cli) -> None:
    _add_local(cli)
    cli("room", "create", "sample", "--repo", str(cli.repo), "--agent", "local-qwen")
    rooms = cli.json("room", "list")
    assert rooms[0]["agent"] == "local-qwen"
    job = cli.json("submit", "sample", "Tidy up", "--as", "alice")["id"]
    assert cli.show(job)["agent"] == LOCAL
    refused = _error(cli, "agent", "remove", "local-qwen", expect=1)
    assert "default agent of room sample" in refused
    # A job naming its own agent still gets that one.
    script = cli.script(DONE)
    own = cli.json("submit", "sample", "Other", "--agent", f"script:{script}", "--as", "alice")
    assert cli.show(own["id"])["agent"] == {"adapter": "script", "steps": 2}
    cli("room", "set-agent", "sample", "--clear")
    missing = _error(cli, "submit", "sample", "Tidy up", "--as", "alice")
    assert "room sample has no default agent" in missing and "--agent" in missing
    cli("room", "set-agent", "sample", "local-qwen")
    assert cli.json("room", "list")[0]["agent"] == "local-qwen"
    cli("agent", "add", "hosted", "--adapter", "openai", "--model", "gpt-4o-mini")
    cli("room", "set-agent", "sample", "hosted")
    later = cli.json("submit", "sample", "Tidy up", "--as", "alice")["id"]
    assert cli.show(later)["agent"]["model"] == "gpt-4o-mini"


def test_room_defaults_are_checked_and_decided_by_the_rooms_admin(cli: Cli) -> None:
    missing = _error(cli, "room", "create", "sample", "--repo", str(cli.repo), "--agent", "nope",
                     expect=1)  # fmt: skip
    assert "no agent named 'nope'" in missing
    cli.room()
    _add_local(cli)
    refused = _error(cli, "room", "set-agent", "sample", "local-qwen", "--as", "alice", expect=1)
    assert "only an admin of group default" in refused
    assert "or pass --clear" in _error(cli, "room", "set-agent", "sample")
    assert cli.json("room", "list")[0]["agent"] is None


def test_show_prints_the_usage_line_and_json_carries_usage_and_transcript(cli: Cli) -> None:
    cli.room()
    job = cli.submit(DONE)
    cli.work()
    detail = cli.show(job)
    assert detail["usage"] | {"seconds": 0} == {
        "agent_runs": 1,
        "corrective_runs": 0,
        "model_requests": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "seconds": 0,
    }
    assert detail["transcript_summary"] == {"calls": [], "omitted": 0}
    assert (
        "usage: 1 agent run, 0 model requests, 0 input and 0 output tokens"
        in cli("show", str(job)).stdout
    )
    assert json.dumps(detail).count(KEY) == 0


def test_demo_with_the_openai_agent_delivers_through_the_scripted_server(fresh_cli: Cli) -> None:
    scratch = fresh_cli.tmp / "scratch"
    scratch.mkdir()
    done = fresh_cli("demo", "--agent", "openai", env={"TMPDIR": str(scratch)}, expect=None)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "asks model cairn-scripted (a scripted OpenAI server)" in out
    assert "termcolor==2.4.0" in out and "Delivered." in out
    assert "effect push: done" in out and "effect merge: done" in out
    assert list(scratch.iterdir()) == []


def test_demo_refuses_an_unknown_agent_and_a_model_without_openai(fresh_cli: Cli) -> None:
    assert "--agent is one of script, openai" in _error(fresh_cli, "demo", "--agent", "x")
    assert "--model goes with --agent openai" in _error(fresh_cli, "demo", "--model", "m")


def test_agent_add_a_codex_agent_stores_its_model_and_binary(cli: Cli) -> None:
    cli(
        "agent", "add", "team-codex", "--adapter", "codex", "--model", "gpt-5.1-codex",
        "--command", "/opt/codex/bin/codex",
    )  # fmt: skip
    assert cli.json("agent", "list") == [
        {
            "name": "team-codex",
            "adapter": "codex",
            "model": "gpt-5.1-codex",
            "command": "/opt/codex/bin/codex",
            "max_retries": 1,
            "timeout": 3600.0,
        }
    ]
    listed = cli("agent", "list").stdout
    assert "codex gpt-5.1-codex" in listed and "OPENAI_API_KEY" in listed
    assert "--model names a model" in _error(
        cli, "agent", "add", "bad", "--adapter", "codex", "--model", "two words"
    )


def test_agent_add_aider_stores_its_spec_and_needs_a_model(cli: Cli) -> None:
    cli(
        "agent", "add", "team-aider", "--adapter", "aider", "--model", "qwen2.5-coder",
        "--command", "/opt/aider/bin/aider",
    )  # fmt: skip
    assert cli.json("agent", "list") == [
        {
            "name": "team-aider",
            "adapter": "aider",
            "model": "qwen2.5-coder",
            "command": "/opt/aider/bin/aider",
            "edit_format": None,
            "timeout": 3600.0,
        }
    ]
    assert "OPENAI_API_BASE" in cli("agent", "list").stdout
    refused = _error(cli, "agent", "add", "no-model", "--adapter", "aider")
    assert "needs a model" in refused and "--model" in refused
