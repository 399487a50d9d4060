"""Per-case figures: each scenario's trials, which were eligible, which passed.

A *task* is one trial of one scenario. Its verdict comes from its pass/fail results:

- it is **eligible** when the system answered it (status ``ok``) or failed on its own side
  (``target_error``: the system under test failing is a graded failure), every evaluator that
  applied reached a verdict (no ``error`` or ``cancelled`` result), and at least one pass/fail
  score was given;
- it **passed** when it is eligible and every pass/fail score it was given passed.

A task lost to infrastructure, cancelled, or left without a verdict by an evaluator error is
*excluded*, with the cause counted: a rate's denominator shrinks by it and says so, never
silently. A *case* (a scenario over its trials) is ``complete`` when every planned trial is
eligible, ``partial`` when some are, ``not_evaluated`` when none; its status is apart from its
verdict. It is **flaky** when its pass rate is strictly between 0 and 1.

A run's gates (`flaky_cases()`), the bundle writer, the validator (which recomputes them) and
the bundle gate all read cases through here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

MAX_NAMED = 20
"""Scenario ids a category row names (not evaluated, flaky); the rest are counted."""


@dataclass(slots=True)
class _Task:
    status: str
    passes: int = 0
    fails: int = 0
    unjudged: str = ""  # why an evaluator reached no verdict

    def verdict(self) -> tuple[bool, bool, str]:
        """(eligible, passed, why excluded)."""
        if self.status == "target_error":  # the system under test failed: a graded failure
            return True, False, ""
        if self.status != "ok":
            return False, False, self.status
        if self.unjudged:
            return False, False, self.unjudged
        if self.passes + self.fails == 0:
            return False, False, "no_pass_fail_score"
        return True, self.fails == 0, ""


@dataclass(slots=True)
class Case:
    """One scenario over its trials."""

    seq: int
    id: str
    category: str | None
    trials: int
    threshold: float | None = None
    """The sample's own pass rate to reach (``metadata.pass_threshold``), if it sets one."""
    attempted: int = 0
    eligible: int = 0
    passed: int = 0
    excluded: dict[str, int] = field(default_factory=dict)

    @property
    def status(self) -> str:
        if self.eligible == 0:
            return "not_evaluated"
        return "complete" if self.eligible >= self.trials else "partial"

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.eligible if self.eligible else None

    @property
    def all_passed(self) -> bool:
        """pass^k for this case: complete, and every trial passed."""
        return self.status == "complete" and self.passed == self.eligible

    @property
    def flaky(self) -> bool:
        return 0 < self.passed < self.eligible

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "id": self.id,
            "category": self.category,
            "trials": self.trials,
            "attempted": self.attempted,
            "eligible": self.eligible,
            "passed": self.passed,
            "excluded": dict(sorted(self.excluded.items())),
            "pass_threshold": self.threshold,
            "status": self.status,
            "pass_rate": self.pass_rate,
            "flaky": self.flaky,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Case:
        return cls(
            seq=int(data["seq"]),
            id=str(data["id"]),
            category=None if data.get("category") is None else str(data["category"]),
            trials=int(data["trials"]),
            threshold=None if data.get("pass_threshold") is None else float(data["pass_threshold"]),
            attempted=int(data["attempted"]),
            eligible=int(data["eligible"]),
            passed=int(data["passed"]),
            excluded={str(k): int(v) for k, v in dict(data.get("excluded") or {}).items()},
        )


class CaseBuilder:
    """Cases from a run's tasks and results, both streamed in (seq, trial) order.

    ``task`` is called once per stored task, ``result`` once per record-scope result of it
    (after its ``task``); ``cases()`` yields each case once the stream has moved past it, so
    memory holds one scenario at a time.
    """

    def __init__(self, trials: int) -> None:
        self.trials = trials
        self._case: Case | None = None
        self._tasks: dict[int, _Task] = {}
        self._done: list[Case] = []

    def task(
        self,
        seq: int,
        trial: int,
        record_id: str,
        category: Any,
        status: str,
        threshold: float | None = None,
    ) -> None:
        if self._case is None or self._case.seq != seq:
            self._close()
            cat = None if category is None else str(category)
            self._case = Case(seq, record_id, cat, self.trials, threshold)
        self._tasks[trial] = _Task(status)

    def result(
        self, seq: int, trial: int, outcome: str, scores: Iterable[Mapping[str, Any]]
    ) -> None:
        case = self._case
        task = self._tasks.get(trial)
        if case is None or case.seq != seq or task is None:
            raise ValueError(f"a result for task ({seq}, {trial}) that has no record")
        if outcome in ("error", "cancelled"):
            task.unjudged = task.unjudged or f"evaluator_{outcome}"
            return
        if outcome != "scored":
            return
        for score in scores:
            value = score.get("passed") if type(score) is dict else None
            if type(value) is bool:
                if value:
                    task.passes += 1
                else:
                    task.fails += 1

    def _close(self) -> None:
        case = self._case
        if case is None:
            return
        for task in self._tasks.values():
            case.attempted += 1
            eligible, passed, why = task.verdict()
            if eligible:
                case.eligible += 1
                case.passed += int(passed)
            else:
                case.excluded[why] = case.excluded.get(why, 0) + 1
        self._done.append(case)
        self._case, self._tasks = None, {}

    def ready(self) -> Iterator[Case]:
        """The cases finished so far (each once)."""
        done, self._done = self._done, []
        yield from done

    def finish(self) -> Iterator[Case]:
        self._close()
        yield from self.ready()


