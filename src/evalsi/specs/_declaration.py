"""The system under test as its owner declares it, and the thresholds a run is judged by.

An EvalRun carries them in ``spec.declaration`` and ``spec.thresholds``; ``evalsi eval
--declaration FILE`` reads a ``SystemDeclaration`` file. These are the values; reading and
checking them is ``_declaration_load``'s (it needs the schema validator, which a run that
declares nothing never imports).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

ThresholdKind = Literal["hard", "comparative"]
Statistic = Literal["pass_hat_k", "pass_rate", "mean"]


@dataclass(frozen=True, slots=True)
class Threshold:
    """A bound on a category's task pass rate or on a metric's mean.

    ``source`` says who set it (``spec`` or ``declaration``); ``tightens`` holds the spec's
    bound a declared threshold replaced.
    """

    category: str = ""
    metric: str = ""
    min: float | None = None
    max: float | None = None
    kind: ThresholdKind = "hard"
    statistic: Statistic = "pass_hat_k"
    source: str = "spec"
    tightens: Mapping[str, float] | None = None

    @property
    def key(self) -> tuple[str, str, str, str]:
        """What it bounds and from which side: two thresholds with one key are one promise."""
        return (
            self.category,
            self.metric,
            self.statistic,
            "min" if self.min is not None else "max",
        )

    @property
    def bound(self) -> float:
        value = self.min if self.min is not None else self.max
        assert value is not None
        return value

    def passes(self, value: float) -> bool:
        """Whether ``value`` meets the bound (equality passes)."""
        return value >= self.bound if self.min is not None else value <= self.bound

    def describe(self) -> str:
        """One line: ``category task-execution pass^k >= 0.9 (hard, spec)``."""
        what = " ".join(
            p
            for p in (
                f"category {self.category}" if self.category else "",
                f"metric {self.metric}" if self.metric else "",
            )
            if p
        )
        stat = {"pass_hat_k": "pass^k", "pass_rate": "pass rate", "mean": "mean"}[self.statistic]
        op = ">=" if self.min is not None else "<="
        return f"{what} {stat} {op} {self.bound:g} ({self.kind}, {self.source})"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "category": self.category or None,
            "metric": self.metric or None,
            "statistic": self.statistic,
            "kind": self.kind,
            "source": self.source,
        }
        out["min" if self.min is not None else "max"] = self.bound
        if self.tightens:
            out["tightens"] = dict(self.tightens)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Threshold:
        """A threshold as a test plan records it (``to_dict``)."""
        tightens = data.get("tightens")
        return cls(
            category=str(data.get("category") or ""),
            metric=str(data.get("metric") or ""),
            min=None if data.get("min") is None else float(data["min"]),
            max=None if data.get("max") is None else float(data["max"]),
            kind="comparative" if data.get("kind") == "comparative" else "hard",
            statistic=_statistic(str(data.get("statistic") or ""), str(data.get("metric") or "")),
            source=str(data.get("source") or "spec"),
            tightens=dict(tightens) if isinstance(tightens, Mapping) else None,
        )


@dataclass(frozen=True, slots=True)
class CasePolicy:
    """How each scenario's verdict is reached: its trial pass rate must reach ``pass_rate``
    (or the sample's ``metadata.pass_threshold``) over at least ``min_eligible_trials``
    eligible trials (unset: every configured trial attempted and one eligible)."""

    pass_rate: float = 1.0
    min_eligible_trials: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"pass_rate": self.pass_rate, "min_eligible_trials": self.min_eligible_trials}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CasePolicy:
        least = data.get("min_eligible_trials")
        return cls(float(data.get("pass_rate", 1.0)), None if least is None else int(least))


@dataclass(frozen=True, slots=True)
class Declaration:
    """What the owner says the system is, may do and is for; fixed before the first task."""

    system: Mapping[str, str]
    tools: tuple[Mapping[str, str], ...] = ()
    human_involvement: str = ""
    intended_use: tuple[str, ...] = ()
    out_of_scope_use: tuple[str, ...] = ()
    thresholds: tuple[Threshold, ...] = ()
    exclude: tuple[tuple[str, str], ...] = ()
    """(scenario id, reason): samples left out of the test; they are not run."""
    case_policy: CasePolicy | None = None
    source: str = ""
    document: Mapping[str, Any] = field(default_factory=dict)
    """The declaration as written (camelCase keys), for the plan and the spec hash."""

    @property
    def excluded(self) -> dict[str, str]:
        return dict(self.exclude)

    def to_dict(self) -> dict[str, Any]:
        """As a test plan records it."""
        return {
            "system": dict(self.system),
            "tools": [dict(t) for t in self.tools],
            "human_involvement": self.human_involvement or None,
            "intended_use": list(self.intended_use),
            "out_of_scope_use": list(self.out_of_scope_use),
            "exclude": [{"scenario": s, "reason": r} for s, r in self.exclude],
            "case_policy": None if self.case_policy is None else self.case_policy.to_dict(),
            "source": self.source or None,
        }


def _statistic(value: str, metric: str) -> Statistic:
    """A metric threshold bounds the mean; a task threshold pass^k unless told pass_rate."""
    if metric:
        return "mean"
    return "pass_rate" if value == "pass_rate" else "pass_hat_k"


__all__ = ["CasePolicy", "Declaration", "Statistic", "Threshold", "ThresholdKind"]
