"""From a request to a merged change, through both outcomes of the integration gate."""

from __future__ import annotations

import re

import pytest

from cairn.testing.repos import SAMPLE_FILES

from .conftest import Cli

pytestmark = pytest.mark.acceptance

ADD_HELLO = """
steps:
  - write:
      path: src/hello.py
      content: |
        def hello() -> str:
            return "hello"
  - write:
      path: tests/test_hello.py
      content: |
        from hello import hello


        def test_hello():
            assert hello() == "hello"
  - finish: {summary: "Added hello() in src/hello.py, with a test."}
"""
REQUEST = "Add a hello() helper with a test"


def test_a_request_is_reviewed_then_pushed_and_merged(fresh_cli: Cli) -> None:
    cli = fresh_cli
    cli("init", "--run-approval", "auto", "--auto-kinds", "interactive")
    assert "already set up" in cli("init").stdout, "a second init changes nothing"
    cli("user", "add", "alice")
    cli.room(verify="python -m pytest -q")
    base = cli.git("rev-parse", "main")
    script = cli.script(ADD_HELLO)

    submitted = cli.json(
        "submit", "sample", REQUEST, "--agent", f"script:{script}", "--as", "alice"
    )
    assert submitted == {"id": 1}
    cli.work()

    waiting = cli.show(1)
    assert (waiting["status"], waiting["stage"]) == ("waiting", "awaiting_review")
    assert waiting["requester"] == "alice"
    assert re.fullmatch(r"cairn/[0-9a-f]{8}/job-1", waiting["branch"]), "the installation's own"
    assert waiting["baseline"] == base
    passed = [(s["name"], s["status"]) for s in waiting["stages"]]
    assert passed == [
        ("preparing_baseline", "accepted"),
        ("preparing_workspace", "accepted"),
        ("preparing_dependencies", "accepted"),
        ("running_agent", "accepted"),
        ("verifying", "accepted"),
        ("summarizing", "accepted"),
        ("awaiting_review", "paused"),
    ]
    verified = next(s for s in waiting["stages"] if s["name"] == "verifying")
    assert verified["evidence"]["exit_status"]["value"] == 0, "the verify command ran and passed"
    assert [(d["gate"], d["verdict"]) for d in waiting["decisions"]] == [("run", "auto")]
    assert waiting["effects"] == [], "nothing leaves cairn before the integration gate"
    summary = waiting["review"]["summary"]
    assert "Added hello() in src/hello.py" in summary and "tests/test_hello.py" in summary
    assert waiting["feed"] == f"{REQUEST}\n\n[awaiting_review]", "provisional: no summary yet"
    assert cli.git("rev-parse", "main") == base
    assert cli.git("branch", "--list", "cairn/*") == "", "the job branch is not pushed yet"

    cli("approve", "1")
    cli.work()

    done = cli.show(1)
    assert (done["status"], done["stage"]) == ("completed", "completed")
    assert done["diagnosis"] is None
    assert [(d["gate"], d["verdict"], d["actor"]) for d in done["decisions"]] == [
        ("run", "auto", "policy"),
        ("integration", "approved", "admin"),
    ]
    assert [(e["kind"], e["status"]) for e in done["effects"]] == [
        ("push", "done"),
        ("merge", "done"),
    ]
    assert "Delivered." in done["feed"] and "Added hello() in src/hello.py" in done["feed"]

    tip = cli.git("rev-parse", "main")
    assert cli.git("rev-parse", "main~1") == base
    assert cli.git("show", "main:src/hello.py").startswith("def hello()")
    added = {"src/hello.py", "tests/test_hello.py"}
    assert set(cli.git("ls-tree", "-r", "--name-only", "main").split()) == added | set(SAMPLE_FILES)
    job_branch = cli.git("rev-parse", waiting["branch"])
    parents = cli.git("rev-list", "--parents", "-n", "1", "main").split()[1:]
    assert job_branch == tip or job_branch in parents
    # The person's checkout of main was clean, so it moved with the branch.
    assert (cli.repo / "src" / "hello.py").read_text().startswith("def hello()")
    assert cli.git("status", "--porcelain") == ""


