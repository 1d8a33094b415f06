"""`cairn agent check` for openai agents, through the real CLI against a scripted server."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from tests.agents.check_support import CheckCli, assert_private, by_name, closed_port, statuses

from cairn.agents.checks import CHECK_MARKER, CHECKS, Check, check_agent, failed
from cairn.config import Config
from cairn.testing import ScriptedOpenAIServer
from cairn.testing.openai_script import Fault, ToolCall, text_answer, tool_call_answer
from cairn.testing.openai_server import TEST_API_KEY

WRONG_KEY = "sk-proj-" + "Wr0ngKeyWr0ngKeyWr0ngKey0123"
LEAKED = "team-" + "Qq1Ww2Ee3Rr4Tt5Yy6"
ALL = {name: "passed" for name in ("key set", "endpoint", "key", "model", "tool calls")}


@pytest.fixture
def cli(tmp_path: Path) -> CheckCli:
    home = tmp_path / "home"
    checker = CheckCli(home, tmp_path)
    checker("init")
    return checker


def _answers(server: ScriptedOpenAIServer) -> None:
    server.add_answers(CHECK_MARKER, text_answer("OK"), tool_call_answer(ToolCall("report_ok")))


def _runner(server: ScriptedOpenAIServer, key: str | None = TEST_API_KEY) -> dict[str, str]:
    environment = {"OPENAI_BASE_URL": server.base_url}
    return environment | ({"OPENAI_API_KEY": key} if key is not None else {})


def test_a_named_agent_that_works_passes_every_check_and_writes_nothing(
    cli: CheckCli, openai_server: ScriptedOpenAIServer, tmp_path: Path
) -> None:
    cli("agent", "add", "local", "--adapter", "openai", "--model", "cairn-scripted")
    _answers(openai_server)
    store = cli.home / "cairn.db"
    before = hashlib.sha256(store.read_bytes()).hexdigest()
    report, _ = cli.check("local", env=_runner(openai_server), expect=0)
    assert statuses(report) == ALL and report["ok"] is True
    assert report["agent"] == "local" and report["model"] == "cairn-scripted"
    assert hashlib.sha256(store.read_bytes()).hexdigest() == before, "a check is not a job"
    sent = [r for r in openai_server.requests if r.method == "POST"]
    assert [r.body["max_tokens"] for r in sent] == [16, 64], "tiny answers only"
    assert [bool(r.body.get("tools")) for r in sent] == [False, True]
    assert all(r.authorization_matched for r in openai_server.requests)
    _answers(openai_server)
    text = cli("agent", "check", "local", env=_runner(openai_server)).stdout
    assert "every check passed" in text and "passed   tool calls" in text
    assert_private(text, TEST_API_KEY, str(tmp_path))


def test_a_missing_key_fails_naming_the_variable_it_reads(
    cli: CheckCli, openai_server: ScriptedOpenAIServer, tmp_path: Path
) -> None:
    report, done = cli.check(
        "--agent", "openai:cairn-scripted", env=_runner(openai_server, None), expect=1
    )
    missing = by_name(report, "key set")
    assert missing["status"] == "failed" and "OPENAI_API_KEY is not set" in missing["reason"]
    assert "set OPENAI_API_KEY" in missing["fix"]
    assert statuses(report)["endpoint"] == "passed"
    assert statuses(report)["model"] == "skipped", "nothing is asked of a server that wants a key"
    assert not [r for r in openai_server.requests if r.method == "POST"]
    assert_private(done.stdout, str(tmp_path))


def test_a_server_that_needs_no_key_passes_without_one(cli: CheckCli, tmp_path: Path) -> None:
    with ScriptedOpenAIServer() as keyless:  # a local server: Ollama, llama.cpp
        _answers(keyless)
        report, _ = cli.check("--agent", "openai:m", env=_runner(keyless, None), expect=0)
    assert "needs no key" in by_name(report, "key set")["reason"]


def test_a_wrong_key_fails_naming_the_variable_and_never_showing_the_key(
    cli: CheckCli, openai_server: ScriptedOpenAIServer, tmp_path: Path
) -> None:
    cli("agent", "add", "hosted", "--adapter", "openai", "--model", "m", "--api-key-env", "MY_KEY")
    env = {"OPENAI_BASE_URL": openai_server.base_url, "MY_KEY": WRONG_KEY}
    report, done = cli.check("hosted", env=env, expect=1)
    refused = by_name(report, "key")
    assert refused["status"] == "failed" and "HTTP 401" in refused["reason"]
    assert "MY_KEY" in refused["reason"] and "set MY_KEY" in refused["fix"]
    text = cli("agent", "check", "hosted", env=env, expect=1).stdout
    assert "to do: set MY_KEY" in text and "some checks failed" in text
    assert_private(done.stdout + text, WRONG_KEY, str(tmp_path))


def test_an_endpoint_that_is_down_fails_and_skips_what_needs_it(
    cli: CheckCli, tmp_path: Path
) -> None:
    env = {"OPENAI_BASE_URL": f"http://127.0.0.1:{closed_port()}/v1", "OPENAI_API_KEY": "k"}
    report, _ = cli.check("--agent", "openai:m", env=env, expect=1)
    down = by_name(report, "endpoint")
    assert down["status"] == "failed" and "nothing answers at" in down["reason"]
    assert "OPENAI_BASE_URL" in down["fix"]
    assert [statuses(report)[n] for n in ("key", "model", "tool calls")] == ["skipped"] * 3
    assert "OPENAI_BASE_URL" in down["reason"], "the runner's URL is named by its variable"
    url = f"http://127.0.0.1:{closed_port()}/v1"
    cli("agent", "add", "local", "--adapter", "openai", "--model", "m", "--base-url", url)
    report, _ = cli.check("local", env={"OPENAI_API_KEY": "k"}, expect=1)
    assert by_name(report, "endpoint")["reason"] == f"nothing answers at {url}"


def test_a_model_the_server_does_not_know_fails_listing_what_it_serves(
    cli: CheckCli, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.add_answers(CHECK_MARKER, text_answer("").with_fault(Fault.model_not_found))
    report, _ = cli.check("--agent", "openai:no-such-model", env=_runner(openai_server), expect=1)
    model = by_name(report, "model")
    assert model["status"] == "failed"
    assert "no model 'no-such-model' (HTTP 404)" in model["reason"]
    assert "it lists cairn-scripted" in model["reason"] and "--model" in model["fix"]
    assert statuses(report)["key"] == "passed" and statuses(report)["tool calls"] == "skipped"


def test_a_model_without_native_tool_calls_fails_only_where_the_agent_needs_them(
    cli: CheckCli, openai_server: ScriptedOpenAIServer
) -> None:
    native = ("--tool-protocol", "native")
    cli("agent", "add", "strict", "--adapter", "openai", "--model", "m", *native)
    openai_server.add_answers(CHECK_MARKER, text_answer("OK"), text_answer("I would call it."))
    report, _ = cli.check("strict", env=_runner(openai_server), expect=1)
    tools = by_name(report, "tool calls")
    assert tools["status"] == "failed" and "--tool-protocol auto" in tools["fix"]
    openai_server.add_answers(CHECK_MARKER, text_answer("OK"), text_answer("I would call it."))
    report, _ = cli.check("--agent", "openai:m", env=_runner(openai_server), expect=0)
    assert "reads calls it writes as text" in by_name(report, "tool calls")["reason"]


def test_bad_requests_are_clear_usage_errors(cli: CheckCli, tmp_path: Path) -> None:
    both = cli("agent", "check", "x", "--agent", "openai:m", expect=2)
    assert "name one agent" in both.stderr
    unknown = cli("agent", "check", "nobody", expect=2)
    assert "there is no agent named 'nobody'" in unknown.stderr
    script = tmp_path / "s.yaml"
    script.write_text("steps:\n  - finish: {summary: done}\n")
    scripted = cli("agent", "check", "--agent", f"script:{script}", expect=2)
    assert f"adapters with one: {', '.join(sorted(CHECKS))}" in scripted.stderr
    assert_private(both.stderr + unknown.stderr + scripted.stderr, str(tmp_path))


def _leaky_check(spec: object, config: object) -> list[Check]:
    del spec, config
    return [failed("leak", f"the key is {LEAKED}", f"paste {LEAKED} somewhere\x1b[2J else")]


def test_whatever_an_adapters_check_says_is_masked_before_it_is_shown(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(CHECKS, "openai", f"{__name__}:_leaky_check")
    config = Config(home=tmp_path / "home").model_copy(
        update={"environment": {"TEAM_API_KEY": LEAKED}}
    )
    report = check_agent({"adapter": "openai", "model": "m"}, config)
    (check,) = report.checks
    assert LEAKED not in check.reason + str(check.fix) and "\x1b" not in str(check.fix)
    assert report.ok is False and report.to_data()["checks"][0]["status"] == "failed"
