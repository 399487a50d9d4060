"""``gate_bundle``: judge a bundle against the thresholds its test plan registered
(``evalsi gate --bundle DIR``: exit 0 met, 1 missed, 2 cannot judge).

It judges only what was promised before the first task: a bundle that does not validate (or
whose signature does not verify when one is required), or a run that declared no system,
cannot be judged (2). Otherwise every **hard** threshold must be met over scenarios that were
all fully evaluated: a hard threshold whose category holds a scenario not fully evaluated is
missed, naming it (1), as is one with nothing to measure (a zero denominator). **Comparative**
thresholds are reported and never gate.

A task threshold (no metric) reads ``cases.jsonl``: pass^k is the share of complete scenarios
whose every trial passed; the pass rate, passing trials over eligible ones, each with its
numerator, denominator and exclusions. A metric threshold is the metric's mean over the
category's scored results (over the run without a category), read from ``scores.jsonl``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import evalsi.evidence._format as fmt
from evalsi.evidence._read import dataset_scores, read_tasks
from evalsi.evidence._validate import Validation, validate_bundle
from evalsi.runs import Case, CategoryFigures, rate
from evalsi.specs import Threshold


@dataclass(slots=True)
class ThresholdResult:
    """One threshold judged."""

    threshold: Threshold
    verdict: str  # met | missed | not_evaluated | not_measured
    value: float | None
    rate: dict[str, Any]
    not_evaluated: list[str] = field(default_factory=list)

    @property
    def gates(self) -> bool:
        return self.threshold.kind == "hard"

    def line(self) -> str:
        t = self.threshold
        r = self.rate
        value = "n/a" if self.value is None else f"{self.value:.4g}"
        share = (
            f"mean of {r['denominator']}" if t.metric else f"{r['numerator']}/{r['denominator']}"
        )
        text = f"{t.describe()}: {value} ({share}) {self.verdict}"
        if r.get("exclusions"):
            text += " excl. " + ", ".join(f"{k} {v}" for k, v in r["exclusions"].items())
        if self.not_evaluated:
            text += " — not fully evaluated: " + ", ".join(self.not_evaluated)
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.threshold.to_dict(),
            "verdict": self.verdict,
            "value": self.value,
            "rate": self.rate,
            "not_evaluated": self.not_evaluated,
            "gates": self.gates,
        }


@dataclass(slots=True)
class GateOutcome:
    """The gate's verdict on a bundle."""

    path: Path
    exit_code: int
    reason: str
    run_id: str | None = None
    plan_sha256: str | None = None
    results: list[ThresholdResult] = field(default_factory=list)
    validation: Validation | None = None
    validity: list[dict[str, Any]] = field(default_factory=list)
    """With a case policy: each validity check (coverage, completion, evaluator errors)."""
    cases: dict[str, Any] = field(default_factory=dict)
    """With a case policy: the verdict counts and the cases that did not pass."""

    @property
    def verdict(self) -> str:
        return {0: "PASS", 1: "FAIL", 2: "CANNOT JUDGE"}[self.exit_code]

    @property
    def missed(self) -> list[ThresholdResult]:
        return [r for r in self.results if r.gates and r.verdict != "met"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "bundle": str(self.path),
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "reason": self.reason,
            "run_id": self.run_id,
            "plan_sha256": self.plan_sha256,
            "thresholds": [r.to_dict() for r in self.results],
            "validity": self.validity,
            "cases": self.cases,
            "signature": None
            if self.validation is None or self.validation.signature is None
            else self.validation.to_dict()["signature"],
        }