def test_a_rejection_at_the_integration_gate_records_why_and_delivers_nothing(cli: Cli) -> None:
    cli.room()
    base = cli.git("rev-parse", "main")
    job = cli.submit(ADD_HELLO, REQUEST)
    cli.work()
    assert cli.show(job)["stage"] == "awaiting_review"

    missing = cli("reject", str(job), expect=2)
    assert "--reason" in missing.stderr
    blank = cli("reject", str(job), "--reason", "   ", expect=2)
    assert blank.stderr.startswith("error:") and "reason" in blank.stderr

    why = "Use the existing greet() instead of a new helper."
    cli("reject", str(job), "--reason", why)
    rejected = cli.show(job)
    assert (rejected["status"], rejected["stage"]) == ("rejected", "rejected")
    assert rejected["decisions"][-1] | {"at": None} == {
        "gate": "integration",
        "verdict": "rejected",
        "actor": "admin",
        "reason": why,
        "policy": "group default: run_approval=auto(interactive,scheduled) "
        "dependency_approval=admin integration=admin",
        "at": None,
    }
    assert rejected["effects"] == []
    assert "Rejected at review." in rejected["feed"] and why in rejected["feed"]

    assert cli.git("rev-parse", "main") == base
    assert cli.git("for-each-ref", "refs/heads/cairn") == ""
    assert not (cli.repo / "src" / "hello.py").exists()
    cli("approve", str(job), expect=1)  # a closed job is never rewritten as a success


ADD_THEN_FOLLOW_UP = """
steps:
  - write: {path: src/hello.py, content: "def hello():\\n    return 'hi'\\n"}
  - finish: {summary: "Added hello()."}
  - write: {path: src/hello.py, content: "def hello() -> str:\\n    return 'hello'\\n"}
  - finish: {summary: "hello() now returns 'hello', typed, as asked."}
"""


def test_a_reply_at_review_sends_the_job_back_and_it_returns_with_the_change(cli: Cli) -> None:
    cli.room()
    base = cli.git("rev-parse", "main")
    job = cli.submit(ADD_THEN_FOLLOW_UP, REQUEST)
    worked = cli.work().stdout
    assert f'`cairn reply {job} "MESSAGE"` asks for changes instead' in worked

    empty = cli("reply", str(job), "  ", expect=2)
    assert empty.stderr.startswith("error:") and "message" in empty.stderr
    member = cli("reply", str(job), "Return 'hello'", "--as", "alice", expect=1)
    assert "only an admin" in member.stderr

    asked = "Return 'hello' and add a type hint"
    replied = cli("reply", str(job), asked)
    assert f"job {job}: changes requested" in replied.stdout and "`cairn work`" in replied.stdout
    working = cli.show(job)
    assert (working["stage"], working["status"]) == ("running_agent", "queued")
    assert working["decisions"][-1] | {"at": None, "policy": None} == {
        "gate": "integration",
        "verdict": "changes_requested",
        "actor": "admin",
        "reason": asked,
        "policy": None,
        "at": None,
    }
    assert (
        f"decision  integration changes_requested by admin: {asked}" in cli("show", str(job)).stdout
    )
    again = cli("reply", str(job), asked, expect=1)
    assert "running_agent" in again.stderr and "waits for review" in again.stderr

    cli.work()
    back = cli.show(job)
    assert (back["stage"], back["status"]) == ("awaiting_review", "waiting")
    assert "typed, as asked" in back["review"]["summary"]
    assert back["baseline"] == base
    assert [n["action"] for n in back["next"]] == ["review", "approve", "reply", "reject"]

    cli("approve", str(job))
    cli.work()
    done = cli.show(job)
    assert done["status"] == "completed"
    assert [(d["gate"], d["verdict"]) for d in done["decisions"]] == [
        ("run", "auto"),
        ("integration", "changes_requested"),
        ("integration", "approved"),
    ]
    assert cli.git("show", "main:src/hello.py") == "def hello() -> str:\n    return 'hello'"
    assert "decision chain intact: 3 decisions verified" in cli("audit", "verify").stdout
    late = cli("reply", str(job), asked, expect=1)
    assert "has ended" in late.stderr and f"`cairn retry {job}`" in late.stderr
