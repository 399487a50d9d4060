"""Scores, outcomes, results and metric summaries (mirrors ``score.proto``)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Literal

from evalsi.core._content import JsonValue
from evalsi.core._record import Usage

ScoreKind = Literal["number", "passed", "label", "structured"]


@dataclass(slots=True)
class Score:
    """One value an evaluator gives: a number, a pass/fail, a label or a structured value.

    Set exactly one of ``number``, ``passed``, ``label`` or ``structured``. ``name`` is the
    metric name inside the evaluator; empty means the evaluator's own name.

    Example:
        >>> Score(passed=True).kind
        'passed'
    """

    name: str = ""
    number: float | None = None
    passed: bool | None = None
    label: str | None = None
    structured: JsonValue = None
    explanation: str = ""
    confidence: float | None = None
    cost: Usage | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> ScoreKind:
        if self.passed is not None:
            return "passed"
        if self.number is not None:
            return "number"
        if self.label is not None:
            return "label"
        return "structured"

    @property
    def value(self) -> float | bool | str | JsonValue:
        if self.passed is not None:
            return self.passed
        if self.number is not None:
            return self.number
        if self.label is not None:
            return self.label
        return self.structured

    def check(self) -> str | None:
        """Why this score is malformed, or None when it holds exactly one finite value."""
        set_count = sum(
            v is not None for v in (self.number, self.passed, self.label, self.structured)
        )
        if set_count != 1:
            return (
                f"a Score must hold exactly one of number/passed/label/structured, got {set_count}"
            )
        if self.number is not None:
            if isinstance(self.number, bool) or not isinstance(self.number, (int, float)):
                return f"Score.number must be a number, got {type(self.number).__name__}"
            if self.number != self.number or self.number in (float("inf"), float("-inf")):
                return f"Score.number must be finite, got {self.number}"
        if self.passed is not None and not isinstance(self.passed, bool):
            return f"Score.passed must be a bool, got {type(self.passed).__name__}"
        return None


class Outcome(enum.IntEnum):
    """How one (record, evaluator) ended. Only ``SCORED`` counts toward metrics."""

    SCORED = 1
    SKIPPED = 2
    ERROR = 3
    CANCELLED = 4


@dataclass(slots=True)
class EvaluationResult:
    """One evaluator on one record (or on the whole dataset, with ``record_id == ""``)."""

    record_id: str
    evaluator: str
    evaluator_ref: str
    outcome: Outcome
    scores: list[Score] = field(default_factory=list)
    reason: str = ""
    duration_s: float = 0.0
    trial: int = 0


@dataclass(slots=True)
class Interval:
    """A confidence interval and how it was computed."""

    low: float | None
    high: float | None
    method: str
    level: float = 0.95


@dataclass(slots=True)
class MetricSummary:
    """The aggregate of one metric over a run: n, mean, std, a 95% interval and the counts.

    ``n`` counts scored values only; ``skipped`` and ``errors`` are reported beside it and never
    enter the mean. For label metrics ``mean`` is None and ``labels`` holds the counts.
    """

    evaluator: str
    metric: str
    kind: ScoreKind
    n: int
    mean: float | None
    std: float | None
    ci: Interval
    scored: int
    skipped: int
    errors: int
    cancelled: int = 0
    infra_errors: int = 0
    labels: dict[str, int] = field(default_factory=dict)
    clusters: int | None = None
    pass_at_k: dict[str, float] = field(default_factory=dict)
    pass_hat_k: dict[str, float] = field(default_factory=dict)
    trial_variance: float | None = None
    higher_is_better: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of ``--format json`` (``ci`` as ``[low, high]``)."""
        out: dict[str, Any] = {
            "evaluator": self.evaluator,
            "metric": self.metric,
            "kind": self.kind,
            "n": self.n,
            "mean": self.mean,
            "std": self.std,
            "ci": [self.ci.low, self.ci.high],
            "ci_method": self.ci.method,
            "scored": self.scored,
            "skipped": self.skipped,
            "errors": self.errors,
            "cancelled": self.cancelled,
            "infra_errors": self.infra_errors,
        }
        if self.labels:
            out["labels"] = dict(self.labels)
        if self.clusters is not None:
            out["clusters"] = self.clusters
        if self.pass_at_k:
            out["pass_at_k"] = dict(self.pass_at_k)
            out["pass_hat_k"] = dict(self.pass_hat_k)
        if self.trial_variance is not None:
            out["trial_variance"] = self.trial_variance
        if self.higher_is_better is not None:
            out["higher_is_better"] = self.higher_is_better
        return out
