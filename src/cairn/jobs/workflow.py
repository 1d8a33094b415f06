"""The code-job workflow: which handler moves a runnable job on from each stage."""

from __future__ import annotations

from cairn.jobs import agent_turns, deliver, finish, prepare, run_gate
from cairn.jobs.drive import Handler
from cairn.stages import Stage

HANDLERS: dict[Stage, Handler] = {
    Stage.queued: run_gate.queued,
    Stage.awaiting_run_approval: run_gate.run_approved,
    Stage.preparing_baseline: prepare.preparing_baseline,
    Stage.preparing_workspace: prepare.preparing_workspace,
    Stage.preparing_dependencies: prepare.preparing_dependencies,
    Stage.running_agent: agent_turns.running_agent,
    Stage.awaiting_dependency_approval: agent_turns.dependency_decided,
    Stage.installing_dependency: agent_turns.installing_dependency,
    Stage.verifying: finish.verifying,
    Stage.summarizing: finish.summarizing,
    Stage.awaiting_review: finish.review_approved,
    Stage.delivering: deliver.delivering,
}