def gate_bundle(
    path: str | os.PathLike[str],
    *,
    require_signature: bool = False,
    allowed_signers: str | os.PathLike[str] | None = None,
) -> GateOutcome:
    """Judge the bundle at ``path`` against its plan's thresholds."""
    directory = Path(path)
    if require_signature and allowed_signers is None:
        return GateOutcome(directory, 2, "--require-signature needs --allowed-signers FILE")
    v = validate_bundle(directory, allowed_signers=allowed_signers)
    out = GateOutcome(directory, 2, "", run_id=v.run_id, validation=v)
    if not v.valid:
        first = v.unreadable or "; ".join(v.findings[:3])
        out.reason = f"the bundle does not validate ({first})"
        return out
    if require_signature and (v.signature is None or not v.signature.verified):
        out.reason = "--require-signature: the bundle is not signed by a key you allowed"
        return out
    plan = fmt.read_json(directory, fmt.PLAN)
    meta = fmt.read_json(directory, fmt.METADATA)
    out.plan_sha256 = meta.get("test_plan_sha256")
    if not plan.get("declared"):
        out.reason = str(plan.get("not_declared") or "the run declared no system under test")
        return out
    thresholds = [Threshold.from_dict(t) for t in plan.get("thresholds") or ()]
    policy = plan.get("case_policy")
    if not thresholds and not policy:
        out.reason = "cannot judge: the test plan registered no thresholds and no case policy"
        return out
    cases = [Case.from_dict(c) for _, c in fmt.iter_lines(directory, fmt.CASES)]
    means = _metric_means(directory, thresholds)
    out.results = [_judge(t, cases, means) for t in thresholds]
    failing: list[str] = []
    if policy:
        out.validity = _validity(cases, policy, int(meta.get("trials") or 1))
        invalid = [v for v in out.validity if not v["valid"]]
        if invalid:  # validity first: a run that cannot be believed gets no verdict
            out.reason = "inconclusive: " + "; ".join(v["describe"] for v in invalid)
            return out
        out.cases = _case_verdicts(cases, policy)
        failing = out.cases["failing"]
    missed = out.missed
    out.exit_code = 1 if missed or failing else 0
    parts = [r.threshold.describe() for r in missed]
    if failing:
        parts.append(f"{len(failing)} case(s) below their pass rate: {', '.join(failing[:10])}")
    out.reason = (
        "every hard threshold met over fully evaluated scenarios"
        + (", and every case passed" if policy else "")
        if not parts
        else "missed: " + "; ".join(parts)
    )
    return out


def _floor(policy: Mapping[str, Any], trials: int) -> tuple[int, bool]:
    """(eligible trials a case needs, whether every trial must also be attempted)."""
    least = policy.get("min_eligible_trials")
    return (int(least), False) if least is not None else (1, True)


def _validity(cases: list[Case], policy: Mapping[str, Any], trials: int) -> list[dict[str, Any]]:
    """Coverage, completion and evaluator error rate, each with its arithmetic."""
    least, all_attempted = _floor(policy, trials)
    covered = sum(
        c.eligible >= least and (not all_attempted or c.attempted >= c.trials) for c in cases
    )
    planned = sum(c.trials for c in cases)
    eligible = sum(c.eligible for c in cases)
    attempted = sum(c.attempted for c in cases)
    excluded: dict[str, int] = {"not_attempted": planned - attempted}
    for c in cases:
        for k, v in c.excluded.items():
            excluded[k] = excluded.get(k, 0) + v
    errors = excluded.get("evaluator_error", 0)
    min_completion = float(policy.get("min_completion_rate", 0.8))
    max_errors = float(policy.get("max_evaluator_error_rate", 0.1))
    floor = (
        f"{least} eligible trial(s)" if not all_attempted else "every trial attempted, 1 eligible"
    )
    checks = [
        ("coverage", rate(covered, len(cases), {"below_floor": len(cases) - covered}), 1.0, ">="),
        ("completion", rate(eligible, planned, excluded), min_completion, ">="),
        ("evaluator_errors", rate(errors, attempted, {}), max_errors, "<="),
    ]
    out = []
    for name, r, bound, op in checks:
        value = r["value"]
        valid = value is not None and (value >= bound if op == ">=" else value <= bound)
        shown = "n/a" if value is None else f"{value:.4g}"
        out.append(
            {
                "check": name,
                "valid": valid,
                "bound": bound,
                "rate": r,
                "describe": f"{name} {shown} ({r['numerator']}/{r['denominator']}) needs "
                f"{op} {bound:g}" + (f" (a case needs {floor})" if name == "coverage" else ""),
            }
        )
    return out


