"""Judge calibration: run a judge evaluator on human-labelled records and measure how it agrees.

``calibrate`` reads the labels (``_labels``), grades the records with the judge
evaluator through the ordinary Score path (so the judge's answers are cached, its cost
accounted and every score stored in a run that ``evalsi report`` can show), then compares the
judge's scores with the humans' (``_stats``): agreement, and for ``pairwise`` the
position bias it already measures by asking both orders, and length bias. The result is stored
under the judge's identity, the evaluator ref, its prompt template's hash and its params
(``store.CalibrationKey``); a run whose gate reads a judge without one gets a warning in its
report (``_gates``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from evalsi.core import INFRA_PREFIX, EvaluationResult, Outcome, Record, UserError
from evalsi.datasets import FieldMap
from evalsi.evaluators import BoundEvaluator, Registry, judges_needed
from evalsi.runs._judges import JudgeLike, check_judges, judge_specs
from evalsi.runs._plan import EvaluatorLike, bind_all
from evalsi.runs._run_row import StoreLike, open_store
from evalsi.runs._score import Progress, score_async
from evalsi.runs.calibration._labels import (
    KIND_NAMES,
    KIND_PLURALS,
    LabelKind,
    LabelledRecord,
    Labels,
    LabelValue,
    coerce_labels,
    read_labels,
)
from evalsi.runs.calibration._stats import (
    agreement,
    as_number,
    consensus,
    length_bias,
    position_bias,
)
from evalsi.stats import ALPHA_LEVELS, AlphaLevel
from evalsi.store import CalibrationKey, SqlStore, save_calibration


@dataclass(slots=True)
class CalibrationResult:
    """How a judge evaluator agreed with human labels. ``to_dict`` is the stable JSON shape
    (docs/guides/calibration.md); ``exit_code`` is what ``evalsi calibrate`` exits with."""

    run_id: str
    evaluator: dict[str, Any]
    metric: str
    kind: LabelKind
    judge: dict[str, Any]
    labels: dict[str, Any]
    counts: dict[str, int]
    agreement: dict[str, Any] | None
    position_bias: dict[str, Any] | None = None
    length_bias: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    calibration_id: str | None = None

    @property
    def exit_code(self) -> int:
        """0 compared at least one record; 3 none, and the judge could not be reached; 2 none."""
        if self.counts["compared"]:
            return 0
        return 3 if self.counts["infra_errors"] else 2

    def to_dict(self) -> dict[str, Any]:
        return {
            "calibration_id": self.calibration_id,
            "run_id": self.run_id,
            "evaluator": self.evaluator,
            "metric": self.metric,
            "kind": self.kind,
            "judge": self.judge,
            "labels": self.labels,
            **self.counts,
            "agreement": self.agreement,
            "position_bias": self.position_bias,
            "length_bias": self.length_bias,
            "warnings": list(self.warnings),
        }

    def to_json(self) -> str:
        return orjson.dumps(self.to_dict(), option=orjson.OPT_INDENT_2).decode()


async def calibrate_async(
    labels: Any,
    judge: EvaluatorLike,
    *,
    params: Mapping[str, Any] | None = None,
    judges: Mapping[str, JudgeLike] | None = None,
    metric: str | None = None,
    level: AlphaLevel | None = None,
    fields: FieldMap | None = None,
    store: StoreLike = None,
    registry: Registry,
    seed: int = 0,
    name: str = "",
    progress: Progress | None = None,
) -> CalibrationResult:
    """Calibrate a judge evaluator against human labels; see ``evalsi.calibrate``."""
    bound = _bind_judge(judge, params, registry)
    check_judges([bound], judge_specs(judges))  # no default judge: say so before reading labels
    metric, kind = _metric_of(bound, metric)
    if level is not None and level not in ALPHA_LEVELS:
        raise UserError(f"level {level!r}: expected one of {', '.join(ALPHA_LEVELS)}")
    if level not in (None, "nominal") and kind != "number":
        raise UserError(f"level {level!r} needs numeric labels; {metric} gives {KIND_NAMES[kind]}")
    read = read_labels(labels, fields=fields, requires=bound.manifest.requires)
    _coerce(read, kind, metric)
    db = open_store(store)
    # A file is graded from its path (the run records where the data is and its version, and a
    # report can show each record); records given in memory are passed on as read.
    from_file = isinstance(labels, (str, os.PathLike))
    data: Any = os.fspath(labels) if from_file else [i.record for i in read.items]
    scored = await score_async(
        data,
        [bound],
        fields=fields if from_file else None,
        store=db,
        seed=seed,
        name=name or f"calibrate {bound.name}",
        judges=judges,
        progress=progress,
        registry=registry,
    )
    if scored.records != len(read.items):
        raise UserError(
            f"{read.source}: changed while it was being read ({len(read.items)} labelled records "
            f"then {scored.records})",
            hint="calibrate against a file that is not being written",
        )
    results = {seq: r for seq, _, r in db.iter_results(scored.run_id, evaluator=0)}
    return _compare(bound, metric, kind, read, results, scored.run_id, db, level, seed)


def _bind_judge(
    judge: EvaluatorLike, params: Mapping[str, Any] | None, registry: Registry
) -> BoundEvaluator:
    item: EvaluatorLike = judge
    if params is not None:
        if not isinstance(judge, str):
            raise UserError("give params with an evaluator name, or inside its {'ref', 'params'}")
        item = {"ref": judge, "params": dict(params)}
    (bound,) = bind_all([item], registry=registry)
    if not judges_needed([bound]):
        raise UserError(
            f"{bound.name} does not ask a judge model: there is nothing to calibrate",
            hint="calibrate a judge evaluator: llm-judge, g-eval, reference-correctness, pairwise",
        )
    return bound


def _metric_of(bound: BoundEvaluator, metric: str | None) -> tuple[str, LabelKind]:
    outputs = {o.name: o.type for o in bound.manifest.outputs}
    own = bound.manifest.ref.name
    chosen = metric or own
    kind = outputs.get(chosen)
    if kind not in ("passed", "label", "number"):
        usable = [n for n, t in outputs.items() if t in ("passed", "label", "number")]
        raise UserError(
            f"{bound.name} has no pass/fail, label or numeric metric named {chosen!r}",
            hint="its metrics: " + (", ".join(usable) or "none declared"),
        )
    return chosen, kind


def _coerce(labels: Labels, kind: LabelKind, metric: str) -> None:
    if coerce_labels(labels, kind):
        return
    hint = "choose the judge's metric with --metric (e.g. llm-judge-passed, with its "
    hint += "pass_threshold param, for pass/fail labels)"
    raise UserError(
        f"{labels.source}: the labels are {KIND_PLURALS[labels.kind]} but {metric} gives "
        f"{KIND_NAMES[kind]}",
        hint=hint,
    )


def _judge_value(
    result: EvaluationResult, metric: str, own: str, kind: LabelKind
) -> LabelValue | None:
    for score in result.scores:
        if (score.name or own) != metric:
            continue
        if kind == "number":
            raw = result.scores[0].metadata.get("raw_score") if metric == own else None
            return float(raw) if isinstance(raw, (int, float)) else score.number
        return score.passed if kind == "passed" else score.label
    return None


def _compare(
    bound: BoundEvaluator,
    metric: str,
    kind: LabelKind,
    labels: Labels,
    results: Mapping[int, EvaluationResult],
    run_id: str,
    db: SqlStore,
    level: AlphaLevel | None,
    seed: int,
) -> CalibrationResult:
    own = bound.manifest.ref.name
    counts = {"records": len(labels.items), "compared": 0, "skipped": 0, "errors": 0}
    counts["infra_errors"] = 0
    judge: list[LabelValue] = []
    compared = []
    verdicts: list[tuple[str, str]] = []
    meta: dict[str, Any] = {}
    reasons: list[str] = []
    for seq, item in enumerate(labels.items):
        result = results.get(seq)
        if result is None or result.outcome != Outcome.SCORED:
            outcome = "errors" if result is None else _bucket(result)
            counts[outcome] += 1
            if result is not None and result.reason and len(reasons) < 3:
                reasons.append(f"line {item.line}: {result.reason}")
            continue
        value = _judge_value(result, metric, own, kind)
        if value is None:  # e.g. llm-judge-passed from an llm-judge without pass_threshold
            counts["skipped"] += 1
            if len(reasons) < 3:
                reasons.append(f"line {item.line}: {bound.name} gave no {metric!r} score")
            continue
        meta = meta or dict(result.scores[0].metadata)
        found = result.scores[0].metadata.get("verdicts")
        if isinstance(found, dict):
            verdicts.append((str(found.get("output_first")), str(found.get("baseline_first"))))
        judge.append(value)
        compared.append(item)
    counts["compared"] = len(compared)
    warnings = _warnings(counts, reasons)
    out = CalibrationResult(
        run_id=run_id,
        evaluator=bound.spec(),
        metric=metric,
        kind=kind,
        judge={
            "name": meta.get("judge", getattr(bound.instance, "judge", "default")),
            "identity": meta.get("judge_identity"),
            "template": meta.get("template"),
            "template_hash": meta.get("template_hash"),
        },
        labels=labels.to_dict(),
        counts=counts,
        agreement=None,
        warnings=warnings,
    )
    if not compared:
        return out
    ratings = [item.ratings for item in compared]
    chosen: AlphaLevel = level or ("interval" if kind == "number" else "nominal")
    out.agreement = agreement(kind, judge, ratings, labels.raters, level=chosen, seed=seed)
    if verdicts and len(verdicts) == len(compared):
        out.position_bias = position_bias(verdicts)
    out.length_bias = _length_bias(kind, judge, compared, pairwise=bool(verdicts), seed=seed)
    identity, template_hash = meta.get("judge_identity"), meta.get("template_hash")
    if isinstance(identity, dict) and isinstance(template_hash, str):
        key = CalibrationKey.of(identity, bound.ref, template_hash, bound.params)
        saved = save_calibration(
            db,
            key,
            metric=metric,
            run_id=run_id,
            labels_version=labels.version,
            n=len(compared),
            summary=out.to_dict(),
        )
        out.calibration_id = saved.id
    else:
        warnings.append("the judge's scores carry no judge identity or template hash: not stored")
    return out


def _bucket(result: EvaluationResult) -> str:
    if result.outcome == Outcome.SKIPPED:
        return "skipped"
    if result.outcome == Outcome.ERROR and result.reason.startswith(INFRA_PREFIX):
        return "infra_errors"
    return "errors"


def _warnings(counts: Mapping[str, int], reasons: list[str]) -> list[str]:
    lost = counts["records"] - counts["compared"]
    if not lost:
        return []
    parts = [f"{counts[k]} {k.replace('_', ' ')}" for k in ("skipped", "errors", "infra_errors")]
    shown = "; ".join(reasons)
    text = f"{lost} of {counts['records']} records were not compared ({', '.join(parts)})"
    return [f"{text}: {shown}" if shown else text]


def _length_bias(
    kind: LabelKind,
    judge: list[LabelValue],
    items: list[LabelledRecord],
    *,
    pairwise: bool,
    seed: int,
) -> dict[str, Any] | None:
    judge_values = [as_number(kind, v) for v in judge]
    humans = [consensus(kind, i.ratings) for i in items]
    human_values = [None if h is None else as_number(kind, h) for h in humans]
    if all(v is None for v in judge_values):
        return None  # categories other than pairwise's have no order to correlate with length
    lengths = [_length(i.record, pairwise) for i in items]
    measure = "characters of the output minus those of the baseline" if pairwise else None
    return length_bias(
        lengths,
        judge_values,
        human_values,
        measure=measure or "characters of the output",
        seed=seed,
    )


def _length(record: Record, pairwise: bool) -> float:
    output = record.output.as_text() if record.output is not None else ""
    if not pairwise:
        return float(len(output))
    baseline = record.metadata.get("baseline")
    if baseline is not None:
        other = baseline if isinstance(baseline, str) else orjson.dumps(baseline).decode()
    else:
        other = record.reference.as_text() if record.reference is not None else ""
    return float(len(output) - len(other))


__all__ = ["CalibrationResult", "calibrate_async"]
