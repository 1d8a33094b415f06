"""Through the real `cairn` command: what it prints, as text or `--json`, carries no secret."""

from __future__ import annotations

import json

import pytest
import yaml
from hypothesis import HealthCheck, given, settings

from acceptance.conftest import Cli

from .leaks import Planted, assert_no_leak, planted_texts

pytestmark = pytest.mark.acceptance


def _script(planted: Planted) -> str:
    # A script that carries a secret is refused (test_cli_input), so the agent makes the
    # planted text at run time, from hex, the way a tool would print one.
    decode = "import sys; sys.stdout.write(bytes.fromhex(open('out.hex').read()).decode())"
    steps = [
        {"write": {"path": "out.hex", "content": planted.text.encode().hex()}},
        {"run": f'python -c "{decode}" > out.txt'},
        {
            "request_dependency": {
                "ecosystem": "pypi",
                "name": "termcolor",
                "version": "2.4.0",
                "reason": "colour output",
            }
        },
        {"run": "cat out.txt; exit 4"},
    ]
    return yaml.safe_dump({"steps": steps})


def test_show_and_jobs_json_carry_no_secret(cli: Cli) -> None:
    cli.room(verify="cat out.txt; exit 1")

    @settings(
        max_examples=2,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(planted=planted_texts(configured=False))
    def property_holds(planted: Planted) -> None:
        env = cli.env
        cli.env = env | planted.environ
        try:
            job = cli.submit(_script(planted), f"Fix it:\n{planted.text}")
            cli.work()
            waiting = cli.show(job)
            assert waiting["stage"] == "awaiting_dependency_approval", waiting
            cli("approve", str(job))
            cli.work()
            shown = [cli.show(job), cli.json("jobs"), cli("show", str(job)).stdout]
        finally:
            cli.env = env
        assert shown[0]["status"] == "failed", shown[0]
        assert_no_leak(planted, shown)
        cli.assert_private(json.dumps(shown))

    property_holds()


def test_a_script_error_names_no_secret(cli: Cli) -> None:
    cli.room()
    token = "ghp_" + "K8j7H6g5" * 5
    script = cli.script(f"steps: []\n{token}: 1\n")
    refused = cli("submit", "sample", "x", "--agent", f"script:{script}", expect=None)
    assert refused.returncode != 0 and "unknown top-level key" in refused.stderr
    assert token[4:] not in refused.stdout + refused.stderr


def test_a_cli_error_echoing_input_names_no_secret(cli: Cli) -> None:
    token = "ghp_" + "M3n4B5v6" * 5
    script = cli.script("steps: [finish: {}]\n")
    refused = cli("submit", token, "x", "--agent", f"script:{script}", expect=None)
    assert refused.returncode != 0
    assert token[4:] not in refused.stderr
