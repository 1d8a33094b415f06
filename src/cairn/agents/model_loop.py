"""The tool-calling loop of one turn, over the job's own append-only conversation.

Every model answer is saved before any of its calls runs, each call under cairn's own id (its
step and index: servers reuse theirs), and every call's result right after it ran; a resumed
turn continues from the last saved step: a saved answer is never asked for again, a call with
a saved result never runs again, and a call without one runs now (unless masking changed its
saved arguments: then the model is asked to make it again). A turn ends with `finish` (cairn
then reads the workspace), with `request_dependency` (the decision comes back as that call's
result; an ask no person could approve is a tool error instead), at the step limit, or when
the model is lost (rule 9; after a change, the summary is then asked for).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Protocol

from cairn.agents.base import Conversation, DependencyAsk, Outcome, OutcomeKind, Turn, Usage
from cairn.agents.context_budget import TokenCounter
from cairn.agents.model_actions import EDIT_TOOLS, Actions, CallResult
from cairn.agents.model_tools import (
    ALL_TOOLS,
    CallProblem,
    FinishArgs,
    RequestDependencyArgs,
    ToolCall,
    ToolName,
    openai_tools,
    parse_tool_call,
)
from cairn.agents.openai_client import ModelAnswer, ModelInterrupted, ModelRefused, ModelStopped
from cairn.agents.step_messages import (
    ContextTooBig,
    answered_ids,
    calls_of,
    messages_within,
    opening_steps,
)
from cairn.agents.text_calls import parse_text_calls
from cairn.deps.requests import dependency_problem
from cairn.sanitize import bound
from cairn.store.records import ContextStep, StepKind

NATIVE_CORRECTION = (
    "Your answer held no tool call. Call one of the tools to go on; call finish with a "
    "summary to end the turn."
)
REPAIR_NOTE = (
    "The turn changed files but ended without a usable summary. Call finish with a short "
    "summary of what changed and why; no other tool is available now."
)
REPAIRED = "repaired"
UNKNOWN_TOOL = "unknown"
"""How a call naming no tool of cairn's is saved: the name the model wrote may carry anything."""
ARGUMENT_CHARS = 1_100_000
"""The most of one call's arguments saved (a `write_file` writes at most 1 MiB)."""
CONTENT_CHARS = 100_000
"""The most of an answer's prose saved and sent back."""
_TOOL_NAMES = frozenset(tool.value for tool in ToolName)
_NOT_RUN_AFTER_FINISH = "not run: finish ended the turn"
ASK_AGAIN = (
    "this call was interrupted before it ran and its exact arguments were not kept (they "
    "held a masked value); make the call again"
)
_NOT_RUN_AFTER_ASK_AGAIN = "not run: an earlier call of this answer must be made again first"


class ModelClientLike(Protocol):
    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
        should_stop: Callable[[], bool] = ...,
    ) -> ModelAnswer: ...


@dataclass(frozen=True)
class LoopSettings:
    max_turn_steps: int
    context_tokens: int
    tool_protocol: str = "auto"


