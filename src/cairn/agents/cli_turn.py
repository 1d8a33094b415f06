"""One turn of a coding CLI in the job's own session, and the outcome read from what happened.

The turn restores the job's session file (if this host lacks it), runs the CLI in the sandbox
with cairn's MCP tools, saves the session file back into the job's context, and maps the pair
(workspace identity, the CLI's final event) to an outcome (rule 9): a dependency asked for
over MCP; `changed` or `no_change` after a clean finish; `interrupted` when the model's
connection was lost, the CLI died or ran out of time (the workspace then decides whether
verification goes on or a new attempt starts); `failed` with the CLI's reason otherwise.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from cairn.agents import cli_session, mcp_tools
from cairn.agents.base import DependencyAsk, Outcome, OutcomeKind, Turn, Usage
from cairn.agents.cli_agent import (
    ACTIVITY_LIMIT,
    CliModule,
    CliReport,
    CliTurnPlan,
    EventReader,
)
from cairn.agents.cli_process import CliRun, NetworkPlan, network_plan, run_cli
from cairn.errors import WorkspaceError
from cairn.sanitize import MASK, bound, mask_secret_shapes
from cairn.store.records import StepKind

INVOCATION_LIMIT = 20
"""How many turns' command-line flags the job's context keeps (for audit and tests)."""
DIAGNOSIS_CHARS = 500
CONTINUE = (
    "cairn resumed this session after the last turn was cut off. Look at the working "
    "directory as it is now, then continue the task where it stopped."
)
_MIN_MASKED_KEY = 6
REQUESTS_FOLDER = "cairn-requests"
"""The cairn-owned folder in the job's state folder where a turn's dependency ask is recorded."""


class CliTurn:
    """One turn of `module`'s CLI, in the job's session, sandboxed; see the module docstring."""

    def __init__(
        self,
        module: CliModule,
        binary: str | None,
        turn: Turn,
        endpoint: str,
        api_key: str | None,
        spec: Mapping[str, Any],
    ) -> None:
        self.module = module
        self.binary = binary
        self.turn = turn
        self.endpoint = endpoint
        self.api_key = api_key
        self.spec = spec
        self.state: dict[str, Any] = dict(turn.state) if isinstance(turn.state, dict) else {}
        self.state["adapter"] = module.name
        self.report: CliReport | None = None
        """What the CLI's event stream said, once the turn ran (`cairn agent check` reads it)."""

    def run(self) -> Outcome:
        """Take the turn; its outcome is saved with the job's context before it is returned."""
        turn = self.turn
        if self.binary is None:
            return self._end(self._failed(
                f"the {self.module.name} CLI is not installed on this runner: install it, or "
                "give the named agent the binary's path with --command"
            ))  # fmt: skip
        if turn.agent_home is None:
            return self._end(self._failed("this runner gives CLI agents no state folder"))
        state_dir = turn.agent_home
        requests = state_dir / REQUESTS_FOLDER
        requests.mkdir(parents=True, exist_ok=True)
        mcp_tools.clear_requests(requests)
        # One network for the whole turn: where egress.py's proxy is entered and left. Its
        # folder is beside the state folder, not in it: hidden from the sandbox, not writable.
        egress = state_dir.with_name(f"{state_dir.name}.egress")
        try:
            with network_plan(self.endpoint, egress) as network:
                plan = self._plan(state_dir, requests, network.endpoint)
                argv = self.module.command_line(self.binary, plan)
                self._remember(argv, plan)
                self.turn.save_state(dict(self.state))  # the session id and tree, before it runs
                reader = self.module.reader(turn.workspace)
                run = self._run(argv, plan, network, self._watch(reader))
        except WorkspaceError as exc:  # no sandbox, no proxy, or a link out of the workspace
            return self._end(self._failed(str(exc)))
        report = self.report = reader.report
        if run.stopped:
            # The runner lost the job: nothing more is saved (the new holder's writes win).
            return Outcome(OutcomeKind.interrupted, usage=report.usage)
        named = replace(plan, session_id=str(self.state.get("session_id") or plan.session_id))
        saved = cli_session.saved_session(self.module.session_file(named), self._mask_secrets)
        if saved is not None:
            self.state["session_file"] = saved
        self._keep_activity(report)
        outcome = self._outcome(run, report, mcp_tools.take_request(requests))
        return self._end(replace(outcome, usage=report.usage, isolation_unproven=not run.sandboxed))

    def _plan(self, state_dir: Path, requests: Path, endpoint: str) -> CliTurnPlan:
        turn = self.turn
        generation = int(self.state.get("generation", 0))
        if turn.fresh_opening is not None:
            generation += 1  # `cairn reply --fresh`: a new session, still the job's own
            self.state.pop("session_file", None)
            if self._reports_sessions:
                self.state.pop("session_id", None)
        self.state["generation"] = generation
        session = cli_session.session_id(turn.installation_id, turn.job_id, generation)
        if self._reports_sessions:
            # The CLI names its sessions (Codex: the thread id its first turn reports): the
            # job's is the one it reported, none before the job's first turn started one.
            session = str(self.state.get("session_id") or "")
        mcp = {mcp_tools.SERVER_NAME: mcp_tools.server_config(sys.executable, requests)}
        draft = CliTurnPlan(
            turn.workspace, state_dir, session, False, "", self.endpoint, self.api_key, mcp
        )
        path = self.module.session_file(draft)
        if "session_id" not in self.state or turn.fresh_opening is not None:
            # Rule 1: no context of its own (or a fresh one asked for), so no session either,
            # whatever this host's state folder still holds.
            cli_session.forget_session(path)
        resumed = bool(session) and cli_session.restore_session(
            path, self.state.get("session_file")
        )
        if session:
            self.state["session_id"] = session
        if not resumed:
            self.state["opened_tree"] = turn.workspace_id()
        self.state.setdefault("opened_tree", turn.workspace_id())
        return replace(
            draft,
            resume=resumed,
            prompt=self._prompt(resumed),
            endpoint=endpoint,
            model=self.spec.get("model"),
        )

    def _run(
        self, argv: list[str], plan: CliTurnPlan, network: NetworkPlan, on_line: Any
    ) -> CliRun:
        turn = self.turn
        return run_cli(
            argv,
            workspace=turn.workspace,
            state_dir=plan.state_dir,
            environment=self.module.environment(plan),
            network=network,
            hidden=turn.hidden_paths,
            on_line=on_line,
            timeout=float(self.spec.get("timeout") or 3600.0),
            should_stop=turn.stop_requested,
            allow_unsandboxed=turn.allow_unsandboxed,
        )

    @property
    def _reports_sessions(self) -> bool:
        return bool(getattr(self.module, "reports_session_id", False))

    def _watch(self, reader: EventReader) -> Callable[[str], None]:
        """Feed the reader; a session id the CLI reports is saved with the job's context at
        once, so a runner killed mid-turn still leaves the next one the job's session."""

        def feed(line: str) -> None:
            reader.feed(line)
            reported = reader.report.session_id
            if self._reports_sessions and reported and reported != self.state.get("session_id"):
                self.state["session_id"] = reported
                self.turn.save_state(dict(self.state))

        return feed

    def _prompt(self, resumed: bool) -> str:
        turn = self.turn
        told = [*turn.notes, *turn.follow_ups]
        if turn.fresh_opening is not None:
            return self._opening(turn.fresh_opening)
        if not resumed:
            opening = self._opening(turn.request)
            return "\n\n".join([opening, *told])
        return "\n\n".join(told) if told else CONTINUE

    def _opening(self, request: str) -> str:
        facts = self.turn.facts
        parts = [
            request,
            f"You work in a git checkout made for this job (room {facts.room}, base branch "
            f"{facts.base_branch}). Change files in the working directory only; do not commit, "
            "push or switch branches: cairn verifies, reviews and delivers the change.",
            self._dependency_instructions(),
        ]
        if facts.verify_command:
            parts.append(f"cairn verifies the change with `{facts.verify_command}`.")
        if facts.references:
            parts.append(facts.references)
        return "\n\n".join(parts)

    def _dependency_instructions(self) -> str:
        """How the agent asks for a package: cairn's MCP tool (a CLI without tools overrides)."""
        return (
            f"If the task needs a package that is not installed, call the "
            f"`{mcp_tools.TOOL_NAME}` tool (cairn's MCP server) with its ecosystem, exact name, "
            "exact version and why, then end your turn. End with a short summary of what you "
            "changed and why."
        )

    def _outcome(self, run: CliRun, report: CliReport, ask: DependencyAsk | None) -> Outcome:
        if ask is not None:
            return Outcome(OutcomeKind.dependency_request, dependency=self._masked_ask(ask))
        changed = self.turn.workspace_id() != self.state.get("opened_tree")
        name = self.module.name
        if run.exit_code is None:
            why = f"the {name} CLI ran out of its time ({self.spec.get('timeout')} s)"
            return Outcome(OutcomeKind.interrupted, diagnosis=why)
        if report.final is None:
            why = f"the {name} CLI ended without its final event (exit code {run.exit_code})"
            return Outcome(OutcomeKind.interrupted, diagnosis=why)
        if report.lost_connection:
            why = f"the {name} CLI lost the model's connection and gave up"
            return Outcome(OutcomeKind.interrupted, diagnosis=why)
        if report.failure is not None:
            why = f"the {name} CLI failed: {bound(self._mask(report.failure), DIAGNOSIS_CHARS)}"
            # Good work left behind is kept: rule 9 sends it on to verification.
            kind = OutcomeKind.interrupted if changed else OutcomeKind.failed
            return Outcome(kind, diagnosis=why)
        summary = self._mask(report.summary).strip() if report.summary else None
        kind = OutcomeKind.changed if changed else OutcomeKind.no_change
        return Outcome(kind, summary=summary or None)

    def _keep_activity(self, report: CliReport) -> None:
        """The turn's tool calls, bounded and masked: in the context, and as the job's
        transcript steps (tool, path or command, status; never any content)."""
        activity = [
            {key: self._mask(value) for key, value in item.to_data().items()}
            for item in report.activity[-ACTIVITY_LIMIT:]
        ]
        self.state["activity"] = activity
        conversation = self.turn.conversation
        if conversation is None:
            return
        turn_number = len(self.state.get("invocations", []))
        for index, item in enumerate(activity):
            payload = {
                "call_id": f"cli-{turn_number}-{index}",
                "name": item["tool"],
                "target": item["target"] or None,
                "ok": item["status"] == "ok",
                "content": "",
            }
            conversation.append(StepKind.tool_result, payload)

    def _remember(self, argv: list[str], plan: CliTurnPlan) -> None:
        """Keep the turn's flags (never the prompt, the MCP config or a key)."""
        hidden = {plan.prompt, argv[0]}
        flags = [
            "<prompt>" if part in hidden else part for part in argv if not part.startswith("{")
        ]
        kept = [*self.state.get("invocations", []), flags][-INVOCATION_LIMIT:]
        self.state["invocations"] = kept

    def _masked_ask(self, ask: DependencyAsk) -> DependencyAsk:
        return replace(ask, reason=self._mask(ask.reason))

    def _mask(self, text: str) -> str:
        key = self.api_key
        if key and len(key) >= _MIN_MASKED_KEY:
            text = text.replace(key, MASK)
        return self.turn.mask(text)

    def _mask_secrets(self, text: str) -> str:
        """Secrets only, for the session file: masking its paths would rewrite the history
        the CLI resumes from (the key is the one secret its environment holds)."""
        key = self.api_key

        def secrets(line: str) -> str:
            if key and len(key) >= _MIN_MASKED_KEY:
                line = line.replace(key, MASK)
            return mask_secret_shapes(line)

        return cli_session.masked_lines(text, secrets)

    def _failed(self, diagnosis: str) -> Outcome:
        return Outcome(OutcomeKind.failed, diagnosis=bound(self._mask(diagnosis), DIAGNOSIS_CHARS))

    def _end(self, outcome: Outcome) -> Outcome:
        final = replace(outcome, usage=outcome.usage or Usage())
        self.turn.save_state(dict(self.state), final)
        return final
