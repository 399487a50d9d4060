"""A chat model that plays a known trajectory instead of asking an LLM (``connector: scripted``).

A domain pack keeps, per sample, trajectories whose verdicts are known — one that does the task
right and one that does it wrong — so its evaluators can be proven against them: the known-good
one must pass every evaluator that applies and the known-bad one must fail at least one. Grading
the stored trajectories would prove little, since nothing in them happened; so the scripted
model replays them through the real environment instead. Each ``tool_call`` step becomes one
model turn calling that tool with those arguments, and what comes back is the environment's:
policy blocks, approvals, faults, injections and the workspace all apply, and the trajectory
graded is the one the run recorded. When the calls run out, the answer is the output of the
trajectory's last ``message`` step (``""`` without one). Every other step kind in the known
trajectory (``llm_call``, ``policy_block``, ``fault``…) is the environment's or the loop's to
write, and is ignored. Usage counts words (what the turn read, what it wrote), as the stub LLM
server does, so token budgets and ``agent-efficiency`` have figures; the cost is unknown.

The trajectories live in the sample, as plain evalsi trajectory JSON (``Trajectory.to_value``,
read with ``datasets.read_trajectory``): ``metadata.known.<variant>``; the spec picks the
variant (``target.agent.model: {connector: scripted, model: good}``). The model is per task:
``BuiltinHarness`` asks it ``for_task`` with the task's setup, and a sample without the variant
fails that task with a ``TargetError`` naming the sample and the variant.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evalsi.agents._harness import TaskSetup
from evalsi.connectors import Completion, TargetError
from evalsi.core import Message, Step, ToolCall, Usage
from evalsi.datasets import read_trajectory

CALL_ID = "scripted-"
"""Prefix of the ids of the calls the model makes: the turn is counted from them."""


class ScriptedModel:
    """The scripted connector: ``model`` names the variant of ``metadata.known`` to play.

    Example:
        >>> model = ScriptedModel("good")
        >>> model.describe()
        {'connector': 'scripted', 'model': 'good'}
    """

    connector = "scripted"
    system: str | None = None

    def __init__(self, model: str) -> None:
        self.model = model

    def describe(self) -> dict[str, Any]:
        return {"connector": self.connector, "model": self.model}

    def for_task(self, task: TaskSetup) -> ScriptedTask:
        """The model for one task: the sample's known trajectory ``self.model``."""
        where = f"sample {task.task_id!r}: metadata.known.{self.model}"
        known = task.metadata.get("known")
        if not isinstance(known, dict) or self.model not in known:
            variants = sorted(known) if isinstance(known, dict) else []
            raise TargetError(
                f"{where}: no known trajectory named {self.model!r} to play",
                hint=f"the sample has: {', '.join(variants) or '(none)'}; give "
                "metadata.known.<variant> as trajectory JSON ({steps: [...]})",
            )
        try:
            trajectory = read_trajectory(known[self.model], "trajectory")
        except ValueError as e:
            raise TargetError(f"{where}: {e}") from None
        return ScriptedTask(self.model, trajectory.steps)

    async def complete(
        self, messages: list[Message], *, seed: int | None = None, **params: Any
    ) -> Completion:
        raise TargetError(
            "the scripted model plays a sample's known trajectory: it runs in the built-in "
            "agent (target.agent.model), which asks it for each task's"
        )


class ScriptedTask:
    """One task's known trajectory, played a tool call per turn."""

    connector = "scripted"
    system: str | None = None

    def __init__(self, model: str, steps: Sequence[Step]) -> None:
        self.model = model
        self.calls: list[ToolCall] = [
            s.tool_call for s in steps if s.kind == "tool_call" and s.tool_call is not None
        ]
        said = [s.output for s in steps if s.kind == "message"]
        self.answer = _text(said[-1]) if said else ""

    async def complete(
        self, messages: list[Message], *, seed: int | None = None, **params: Any
    ) -> Completion:
        turn = sum(
            1
            for m in messages
            if m.role == "assistant" and any(c.id.startswith(CALL_ID) for c in m.tool_calls)
        )
        read = sum(len((m.content or "").split()) for m in messages)
        if turn < len(self.calls):
            planned = self.calls[turn]
            call = ToolCall(planned.name, planned.arguments, f"{CALL_ID}{turn}")
            reply = Message(role="assistant", content=None, tool_calls=[call])
            usage = Usage(input_tokens=read, output_tokens=1 + len(str(call.arguments).split()))
            return Completion("", [reply], usage, "tool_calls", model=self.model)
        reply = Message(role="assistant", content=self.answer)
        usage = Usage(input_tokens=read, output_tokens=len(self.answer.split()))
        return Completion(self.answer, [reply], usage, "stop", model=self.model)


def _text(output: Any) -> str:
    """A ``message`` step's text: its output as a string, or an object's ``text``/``content``."""
    if isinstance(output, str):
        return output
    if isinstance(output, dict):
        for key in ("text", "content"):
            if isinstance(output.get(key), str):
                return str(output[key])
    return "" if output is None else str(output)