def with_unattempted(
    cases: Iterable[Case], selected: Iterable[Mapping[str, Any]], trials: int
) -> Iterator[Case]:
    """``cases`` (in seq order) with a ``not_evaluated`` case for every scenario the plan
    selected that has no stored task at all (never attempted: a run stopped early)."""
    plan = iter(selected)
    pending = next(plan, None)

    def unattempted(before: int | None) -> Iterator[Case]:
        nonlocal pending
        while pending is not None and (before is None or int(pending["seq"]) < before):
            category, threshold = pending.get("category"), pending.get("pass_threshold")
            yield Case(
                int(pending["seq"]),
                str(pending["id"]),
                None if category is None else str(category),
                trials,
                None if threshold is None else float(threshold),
            )
            pending = next(plan, None)

    for case in cases:
        yield from unattempted(case.seq)
        if pending is not None and int(pending["seq"]) == case.seq:
            pending = next(plan, None)
        yield case
    yield from unattempted(None)


@dataclass(slots=True)
class CategoryFigures:
    """A category's scenarios as the gate and the report read them, every rate with its
    numerator, denominator and exclusions."""

    category: str | None
    scenarios: int = 0
    complete: int = 0
    all_passed: int = 0
    eligible_trials: int = 0
    passed_trials: int = 0
    flaky: int = 0
    excluded: dict[str, int] = field(default_factory=dict)
    not_evaluated: list[str] = field(default_factory=list)
    incomplete: int = 0
    flaky_ids: list[str] = field(default_factory=list)

    def add(self, case: Case) -> None:
        self.scenarios += 1
        self.eligible_trials += case.eligible
        self.passed_trials += case.passed
        for k, v in case.excluded.items():
            self.excluded[k] = self.excluded.get(k, 0) + v
        if case.status == "complete":
            self.complete += 1
            self.all_passed += int(case.all_passed)
        else:
            self.incomplete += 1
            if len(self.not_evaluated) < MAX_NAMED:
                self.not_evaluated.append(case.id)
        if case.flaky:
            self.flaky += 1
            if len(self.flaky_ids) < MAX_NAMED:
                self.flaky_ids.append(case.id)

    def pass_hat_k(self) -> dict[str, Any]:
        """Scenarios whose every trial passed, over the complete ones."""
        return rate(self.all_passed, self.complete, {"incomplete_scenarios": self.incomplete})

    def pass_rate(self) -> dict[str, Any]:
        """Passing trials over eligible trials."""
        return rate(self.passed_trials, self.eligible_trials, self.excluded)

    def to_dict(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "scenarios": self.scenarios,
            "complete": self.complete,
            "pass_hat_k": self.pass_hat_k(),
            "pass_rate": self.pass_rate(),
            "flaky": self.flaky,
            "flaky_ids": self.flaky_ids,
            "not_evaluated": self.not_evaluated,
        }


def rate(numerator: int, denominator: int, exclusions: Mapping[str, int]) -> dict[str, Any]:
    """A rate with its arithmetic; a zero denominator is not measured (value null)."""
    return {
        "value": numerator / denominator if denominator else None,
        "numerator": numerator,
        "denominator": denominator,
        "exclusions": {k: v for k, v in sorted(exclusions.items()) if v},
        "state": "measured" if denominator else "not_measured",
    }


def categories(cases: Iterable[Case]) -> dict[str | None, CategoryFigures]:
    """Figures per category, and over every case under the key ``None`` last."""
    out: dict[str | None, CategoryFigures] = {}
    overall = CategoryFigures(None)
    for case in cases:
        if case.category is not None:
            out.setdefault(case.category, CategoryFigures(case.category)).add(case)
        overall.add(case)
    ordered: dict[str | None, CategoryFigures] = dict(
        sorted(out.items(), key=lambda kv: str(kv[0]))
    )
    ordered[None] = overall
    return ordered


__all__ = [
    "Case",
    "CaseBuilder",
    "CategoryFigures",
    "categories",
    "rate",
    "with_unattempted",
]
