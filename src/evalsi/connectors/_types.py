"""What a target call returns, and how a sample's input becomes a request."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from evalsi.core import (
    Cassette,
    Content,
    JsonValue,
    Message,
    Record,
    ToolCall,
    Trajectory,
    Usage,
    message_to_dict,
)

InputLike = Content | str | list[Message]
"""A sample's input: a ``Content``, plain text, or chat messages."""


@dataclass(slots=True)
class Completion:
    """A model's answer.

    Attributes:
        text: the reply's text (text blocks joined; ``""`` when it only calls tools).
        messages: the reply as chat messages (one assistant message, tool calls included).
        usage: tokens as the server counted them, and the latency of the successful attempt.
        finish_reason: the server's reason (``stop``, ``length``, ``tool_calls``, ``end_turn``…).
        raw: the decoded response body.
        model: the model name the server reported.
        attempts: HTTP attempts made (retries included).
    """

    text: str
    messages: list[Message]
    usage: Usage
    finish_reason: str = ""
    raw: JsonValue = None
    model: str = ""
    attempts: int = 1

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [call for message in self.messages for call in message.tool_calls]

    @property
    def output(self) -> Content:
        """Text when the reply is plain text, else the messages (so tool calls are kept)."""
        if self.tool_calls:
            return Content.of_messages(list(self.messages))
        return Content.of_text(self.text)

    def to_output(self) -> TargetOutput:
        return TargetOutput(
            output=self.output,
            usage=self.usage,
            raw=self.raw,
            finish_reason=self.finish_reason,
            attempts=self.attempts,
        )


@dataclass(slots=True)
class TargetOutput:
    """What any target produced for one sample: the output to grade, what it cost, and, for
    an agent, the trajectory that led to it (graded by agent evaluators in place of any
    trajectory the dataset holds, which is the reference)."""

    output: Content
    usage: Usage = field(default_factory=Usage)
    raw: JsonValue = None
    finish_reason: str = ""
    attempts: int = 1
    trajectory: Trajectory | None = None
    cassette: Cassette | None = None


@dataclass(frozen=True, slots=True)
class TaskInfo:
    """Which task a call is, for a target that acts per task (an agent's harness sets up each
    task's environment from the sample): the run, the sample's id and trial, and the sample."""

    run_id: str
    sample_id: str
    trial: int
    sample: Record


class Target(Protocol):
    """Anything the run executor can call with a sample's input."""

    connector: str
    supports_seed: bool
    """Whether ``seed`` reaches the model (the manifest marks unseeded trials)."""

    async def invoke(self, input: InputLike, *, seed: int | None = None) -> TargetOutput:
        """Produce the output for one sample (one trial). A target with ``per_task = True`` is
        also passed ``task=TaskInfo(...)``."""
        ...

    def describe(self) -> dict[str, Any]:
        """The target's identity for the run manifest: plain JSON, no secret values."""
        ...


def input_messages(input: InputLike, *, system: str | None = None) -> list[Message]:
    """Chat messages for a sample: text becomes one user message, messages stay as they are,
    anything else is sent as its compact JSON text. ``system`` is prepended when given and the
    messages do not start with a system message already."""
    if isinstance(input, str):
        messages = [Message(role="user", content=input)]
    elif isinstance(input, list):
        messages = list(input)
    elif input.kind == "messages":
        messages = list(input.value)
    else:
        messages = [Message(role="user", content=input.as_text())]
    if system and not (messages and messages[0].role == "system"):
        messages.insert(0, Message(role="system", content=system))
    return messages


def plain_input(input: InputLike) -> JsonValue:
    """The sample's input as plain data for a Python or HTTP target: text as a string, JSON as
    it is, chat messages as a list of ``{"role", "content", ...}`` objects."""
    if isinstance(input, str):
        return input
    if isinstance(input, list):
        return [message_to_dict(m) for m in input]
    if input.kind in ("text", "json"):
        return input.value
    if input.kind == "messages":
        return [message_to_dict(m) for m in input.value]
    return input.to_value()


def estimate_tokens(messages: list[Message], max_tokens: object) -> int:
    """A cheap upper-ish estimate for the tokens/min bucket (≈ 4 characters per token)."""
    chars = 0
    for message in messages:
        chars += len(message.content or "")
        for call in message.tool_calls:
            chars += len(call.name) + len(orjson.dumps(call.arguments))
    completion = max_tokens if isinstance(max_tokens, int) and max_tokens > 0 else 256
    return chars // 4 + 1 + completion
