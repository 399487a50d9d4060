"""The built-in reference agent: a tool-calling loop over a chat model.

Each turn sends the conversation and the environment's tools to the model; the tool calls it
asks for run in parallel through the environment (which records them), their results go back as
tool messages, and the loop repeats until the model answers without a tool call
(``final_answer``) or a budget runs out (``max_steps``, ``max_tokens``, ``max_usd``,
``timeout``). An exhausted budget is the agent's failure: the answer so far is returned and
graded, with the stop reason in the trajectory. A model call that fails after the connector's
retries raises, and the task is lost to infrastructure, never graded.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from evalsi.agents._cassette import exchange, taped
from evalsi.agents._environment import Environment, ToolResult
from evalsi.connectors import Completion, InputLike, TargetOutput, input_messages
from evalsi.core import (
    Content,
    Message,
    Step,
    ToolCall,
    Trajectory,
    Usage,
    message_from_dict,
    message_to_dict,
)

Price = Callable[[str, Usage], "float | None"]
"""USD of one model call from its usage (``None``: unknown)."""


class ChatModel(Protocol):
    connector: str
    model: str
    system: str | None

    async def complete(
        self, messages: list[Message], *, seed: int | None = None, **params: Any
    ) -> Completion: ...


@dataclass(frozen=True, slots=True)
class Budgets:
    """Per task: model turns, tokens (input + output), US dollars, wall-clock seconds."""

    max_steps: int = 10
    max_tokens: int | None = None
    max_usd: float | None = None
    max_seconds: float | None = None


class ToolLoop:
    """Run one task: the model and the environment's tools, within the budgets."""

    def __init__(
        self,
        model: ChatModel,
        budgets: Budgets,
        *,
        price: Price | None = None,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.model = model
        self.budgets = budgets
        self.price = price
        self.clock = clock

    def tool_defs(self, environment: Environment) -> list[dict[str, Any]]:
        """The tools in the model API's shape."""
        specs = environment.specs()
        if self.model.connector == "anthropic":
            return [
                {"name": s.name, "description": s.description, "input_schema": dict(s.input_schema)}
                for s in specs
            ]
        return [s.to_openai() for s in specs]

    async def _complete(
        self, conversation: _Conversation, seed: int | None, tools: list[dict[str, Any]]
    ) -> Completion:
        """One model call, through the task's cassette (recorded, or replayed from it)."""
        messages = conversation.messages
        if not taped():
            return await self.model.complete(messages, seed=seed, tools=tools)

        async def live() -> dict[str, Any]:
            c = await self.model.complete(messages, seed=seed, tools=tools)
            return {
                "text": c.text,
                "messages": [message_to_dict(m) for m in c.messages],
                "usage": c.usage.known(),
                "finish_reason": c.finish_reason,
                "model": c.model,
                "attempts": c.attempts,
            }

        c = await exchange("model", None, live, key=conversation.key())
        return Completion(
            text=c["text"],
            messages=[message_from_dict(m) for m in c["messages"]],
            usage=Usage(**c["usage"]),
            finish_reason=c["finish_reason"],
            model=c["model"],
            attempts=c["attempts"],
        )

    async def run(
        self,
        input: InputLike,
        environment: Environment,
        *,
        seed: int | None = None,
        history: list[Message] | None = None,
    ) -> TargetOutput:
        """One turn of the agent on ``input``. With ``history`` (a conversation going on over
        several user turns) the turn continues it: ``input`` and everything this turn says
        are appended to that list, and the system prompt is sent only at its start."""
        b = self.budgets
        messages = history if history is not None else []
        messages.extend(input_messages(input, system=None if messages else self.model.system))
        tools = self.tool_defs(environment)
        conversation = _Conversation(
            messages, {"model": self.model.model, "tools": tools, "seed": seed}
        )
        steps: list[Step] = []
        total = Usage(input_tokens=0, output_tokens=0, cost_usd=0.0)
        priced = True
        attempts = 0
        answer = ""
        stop = "max_steps"
        started = time.monotonic()
        for _ in range(b.max_steps):
            left = None if b.max_seconds is None else b.max_seconds - (time.monotonic() - started)
            if left is not None and left <= 0:
                stop = "timeout"
                break
            began = self.clock()
            try:
                if left is None:  # most runs have no time budget: no timeout scope to enter
                    completion = await self._complete(conversation, seed, tools)
                else:
                    async with asyncio.timeout(left):
                        completion = await self._complete(conversation, seed, tools)
            except TimeoutError:
                stop = "timeout"
                break
            attempts += completion.attempts
            usage = completion.usage
            cost = self.price(self.model.model, usage) if self.price is not None else usage.cost_usd
            usage.cost_usd = cost
            priced = priced and cost is not None
            total.input_tokens = (total.input_tokens or 0) + (usage.input_tokens or 0)
            total.output_tokens = (total.output_tokens or 0) + (usage.output_tokens or 0)
            total.cost_usd = (total.cost_usd or 0.0) + (cost or 0.0)
            calls = completion.tool_calls
            steps.append(
                Step(
                    "llm_call",
                    completion.model or self.model.model,
                    output={
                        "text": completion.text,
                        "tool_calls": [c.name for c in calls],
                        "finish_reason": completion.finish_reason,
                    },
                    usage=usage,
                    start_time_unix_nano=began,
                    end_time_unix_nano=self.clock(),
                )
            )
            messages.extend(completion.messages)
            answer = completion.text or answer
            if not calls:
                stop = "final_answer"
                break
            left = None if b.max_seconds is None else b.max_seconds - (time.monotonic() - started)
            try:
                if left is None:
                    results = await _call_tools(environment, calls)
                else:
                    async with asyncio.timeout(left):
                        results = await _call_tools(environment, calls)
            except TimeoutError:
                stop = "timeout"
                break
            for call, result in zip(calls, results, strict=True):
                steps.extend(result.steps)
                messages.append(
                    Message(
                        role="tool",
                        content=result.for_model(),
                        tool_call_id=call.id,
                        name=call.name,
                    )
                )
            if b.max_tokens is not None and (total.tokens() or 0) >= b.max_tokens:
                stop = "max_tokens"
                break
            if b.max_usd is not None and priced and (total.cost_usd or 0.0) >= b.max_usd:
                stop = "max_usd"
                break
        total.total_tokens = total.tokens()
        total.latency_ms = (time.monotonic() - started) * 1000.0
        total.cost_usd = total.cost_usd if priced else None
        return TargetOutput(
            output=Content.of_text(answer),
            usage=total,
            finish_reason=stop,
            attempts=max(attempts, 1),
            trajectory=Trajectory(steps, stop_reason=stop),
        )


class _Conversation:
    """The messages sent to the model, and a running sha256 of them with what else the model
    is sent (model, tools, seed): a model call's cassette key, found without hashing the whole
    conversation again every turn."""

    def __init__(self, messages: list[Message], head: dict[str, Any]) -> None:
        self.messages = messages
        self._digest = hashlib.sha256(orjson.dumps(head, option=orjson.OPT_SORT_KEYS))
        self._hashed = 0

    def key(self) -> str:
        for message in self.messages[self._hashed :]:
            self._digest.update(b"\n")
            self._digest.update(orjson.dumps(message_to_dict(message), option=orjson.OPT_SORT_KEYS))
        self._hashed = len(self.messages)
        return self._digest.copy().hexdigest()


async def _call_tools(environment: Environment, calls: list[ToolCall]) -> list[ToolResult]:
    if len(calls) == 1:  # most turns: no task to spawn for one call
        return [await environment.call(calls[0])]
    return list(await asyncio.gather(*(environment.call(c) for c in calls)))
