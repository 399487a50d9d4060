"""Record: the unit every evaluator sees, whichever way it came in (Score, Run or Watch)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from evalsi.core._content import Content, JsonValue, ToolCall

StepKind = Literal[
    "llm_call",
    "tool_call",
    "retrieval",
    "message",
    "agent",
    "embedding",
    "chain",
    "guardrail",
    "other",
    "approval",
    "fault",
    "policy_block",
    "sandbox_denial",
    "reasoning",
]
"""What a step was. Traces map OTel GenAI / OpenInference span kinds onto these (llm -> llm_call,
tool -> tool_call, retriever -> retrieval; agent, embedding, chain and guardrail as named). An
agent run's harness also records what the environment did: an ``approval`` asked for and its
decision, a ``fault`` it injected, a ``policy_block`` (a call the tool policy refused) and a
``sandbox_denial``. A ``reasoning`` step is a model's reasoning the agent's API returned (a
Responses ``reasoning`` item), kept as evidence."""


@dataclass(slots=True)
class Usage:
    """What producing an output cost. ``None`` means unknown, which is not the same as zero."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    cost_usd: float | None = None
    latency_ms: float | None = None

    def tokens(self) -> int | None:
        """Total tokens: ``total_tokens`` when given, else input + output when either is known."""
        if self.total_tokens is not None:
            return self.total_tokens
        if self.input_tokens is None and self.output_tokens is None:
            return None
        return (self.input_tokens or 0) + (self.output_tokens or 0)

    def known(self) -> dict[str, JsonValue]:
        """The fields that are known (not ``None``), as JSON."""
        return {k: v for k in _USAGE_SLOTS if (v := getattr(self, k)) is not None}


_USAGE_SLOTS = Usage.__slots__  # read once: per-call field lookups were a hot spot in promotion


@dataclass(slots=True)
class Step:
    """One typed step of a trajectory (an LLM call, a tool call, a retrieval, a message...)."""

    kind: StepKind = "other"
    name: str = ""
    input: JsonValue = None
    output: JsonValue = None
    tool_call: ToolCall | None = None
    usage: Usage | None = None
    error: str = ""
    start_time_unix_nano: int = 0
    end_time_unix_nano: int = 0
    span_id: str = ""

    def to_value(self) -> dict[str, JsonValue]:
        """The JSON form datasets read (``datasets`` parses it back): set fields only."""
        out: dict[str, JsonValue] = {"kind": self.kind}
        if self.name:
            out["name"] = self.name
        if self.input is not None:
            out["input"] = self.input
        if self.output is not None:
            out["output"] = self.output
        if self.tool_call is not None:
            call = self.tool_call
            out["tool_call"] = {"name": call.name, "arguments": call.arguments}
            if call.id:
                out["tool_call"]["id"] = call.id
        if self.usage is not None:
            out["usage"] = self.usage.known()
        if self.error:
            out["error"] = self.error
        if self.start_time_unix_nano:
            out["start_time_unix_nano"] = self.start_time_unix_nano
        if self.end_time_unix_nano:
            out["end_time_unix_nano"] = self.end_time_unix_nano
        if self.span_id:
            out["span_id"] = self.span_id
        return out


@dataclass(frozen=True, slots=True)
class Check:
    """One verdict of the environment on the state an agent left (a checker's, or a harness's
    ``Check``): the harness judges it, not the agent."""

    name: str
    passed: bool
    detail: str = ""

    def to_value(self) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = {"name": self.name, "passed": self.passed}
        if self.detail:
            out["detail"] = self.detail
        return out


@dataclass(slots=True)
class Trajectory:
    """The ordered steps an agent or chain took to produce the output, and why it stopped
    (``stop_reason``: ``""`` when unknown; the built-in harness says ``final_answer``,
    ``max_steps``, ``max_tokens``... ). An agent run's harness adds the environment's
    ``checks`` and its ``end_state`` (a snapshot taken when the agent stopped, before grading).

    Example:
        >>> t = Trajectory([Step("tool_call", "search")], stop_reason="final_answer")
        >>> t.to_value()
        {'steps': [{'kind': 'tool_call', 'name': 'search'}], 'stop_reason': 'final_answer'}
    """

    steps: list[Step] = field(default_factory=list)
    stop_reason: str = ""
    checks: list[Check] = field(default_factory=list)
    end_state: JsonValue = None

    def to_value(self) -> dict[str, JsonValue]:
        """The JSON form a dataset's ``trajectory`` field and a Run's stored outputs hold."""
        out: dict[str, JsonValue] = {"steps": [s.to_value() for s in self.steps]}
        if self.stop_reason:
            out["stop_reason"] = self.stop_reason
        if self.checks:
            out["checks"] = [c.to_value() for c in self.checks]
        if self.end_state is not None:
            out["end_state"] = self.end_state
        return out

    def plain(self) -> bool:
        """Whether only the steps are set (the JSON form may then be a bare list of steps)."""
        return not self.stop_reason and not self.checks and self.end_state is None


@dataclass(slots=True)
class IsolationReport:
    """How the code that produced or graded this record was isolated (sandbox rung)."""

    level: str = ""
    driver: str = ""
    details: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Provenance:
    """Where a record came from: a dataset line, a run, or a trace."""

    source: Literal["", "dataset", "run", "trace"] = ""
    dataset: str = ""
    dataset_version: str = ""
    line: int = 0
    run_id: str = ""
    trace_id: str = ""
    span_id: str = ""
    isolation: IsolationReport | None = None


@dataclass(slots=True)
class Record:
    """Input, output, reference, context, trajectory, usage and metadata of one example.

    Example:
        >>> r = Record(id="q1", input=Content.of_text("2+2?"), output=Content.of_text("4"))
        >>> r.output.text
        '4'
    """

    id: str
    input: Content | None = None
    output: Content | None = None
    reference: Content | None = None
    context: list[Content] = field(default_factory=list)
    trajectory: Trajectory | None = None
    usage: Usage | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    provenance: Provenance | None = None

    def has(self, name: str) -> bool:
        """Whether the record holds a usable value for a ``requires`` entry.

        Field names are ``input``, ``output``, ``reference``, ``context``, ``trajectory``,
        ``usage`` and ``usage.<field>`` (for example ``usage.latency_ms``), and
        ``metadata.<key>``.
        """
        if name in ("output", "reference", "input", "usage"):
            return getattr(self, name) is not None
        if name == "context":
            return bool(self.context)
        if name == "trajectory":
            return self.trajectory is not None and bool(self.trajectory.steps)
        if name.startswith("usage."):
            if self.usage is None:
                return False
            attr = name[6:]
            if attr == "tokens":
                return self.usage.tokens() is not None
            return getattr(self.usage, attr, None) is not None
        if name.startswith("metadata."):
            return self.metadata.get(name[9:]) is not None
        raise ValueError(f"unknown record field {name!r}")


USAGE_FIELDS = ("input_tokens", "output_tokens", "total_tokens", "tokens", "cost_usd", "latency_ms")
"""What ``requires`` may name as ``usage.<field>`` (``tokens`` is total, or input + output)."""

RECORD_FIELDS = ("input", "output", "reference", "context", "trajectory", "usage")
"""The field names a manifest's ``requires`` may list (besides ``usage.*`` and ``metadata.*``)."""
