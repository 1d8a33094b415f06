"""The `codex` spec, its command line and config, and how its `--json` events read."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path

import pytest

from cairn.agents.cli_agent import CliTurnPlan
from cairn.agents.cli_session import masked_lines
from cairn.agents.codex_cli import CodexCli, CodexCliAgent, codex_spec
from cairn.agents.codex_config import catalog_entry, catalog_for
from cairn.agents.codex_events import CodexEvents
from cairn.agents.registry import get_agent, load_agent_spec
from cairn.config import Config
from cairn.errors import UsageError
from cairn.sanitize import mask_secret_shapes

KEY = "sk-proj-" + "9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f0e"
THREAD = "01a2332b-02d2-76b2-8cd6-ca28c75f01e6"
MCP = {"cairn": {"type": "stdio", "command": "/py", "args": ["-m", "x"], "env": {"A": "1"}}}


def _plan(tmp_path: Path, *, resume: bool = False, session: str = "") -> CliTurnPlan:
    return CliTurnPlan(
        Path("/srv/work/job-1"),
        tmp_path / "state",
        session,
        resume,
        "-do it",
        "http://127.0.0.1:9/v1",
        KEY,
        MCP,
        "cairn-scripted",
    )


def test_agent_codex_with_and_without_a_model_stores_every_default() -> None:
    assert load_agent_spec("codex") == load_agent_spec("codex:")
    assert load_agent_spec("codex:gpt-5.1-codex") == {
        "adapter": "codex",
        "model": "gpt-5.1-codex",
        "command": None,
        "max_retries": 1,
        "timeout": 3600.0,
    }


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"model": "two words"}, "--model names a model"),
        ({"model": KEY}, "credential"),
        ({"command": ""}, "--command is the path of the codex binary"),
        ({"max_retries": 50}, "max_retries"),
        ({"timeout": 1}, "timeout"),
        ({"api_key": KEY}, "no setting 'api_key'"),
    ],
)
def test_bad_settings_are_usage_errors_saying_what_to_do(
    given: dict[str, object], said: str
) -> None:
    with pytest.raises(UsageError) as refused:
        codex_spec(given)
    assert said in str(refused.value) and KEY not in str(refused.value)


def test_the_runner_gives_the_endpoint_and_key_the_spec_never_holds(tmp_path: Path) -> None:
    environment = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1/", "OPENAI_API_KEY": KEY}
    agent = get_agent(load_agent_spec("codex"), Config(home=tmp_path, environment=environment))
    assert isinstance(agent, CodexCliAgent)
    assert agent.base_url == "http://127.0.0.1:9/v1" and KEY not in repr(agent)


def test_every_turn_is_writable_and_resumes_by_thread_id_never_the_last(tmp_path: Path) -> None:
    module = CodexCli()
    first = module.command_line("codex", _plan(tmp_path))
    later = module.command_line("codex", _plan(tmp_path, resume=True, session=THREAD))
    assert first[:3] == ["codex", "exec", "--json"] and "resume" not in first
    assert later[3] == "resume" and later[-3:] == [THREAD, "--", "-do it"]
    for argv in (first, later):
        assert "--last" not in argv and KEY not in " ".join(argv)
        assert "--dangerously-bypass-approvals-and-sandbox" in argv
    environment = module.environment(_plan(tmp_path))
    assert environment == {
        "CODEX_HOME": str(tmp_path / "state" / "codex"),
        "NO_COLOR": "1",
        "OPENAI_API_KEY": KEY,
    }


def test_the_config_names_the_provider_bounded_retries_and_cairns_mcp_server(
    tmp_path: Path,
) -> None:
    CodexCli(max_retries=2).command_line(str(tmp_path / "no-codex-here"), _plan(tmp_path))
    home = tmp_path / "state" / "codex"
    config = tomllib.loads((home / "config.toml").read_text())
    provider = config["model_providers"][config["model_provider"]]
    assert provider["base_url"] == "http://127.0.0.1:9/v1"
    assert provider["env_key"] == "OPENAI_API_KEY" and provider["wire_api"] == "responses"
    assert provider["request_max_retries"] == provider["stream_max_retries"] == 2
    assert config["features"] == {"plugins": False, "unbounded_connection_retries": False}
    assert config["analytics"] == {"enabled": False}
    assert config["shell_environment_policy"] == {"inherit": "core"}
    server = config["mcp_servers"]["cairn"]
    assert server["command"] == "/py" and server["args"] == ["-m", "x"] and server["required"]
    catalog = json.loads(Path(config["model_catalog_json"]).read_text())
    assert catalog["models"] == [catalog_entry(config["model"])], "no catalog to add it to"
    assert KEY not in (home / "config.toml").read_text()


def test_the_real_cli_reads_the_config_and_its_mcp_server(tmp_path: Path, codex_cli: Path) -> None:
    CodexCli().command_line(str(codex_cli), _plan(tmp_path))
    home = tmp_path / "state" / "codex"
    done = subprocess.run(
        [str(codex_cli), "mcp", "list", "--json"],
        env={"CODEX_HOME": str(home), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-500:]
    assert [server["name"] for server in json.loads(done.stdout)] == ["cairn"]


def test_a_model_codex_knows_keeps_its_own_entry_and_another_is_added(codex_cli: Path) -> None:
    ours = catalog_for(str(codex_cli), "cairn-scripted")
    slugs = [entry["slug"] for entry in ours]
    assert slugs[-1] == "cairn-scripted" and len(slugs) > 1, "Codex's own models stay"
    known = slugs[0]
    theirs = catalog_for(str(codex_cli), known)
    assert [entry["slug"] for entry in theirs] == slugs[:-1]
    assert theirs[0] != catalog_entry(known), "Codex's own entry, not cairn's"


def test_the_rollout_is_found_where_codex_wrote_it_else_restored_under_a_fixed_date(
    tmp_path: Path,
) -> None:
    module = CodexCli()
    plan = _plan(tmp_path, resume=True, session=THREAD)
    restored = module.session_file(plan)
    assert restored.name == f"rollout-2000-01-01T00-00-00-{THREAD}.jsonl"
    written = tmp_path / "state" / "codex" / "sessions" / "2026" / "12" / "01"
    written.mkdir(parents=True)
    (written / f"rollout-2026-12-01T19-53-06-{THREAD}.jsonl").write_text("{}\n")
    assert module.session_file(plan).parent == written


def _read(*events: dict[str, object]) -> CodexEvents:
    reader = CodexEvents(Path("/srv/work/job-1"))
    for event in events:
        reader.feed(json.dumps(event))
    reader.feed("WARNING: not an event")
    return reader


def test_a_completed_turn_reports_its_thread_tools_usage_and_closing_message() -> None:
    command = {"id": "i0", "type": "command_execution", "command": "/bin/bash -lc 'ls -a'"}
    change = {"id": "i1", "type": "file_change", "changes": [{"path": "/srv/work/job-1/a.py"}]}
    report = _read(
        {"type": "thread.started", "thread_id": THREAD},
        {"type": "item.started", "item": {**command, "status": "in_progress"}},
        {"type": "item.completed", "item": {**command, "status": "completed", "exit_code": 0}},
        {"type": "item.completed", "item": {**change, "status": "completed"}},
        {"type": "item.completed", "item": {"id": "i2", "type": "agent_message", "text": "Done"}},
        {"type": "turn.completed", "usage": {"input_tokens": 10, "output_tokens": 3}},
    ).report
    assert report.session_id == THREAD and report.summary == "Done"
    assert [a.to_data() for a in report.activity] == [
        {"tool": "exec_command", "target": "ls -a", "status": "ok"},
        {"tool": "apply_patch", "target": "a.py", "status": "ok"},
    ]
    assert (report.usage.input_tokens, report.usage.output_tokens) == (10, 3)
    assert report.final == {"type": "turn.completed"} and not report.lost_connection


@pytest.mark.parametrize(
    ("message", "lost", "failure"),
    [
        ("stream disconnected before completion: Transport error", True, None),
        ("unexpected status 503 Service Unavailable: busy, url: http://h/v1", True, None),
        ("unexpected status 401 Unauthorized: Incorrect key, url: http://h/v1", False, "401"),
        ("unexpected status 400 Bad Request: no such model", False, "no such model"),
    ],
)
def test_a_failed_turn_is_a_lost_connection_or_a_failure_in_its_own_words(
    message: str, lost: bool, failure: str | None
) -> None:
    report = _read(
        {"type": "thread.started", "thread_id": "not a thread id"},
        {"type": "error", "message": f"Reconnecting... 1/1 ({message})"},
        {"type": "turn.failed", "error": {"message": message}},
    ).report
    assert report.session_id is None and report.final == {"type": "turn.failed"}
    assert report.lost_connection is lost
    if failure is None:
        assert report.failure is None
    else:
        assert report.failure is not None and failure in report.failure
        assert "url:" not in report.failure
    if failure == "401":
        assert report.failure is not None and "OPENAI_API_KEY" in report.failure


def test_a_masked_session_file_stays_json() -> None:
    line = json.dumps({"time_to_first_token_ms": 85, "output": f"key={KEY}"})

    def mask(text: str) -> str:
        return mask_secret_shapes(text.replace(KEY, "[secret]"))

    assert "85" not in mask(line), "masked as text, the line would lose its number"
    first, second = masked_lines(f"{line}\nplain {KEY}", mask).split("\n")
    assert json.loads(first) == {"time_to_first_token_ms": 85, "output": "key=[secret]"}
    assert second == "plain [secret]"