class ModelLoop:
    """One turn of the model in the job's conversation."""

    def __init__(
        self,
        turn: Turn,
        conversation: Conversation,
        client: ModelClientLike,
        settings: LoopSettings,
        mask: Callable[[str], str],
    ) -> None:
        self.turn = turn
        self.conversation = conversation
        self.client = client
        self.settings = settings
        self.mask = mask
        self.state: dict[str, Any] = dict(turn.state) if isinstance(turn.state, dict) else {}
        self.state["adapter"] = "openai"
        self.usage = Usage()
        self.counter = TokenCounter()
        self.start_tree = turn.workspace_id()
        # The tree the conversation opened on: "changed" means since then, across turns.
        self.state.setdefault("opened_tree", self.start_tree)
        self.actions = Actions(turn, self.state, mask, self._save_state)
        self.steps: list[ContextStep] = []
        self._raw_arguments: dict[str, str] = {}

    def run(self) -> Outcome:
        """Take the turn; the outcome is saved with the job's context before it is returned."""
        try:
            self.steps = self._opened()
            return self._loop()
        except ModelStopped:
            # The runner lost the job: nothing more is saved (the new holder's writes win).
            return Outcome(OutcomeKind.interrupted, usage=self.usage)

    # Opening: the conversation, then what cairn and people said since the last turn.

    def _opened(self) -> list[ContextStep]:
        turn = self.turn
        steps = self.conversation.steps()
        text = self.settings.tool_protocol == "text"
        if turn.fresh_opening is not None:
            opening = opening_steps(
                turn.facts, turn.fresh_opening, None, text_protocol=text, mask=self.mask
            )
            steps = self.conversation.restart(opening)
            self.state["opened_tree"] = self.start_tree
        elif not steps:
            # Rule 1: no context of its own, so a fresh one with one copy of its request.
            opening = opening_steps(
                turn.facts, turn.request, turn.facts.references, text_protocol=text, mask=self.mask
            )
            steps = self.conversation.restart(opening)
            self.state["opened_tree"] = self.start_tree
        self.steps = steps
        said = self._said_since_last_answer()
        notes = [note for note in turn.notes if self.mask(note) not in said]
        waiting = self._waiting_dependency_call()
        answer = next((n for n in notes if n.startswith("dependency ")), None)
        if waiting is not None and answer is not None:
            # The decision is the call's result: the next request carries it as such.
            notes.remove(answer)
            ok = " was approved" in answer
            self._save_result(self.actions.result(waiting, ok, answer))
        for note in notes:
            self._append(StepKind.note, {"content": self.mask(note)})
        for message in turn.follow_ups:
            if self.mask(message) not in said:
                self._append(StepKind.follow_up, {"content": self.mask(message)})
        self._save_state()  # the notes are in the conversation now: the inbox is emptied
        return self.steps

    def _said_since_last_answer(self) -> set[str]:
        last = self._last_answer_index()
        return {
            str(step.payload.get("content"))
            for step in self.steps[last + 1 :]
            if step.kind in (StepKind.note, StepKind.follow_up, StepKind.tool_result)
        }

    def _waiting_dependency_call(self) -> ToolCall | None:
        for call in self._pending_calls():
            parsed = self._parsed(call, self.steps[self._last_answer_index()])
            if isinstance(parsed, ToolCall) and parsed.name is ToolName.request_dependency:
                return parsed
        return None

    # The loop.

    def _loop(self) -> Outcome:
        asked = 0
        while True:
            if self.turn.stop_requested():
                raise ModelStopped
            pending = self._pending_calls()
            repair = self._resumed_repair(pending)
            if repair is not None:
                return repair
            if pending:
                ended = self._execute(pending)
                if ended is not None:
                    return ended
                continue
            last = self.steps[-1]
            if last.kind is StepKind.assistant and not calls_of(last):
                ended = self._after_text(last)
                if ended is not None:
                    return ended
                continue
            if asked >= self.settings.max_turn_steps:
                return self._out_of_steps()
            asked += 1
            try:
                answer = self._ask(ALL_TOOLS)
            except (ModelInterrupted, ModelRefused, ContextTooBig) as error:
                return self._lost(error)
            self._save_answer(answer, ALL_TOOLS)

    def _pending_calls(self) -> list[dict[str, str]]:
        index = self._last_answer_index()
        if index < 0:
            return []
        answered = answered_ids(self.steps[index + 1 :])
        return [call for call in calls_of(self.steps[index]) if call["id"] not in answered]

    def _last_answer_index(self) -> int:
        for index in range(len(self.steps) - 1, -1, -1):
            if self.steps[index].kind is StepKind.assistant:
                return index
        return -1

    def _parsed(self, call: dict[str, str], step: ContextStep) -> ToolCall | CallProblem:
        offered = [ToolName.finish] if step.payload.get("repair") else ALL_TOOLS
        if call.get("problem"):
            return CallProblem(call["id"], call["name"], call["problem"])
        # This process's own copy when it has one: the saved arguments are masked.
        arguments = self._raw_arguments.get(call["id"], call["arguments"])
        return parse_tool_call(call["id"], call["name"], arguments, offered)

    def _lost_arguments(self, call: dict[str, str]) -> bool:
        """Whether a call resumed after a crash would run on masked arguments, not its own."""
        return bool(call.get("masked")) and call["id"] not in self._raw_arguments

    def _execute(self, pending: list[dict[str, str]]) -> Outcome | None:
        step = self.steps[self._last_answer_index()]
        for index, call in enumerate(pending):
            if self._lost_arguments(call):
                # Run as saved it would write the mask, not what the model asked for.
                self._close(call, ASK_AGAIN)
                for rest in pending[index + 1 :]:
                    self._close(rest, _NOT_RUN_AFTER_ASK_AGAIN)
                return None
            parsed = self._parsed(call, step)
            if isinstance(parsed, CallProblem):
                self._save_result(self.actions.result(parsed, False, parsed.message))
                continue
            match parsed.arguments:
                case RequestDependencyArgs(ecosystem=eco, name=name, version=version, reason=why):
                    ask = DependencyAsk(eco, name, version, self.mask(why))
                    problem = dependency_problem(ask, mask=self.mask)
                    if problem is None:
                        return self._end(Outcome(OutcomeKind.dependency_request, dependency=ask))
                    # A request no person could approve is the model's to fix, not the job's end.
                    refused = f"the dependency request was not put to a person: {problem}"
                    self._save_result(self.actions.result(parsed, False, refused))
                    continue
                case FinishArgs(summary=summary):
                    self._save_result(self.actions.result(parsed, True, "the turn ends here"))
                    for rest in pending[index + 1 :]:
                        self._close(rest, _NOT_RUN_AFTER_FINISH)
                    return self._finished(summary)
            self._save_result(self.actions.execute(parsed))
        return None

    def _after_text(self, step: ContextStep) -> Outcome | None:
        """A text answer without a call: one short correction, then the usual rules."""
        index = self.steps.index(step)
        before = self.steps[index - 1] if index > 0 else None
        if before is not None and before.kind is StepKind.note and before.payload.get("correction"):
            return self._finished(None)
        correction = NATIVE_CORRECTION
        if self.settings.tool_protocol != "native":
            parsed = parse_text_calls(str(step.payload.get("content") or ""))
            correction = parsed.correction or NATIVE_CORRECTION
        self._append(StepKind.note, {"content": correction, "correction": True})
        return None

    # Asking the model.

    def _text_mode(self) -> bool:
        if self.settings.tool_protocol == "text":
            return True
        # A model that wrote its calls as text gets its conversation back in that form.
        return self.settings.tool_protocol == "auto" and any(
            step.kind is StepKind.assistant and step.payload.get("protocol") == "text"
            for step in self.steps
        )

    def _ask(self, offered: Sequence[ToolName]) -> ModelAnswer:
        tools = None if self.settings.tool_protocol == "text" else openai_tools(offered)
        sent = messages_within(
            self.steps,
            self.settings.context_tokens,
            self.counter,
            tools=tools,
            text_protocol=self._text_mode(),
        )
        answer = self.client.complete(sent, tools, self.turn.stop_requested)
        self.usage += answer.usage
        if answer.prompt_tokens > 0:
            counted = [*sent, {"tools": tools}] if tools else sent
            self.counter = TokenCounter.calibrated(counted, answer.prompt_tokens)
        return answer

    def _save_answer(self, answer: ModelAnswer, offered: Sequence[ToolName], **extra: Any) -> None:
        seq = (self.steps[-1].seq if self.steps else 0) + 1
        # cairn's own id per call: servers number calls per answer (or send none), and a
        # reused id would pair a call with an earlier call's result, marker or edit record.
        calls = [
            {"id": f"call-{seq}-{index}", "name": c.name, "arguments": c.arguments}
            for index, c in enumerate(answer.calls)
        ]
        protocol, content = "native", answer.content
        if not calls and self.settings.tool_protocol != "native" and content:
            found = parse_text_calls(content, offered, id_prefix=f"text-{seq}").calls
            if found:
                protocol, content = "text", None  # kept as calls; the prose is not stored
                calls = [_as_call(call) for call in found]
        self._raw_arguments = {call["id"]: call["arguments"] for call in calls}
        payload = {
            "content": bound(self.mask(content), CONTENT_CHARS) if content else None,
            "tool_calls": [self._stored_call(call) for call in calls],
            "usage": asdict(answer.usage),
            "protocol": protocol,
            **extra,
        }
        self._append(StepKind.assistant, payload)

    def _stored_call(self, call: dict[str, str]) -> dict[str, Any]:
        """A call as it is saved: a known tool's name, masked and bounded arguments."""
        name = call["name"] if call["name"] in _TOOL_NAMES else UNKNOWN_TOOL
        arguments = self.mask(call["arguments"])
        stored: dict[str, Any] = {"id": call["id"], "name": name, "arguments": arguments}
        if len(arguments) > ARGUMENT_CHARS:
            stored["arguments"] = "{}"
            stored["problem"] = (
                f"the call's arguments were {len(arguments):,} characters, over the limit of "
                f"{ARGUMENT_CHARS:,}; it was not run (write a large file in smaller parts)"
            )
        elif arguments != call["arguments"]:
            # Only this process holds the exact arguments: a resumed call must be asked again.
            stored["masked"] = True
        return stored

    # Ending the turn.

    def _finished(self, summary: str | None) -> Outcome:
        if not self._changed():
            return self._end(Outcome(OutcomeKind.no_change, summary=self._summary(summary)))
        if self._summary(summary):
            return self._end(Outcome(OutcomeKind.changed, summary=self._summary(summary)))
        return self._repair()

    def _out_of_steps(self) -> Outcome:
        if self._changed():
            return self._repair()
        steps = self.settings.max_turn_steps
        return self._end(
            Outcome(
                OutcomeKind.failed,
                diagnosis=f"the model used all {steps} steps of its turn without changing a "
                "file or finishing; raise max_turn_steps or make the request more specific",
            )
        )

    def _repair(self, kind: OutcomeKind = OutcomeKind.changed) -> Outcome:
        """Summary repair: ask only for the summary, with `finish` the only tool.

        `kind` is the outcome the turn has whatever the repair gives: `changed`, or
        `interrupted` when the model's stream was lost after the workspace changed.
        """
        self._append(StepKind.note, {"content": REPAIR_NOTE, "repair": True, "kind": kind.value})
        return self._ask_for_summary(kind)

    def _ask_for_summary(self, kind: OutcomeKind) -> Outcome:
        before = self.turn.workspace_id()
        try:
            answer = self._ask([ToolName.finish])
        except (ModelInterrupted, ModelRefused, ContextTooBig) as error:
            if isinstance(error, ModelInterrupted | ModelRefused):
                self.usage += error.usage
            limit = "limit: the model did not answer the request for a summary"
            return self._end(Outcome(kind, summary_repair=limit))
        self._save_answer(answer, [ToolName.finish], repair=True, kind=kind.value)
        return self._repaired(self.steps[-1], calls_of(self.steps[-1]), before)

    def _repaired(self, step: ContextStep, calls: Sequence[dict[str, str]], before: str) -> Outcome:
        """The repair answer's calls closed, and the outcome the repair leaves."""
        summary: str | None = None
        for call in calls:
            parsed = self._parsed(call, step)
            if isinstance(parsed, ToolCall) and isinstance(parsed.arguments, FinishArgs):
                summary = summary or self._summary(parsed.arguments.summary)
                self._save_result(self.actions.result(parsed, True, "the turn ends here"))
            else:
                self._close(call, "not run: only finish is available now")
        if self.turn.workspace_id() != before:
            repair = "limit: the workspace changed while the summary was repaired"
        elif summary:
            repair = REPAIRED
        else:
            repair = "limit: the model gave no usable summary when asked for one"
        kind = _repair_kind(step.payload.get("kind"))
        outcome = Outcome(kind, summary=summary, summary_repair=repair)
        return self._end(outcome)

    def _resumed_repair(self, pending: Sequence[dict[str, str]]) -> Outcome | None:
        """A summary repair a crash interrupted, gone on with as one (`finish` the only tool)."""
        last = self.steps[-1] if self.steps else None
        if last is not None and last.kind is StepKind.note and last.payload.get("repair"):
            # The repair answer was not saved.
            return self._ask_for_summary(_repair_kind(last.payload.get("kind")))
        answered = self._last_answer_index()
        step = self.steps[answered] if answered >= 0 else None
        if step is not None and step.payload.get("repair") and (pending or step is last):
            return self._repaired(step, pending, self.turn.workspace_id())
        return None

    def _lost(self, error: Exception) -> Outcome:
        if isinstance(error, ModelInterrupted):
            self.usage += error.usage
            if self._changed():
                # Rule 9 keeps the changes; the summary is asked for (or its limit recorded).
                return self._repair(OutcomeKind.interrupted)
            return self._end(Outcome(OutcomeKind.interrupted, diagnosis=str(error)))
        if isinstance(error, ModelRefused):
            self.usage += error.usage
        return self._end(Outcome(OutcomeKind.failed, diagnosis=str(error)))

    def _changed(self) -> bool:
        now = self.turn.workspace_id()
        if now != self.start_tree or now != self.state.get("opened_tree"):
            return True
        edits = {tool.value for tool in EDIT_TOOLS}
        return any(
            step.kind is StepKind.tool_result
            and step.payload.get("ok")
            and step.payload.get("name") in edits
            for step in self.steps
        )

    def _summary(self, summary: str | None) -> str | None:
        text = (summary or "").strip()
        return self.mask(text) if text else None

    def _end(self, outcome: Outcome) -> Outcome:
        unproven = bool(self.state.get("unsandboxed"))
        final = replace(outcome, usage=self.usage, isolation_unproven=unproven)
        self.turn.save_state(dict(self.state), final)
        return final

    # Saving.

    def _append(self, kind: StepKind, payload: dict[str, Any]) -> ContextStep:
        step = self.conversation.append(kind, payload)
        self.steps.append(step)
        return step

    def _save_result(self, result: CallResult) -> None:
        self._append(StepKind.tool_result, result.to_payload())
        # The call is done: its exactly-once markers have served their purpose.
        done = [
            key
            for key in ("running", "pending_edit")
            if isinstance(self.state.get(key), dict)
            and self.state[key].get("call") == result.call_id
        ]
        for key in done:
            del self.state[key]
        if done:
            self._save_state()

    def _close(self, call: dict[str, str], why: str) -> None:
        closed = CallResult(call["id"], self.mask(call["name"])[:80], None, False, why)
        self._save_result(closed)

    def _save_state(self) -> None:
        self.turn.save_state(dict(self.state))


def _repair_kind(saved: object) -> OutcomeKind:
    """The outcome kind a repair step saved: `interrupted` after a lost stream, else `changed`."""
    interrupted = OutcomeKind.interrupted
    return interrupted if saved == interrupted.value else OutcomeKind.changed


def _as_call(call: ToolCall) -> dict[str, str]:
    arguments = json.dumps(call.arguments.model_dump(exclude_none=True))
    return {"id": call.id, "name": call.name.value, "arguments": arguments}