def _case_verdicts(cases: list[Case], policy: Mapping[str, Any]) -> dict[str, Any]:
    """Each case against its pass rate (its own ``pass_threshold``, else the policy's)."""
    least = int(policy.get("min_eligible_trials") or 1)
    default = float(policy.get("pass_rate", 1.0))
    counts = {"pass": 0, "fail": 0, "inconclusive": 0}
    failing: list[str] = []
    for case in cases:
        bound = case.threshold if case.threshold is not None else default
        if case.eligible < least or case.pass_rate is None:
            verdict = "inconclusive"
        else:
            verdict = "pass" if case.pass_rate >= bound else "fail"
        counts[verdict] += 1
        if verdict == "fail":
            failing.append(case.id)
    return {"counts": counts, "failing": failing, "pass_rate": default, "min_eligible": least}


def _judge(
    t: Threshold, cases: list[Case], means: Mapping[tuple[str, str], tuple[int, float]]
) -> ThresholdResult:
    scoped = [c for c in cases if not t.category or c.category == t.category]
    figures = CategoryFigures(t.category or None)
    for case in scoped:
        figures.add(case)
    incomplete = [c.id for c in scoped if c.status != "complete"]
    if t.metric:
        n, total = means.get((t.category, t.metric), (0, 0.0))
        r = rate(0, n, {"incomplete_scenarios": len(incomplete)})
        r.update(value=total / n if n else None, numerator=total)
    else:
        r = figures.pass_hat_k() if t.statistic == "pass_hat_k" else figures.pass_rate()
    value = r["value"]
    if not scoped:
        verdict = "not_measured"
    elif incomplete:
        verdict = "not_evaluated"
    elif value is None:
        verdict = "not_measured"
    else:
        verdict = "met" if t.passes(value) else "missed"
    return ThresholdResult(t, verdict, value, r, incomplete[:20])


def _metric_means(
    directory: Path, thresholds: Iterable[Threshold]
) -> dict[tuple[str, str], tuple[int, float]]:
    """``(category, metric) -> (n, sum)`` of the metric thresholds' scored values."""
    wanted = {(t.category, t.metric) for t in thresholds if t.metric}
    if not wanted:
        return {}
    config = fmt.read_json(directory, fmt.CONFIG)
    names = [str(e.get("name", "")) for e in config.get("evaluators") or ()]
    sums: dict[tuple[str, str], list[float]] = {k: [0, 0.0] for k in wanted}

    def add(category: str | None, index: Any, scores: Any) -> None:
        if type(index) is not int or not 0 <= index < len(names):
            return
        name = names[index]
        for s in scores or ():
            value = s.get("passed", s.get("number"))
            if not isinstance(value, bool | int | float):
                continue
            metric = str(s.get("name") or name)
            keys = {f"{name}/{metric}", name} if metric == name else {f"{name}/{metric}"}
            for key in keys:
                for cat in {"", category or ""}:
                    if (cat, key) in sums:
                        sums[(cat, key)][0] += 1
                        sums[(cat, key)][1] += float(value)

    for row in dataset_scores(directory):
        add(None, row.get("evaluator"), row.get("scores"))

    def ignore(_file: str, _message: str) -> None:  # the bundle validated already
        pass

    for task in read_tasks(directory, ignore):
        category = (task.record.get("metadata") or {}).get("category")
        for line in task.scores:
            if line.get("outcome") == "scored":
                add(
                    None if category is None else str(category),
                    line.get("evaluator"),
                    line.get("scores"),
                )
    return {k: (int(v[0]), v[1]) for k, v in sums.items()}


__all__ = ["GateOutcome", "ThresholdResult", "gate_bundle"]
