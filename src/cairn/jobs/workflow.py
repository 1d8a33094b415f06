"""The code-job workflow: the run gate, then the engine's stages in order."""

from __future__ import annotations

from cairn.engine import Workflow
from cairn.jobs import run_gate
from cairn.jobs.agent_turns import AGENT
from cairn.jobs.deliver import DELIVER
from cairn.jobs.dependencies import DEPENDENCIES
from cairn.jobs.drive import Drive, Handler
from cairn.jobs.finish import REVIEW, SUMMARY, VERIFY
from cairn.jobs.prepare import BASELINE, WORKSPACE
from cairn.stages import Stage

RUN_GATE: dict[Stage, Handler] = {
    Stage.queued: run_gate.queued,
    Stage.awaiting_run_approval: run_gate.run_approved,
}

CODE_JOB: Workflow[Drive] = Workflow(
    "code-job",
    (BASELINE, WORKSPACE, DEPENDENCIES, AGENT, VERIFY, SUMMARY, REVIEW, DELIVER),
)
