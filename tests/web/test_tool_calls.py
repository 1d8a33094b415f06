"""The job page lists the tool calls of the agent's conversation, never the model's own text."""

from __future__ import annotations

from authority.conftest import WRITE_B
from cairn.store import context_steps, leases
from cairn.store.records import StepKind

from .conftest import Site
from .forms import Clients, text_of


def test_the_job_page_lists_each_tool_call_with_its_status(site: Site, clients: Clients) -> None:
    site.pause_runner()
    alice, csrf = clients.signed_in(site.tokens["alice"])
    made = alice.post("/new", data={"room": "sample", "text": "t", "script": WRITE_B, "csrf": csrf})
    job_id = int(made.headers["location"].rsplit("/", 1)[1])
    calls = [("read_file", "src/app.py", True), ("run", "python -m pytest -q", False)]
    with site.team.store.begin() as conn:
        claimed = leases.claim(conn, "runner-a", 60, job_id=job_id)
        assert claimed is not None
        token, seq = claimed.fencing_token, 1
        context_steps.append(conn, job_id, token, seq, StepKind.request, {"content": "t"})
        for n, (name, target, ok) in enumerate(calls):
            answer = {"content": "thinking: SECRET-MODEL-TEXT", "tool_calls": []}
            context_steps.append(conn, job_id, token, seq + 1, StepKind.assistant, answer)
            result = {"call_id": f"c{n}", "name": name, "target": target, "ok": ok, "content": ""}
            context_steps.append(conn, job_id, token, seq + 2, StepKind.tool_result, result)
            seq += 2
    page = text_of(alice.get(f"/jobs/{job_id}"))
    listed = page[page.index("The agent's tool calls") :]
    assert '<code>read_file</code> <span class="muted">src/app.py</span>' in listed
    assert 'badge-ok">ok' in listed and 'badge-failed">error' in listed
    assert listed.index("read_file") < listed.index("python -m pytest -q")
    assert "SECRET-MODEL-TEXT" not in page
