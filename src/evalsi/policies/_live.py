"""One applied policy at work: selection, sampling, the cascade, and its running counts.

Grading goes through ``RecordRunner``, the runner every offline run uses, so the skip and error
rules are the same online (a record lacking a required field is SKIPPED, an evaluator that
raises is an ERROR for that trace, never a crash); sync evaluators run where the engine's
``grade_sync`` says (on a server: its grading threads, each call under its time limit). Two skip
reasons are added here, before the runner: a cascade step whose ``when`` is false
(``cascade: ...``), and a record whose trace was recorded without content
(``metadata["content_captured"] is False``) for an evaluator that reads input, output, reference
or context (``no content ...``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalsi.core import (
    LABEL,
    PASSED,
    Feedback,
    MetricSummary,
    Outcome,
    Record,
    ResultBatch,
    Trace,
)
from evalsi.evaluators import RecordRunner
from evalsi.policies._alerts import AlertState
from evalsi.policies._cel import ConditionError, evaluate
from evalsi.policies._corpus import StepCorpus
from evalsi.policies._hooks import SyncGrading
from evalsi.policies._sampling import P2Quantile, result_key, sampled
from evalsi.policies._spec import PolicySpec, Step
from evalsi.policies._windows import Window

log = logging.getLogger("evalsi.policies")

CONTENT_FIELDS = frozenset({"input", "output", "reference", "context"})
MIN_LATENCY_OBSERVATIONS = 20
"""Traces seen before ``latency > pN`` may fire: an estimate from a handful is noise."""
REMEMBERED_TRACES = 10_000
"""Recently graded traces whose scores feedback steps may read (and that feedback does not
grade a second time)."""
_OUTCOME_WORDS = {
    int(Outcome.SCORED): "scored",
    int(Outcome.SKIPPED): "skipped",
    int(Outcome.ERROR): "error",
    int(Outcome.CANCELLED): "cancelled",
}


@dataclass(slots=True)
class Counts:
    """What a policy has done since it was applied in this process."""

    selected: int = 0
    sampled: int = 0
    evaluated: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    errors: int = 0
    alerts_fired: int = 0
    alert_failures: int = 0
    promoted: int = 0
    forced_by_feedback: int = 0  # passed over when completed, graded on negative feedback
    outcomes: Counter[str] = field(default_factory=Counter)
    sink_sent: int = 0  # scores delivered to the policy's sinks (per score and sink)
    sink_failures: int = 0  # scores a sink did not take after retries, or dropped


_COUNTS = (
    "selected",
    "sampled",
    "evaluated",
    "errors",
    "alerts_fired",
    "alert_failures",
    "promoted",
    "forced_by_feedback",
    "sink_sent",
    "sink_failures",
)


def trace_view(trace: Trace) -> dict[str, Any]:
    """``resource``, ``span`` and ``trace`` as the policy's CEL sees them."""
    root = trace.root
    span: dict[str, Any] = {}
    resource: dict[str, Any] = {}
    if root is not None:
        resource = dict(root.resource)
        span = {
            "name": root.name,
            "type": root.view.type if root.view is not None else "generic",
            "attributes": dict(root.attributes),
            "service": root.service,
            "error": root.error,
            "duration_ms": root.duration_ms,
        }
    view = {
        "error": trace.error,
        "duration_ms": trace.duration_ms,
        "span_count": len(trace.spans),
        "service": trace.service,
        "session_id": trace.session_id,
    }
    return {"resource": resource, "span": span, "trace": view}


def feedback_view(feedback: Sequence[Feedback]) -> dict[str, Any]:
    last = feedback[-1] if feedback else None
    return {
        "name": last.name if last else "",
        "value": last.value if last else None,
        "label": last.label if last else "",
        "negative": any(f.negative for f in feedback),
    }


@dataclass(slots=True)
class PolicyStats:
    """Counts since the policy was applied in this process, and the window's aggregates."""

    name: str
    project: str
    selected: int
    sampled: int
    evaluated: int
    skipped: dict[str, int]
    errors: int
    alerts_fired: int
    alert_failures: int
    promoted: int
    window: list[MetricSummary]
    window_seconds: float
    firing: list[str] = field(default_factory=list)
    outcomes: dict[str, int] = field(default_factory=dict)
    # of ``sampled``: passed over when they completed, graded on negative feedback later
    forced_by_feedback: int = 0
    sink_sent: int = 0
    sink_failures: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "project": self.project,
            "selected": self.selected,
            "sampled": self.sampled,
            "evaluated": self.evaluated,
            "skipped": dict(self.skipped),
            "errors": self.errors,
            "alerts_fired": self.alerts_fired,
            "alert_failures": self.alert_failures,
            "promoted": self.promoted,
            "window_seconds": self.window_seconds,
            "window": [m.to_dict() for m in self.window],
            "firing": list(self.firing),
            "outcomes": dict(self.outcomes),
            "forced_by_feedback": self.forced_by_feedback,
            "sink_sent": self.sink_sent,
            "sink_failures": self.sink_failures,
        }


@dataclass(frozen=True, slots=True)
class AppliedPolicy:
    """A policy as applied: its spec, the run holding its scores, when it was applied."""

    spec: PolicySpec
    run_id: str
    applied_at: float
    changed: bool = True


class LivePolicy:
    """A ``PolicySpec`` with its run, window, latency estimates and counts."""

    def __init__(
        self,
        spec: PolicySpec,
        run_id: str,
        applied_at: float,
        clock: Callable[[], float],
        grade_sync: SyncGrading | None = None,
    ):
        self.spec = spec
        self.grade_sync = grade_sync
        self.run_id = run_id
        self.applied_at = applied_at
        self.clock = clock
        self.started = clock()  # on the engine's clock (windows and alerts use it)
        self.counts = Counts()
        self.window = Window(spec.window_s, clock=clock)
        # a record-scope step grades each trace; a dataset-scope one gathers them (``_corpus``)
        self.runners = [None if s.corpus else RecordRunner(s.bound) for s in spec.steps]
        self.corpora = {
            i: StepCorpus(s.bound, spec.window_s, clock=clock)
            for i, s in enumerate(spec.steps)
            if s.corpus
        }
        self.reducing = asyncio.Lock()
        for step in spec.steps:
            self.window.declare(step.name, step.bound.manifest.ref.name)
        self.latency = {
            rule.quantile: P2Quantile(rule.quantile)
            for rule in spec.always
            if rule.kind == "latency"
        }
        self.alert_states: dict[str, AlertState] = {}
        self.saved: Any = None  # what was last kept in the store (``state``'s counts, alerts)
        self.recent: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()

    # -- deciding -------------------------------------------------------------------------------
    def selects(self, trace: Trace, view: Mapping[str, Any]) -> bool:
        if trace.project != self.spec.project:
            return False
        program = self.spec.selector_program
        if program is None:
            return True
        try:
            return evaluate(program, view, {})
        except ConditionError:
            return False  # a trace without the attribute the selector reads is not selected

    def samples(self, trace: Trace, view: Mapping[str, Any]) -> bool:
        """The rate's verdict, or an ``always`` rule's; feeds the latency estimates."""
        chosen = sampled(trace.trace_id, self.spec.rate)
        duration = trace.duration_ms
        for rule in self.spec.always:
            if chosen:
                break
            if rule.kind == "feedback":
                chosen = any(f.negative for f in trace.feedback)
            elif rule.kind == "latency":
                estimate = self.latency[rule.quantile]
                value = estimate.value()
                chosen = (
                    value is not None
                    and estimate.count >= MIN_LATENCY_OBSERVATIONS
                    and duration > value
                )
            elif rule.program is not None:
                try:
                    chosen = evaluate(rule.program, view, {})
                except ConditionError:
                    chosen = False
        for estimate in self.latency.values():
            estimate.add(duration)
        return chosen

    # -- grading --------------------------------------------------------------------------------
    async def grade(
        self,
        trace: Trace,
        record: Record,
        steps: Sequence[int],
        view: dict[str, Any],
        feedback: Sequence[Feedback],
        scores: list[dict[str, Any]] | None = None,
    ) -> tuple[list[tuple[int, int, ResultBatch]], list[dict[str, Any]]]:
        """Run the steps (indexes into ``spec.steps``) in order; the rows to store and the
        scores of this trace (``scores`` are those already known, for feedback steps)."""
        if record.id != trace.trace_id:
            record = dataclasses.replace(record, id=trace.trace_id)
        seq, trial = result_key(trace.trace_id)
        no_content = record.metadata.get("content_captured") is False
        rerun = {self.spec.steps[i].name for i in steps}  # their earlier scores are replaced
        known = [s for s in scores or () if s["evaluator"] not in rerun]
        rows: list[tuple[int, int, ResultBatch]] = []
        context = {**view, "feedback": feedback_view(feedback)}
        for index in steps:
            step, runner = self.spec.steps[index], self.runners[index]
            reason = self._gate(step, context, known, no_content)
            if runner is None:  # a corpus metric: the trace joins the window's corpus
                if reason is None:
                    self.corpora[index].add(record)
                continue
            if reason is not None:
                batch = ResultBatch(
                    runner.name, runner.ref, runner.metric, [record.id], trial=trial
                )
                batch.set_outcome(0, Outcome.SKIPPED, reason)
            elif runner.is_async:
                batch = await runner.run_async([record], trial=trial)
            elif self.grade_sync is not None:
                batch = await self.grade_sync(runner, [record], trial)
            else:
                batch = runner.run([record], trial=trial)
            rows.append((index, seq, batch))
            known.extend(score_views(batch))
            self.counts.outcomes[f"{runner.name}:{_OUTCOME_WORDS.get(batch.outcome[0], '?')}"] += 1
            if batch.outcome[0] == int(Outcome.ERROR):
                self.counts.errors += 1
        return rows, known

    def _gate(
        self,
        step: Step,
        context: Mapping[str, Any],
        known: list[dict[str, Any]],
        no_content: bool,
    ) -> str | None:
        """Why the step does not run on this trace, or None when it does."""
        if step.program is not None:
            try:
                holds = evaluate(step.program, {**context, "scores": known}, score_functions(known))
            except ConditionError as e:
                return f"cascade: `when` could not be decided ({e})"
            if not holds:
                return f"cascade: `when` is false ({step.when})"
        if no_content:
            lacking = sorted(CONTENT_FIELDS.intersection(step.bound.manifest.requires))
            if lacking:
                return (
                    f"no content captured for this trace (the instrumentation recorded no "
                    f"{'/'.join(lacking)}; enable content capture to grade it)"
                )
        return None

    def stats(self) -> PolicyStats:
        c = self.counts
        return PolicyStats(
            name=self.spec.name,
            project=self.spec.project,
            selected=c.selected,
            sampled=c.sampled,
            evaluated=c.evaluated,
            skipped={k: v for k, v in c.skipped.items() if v},
            errors=c.errors,
            alerts_fired=c.alerts_fired,
            alert_failures=c.alert_failures,
            promoted=c.promoted,
            window=self.window.summaries(),
            window_seconds=self.spec.window_s,
            firing=sorted(n for n, s in self.alert_states.items() if s.firing),
            outcomes=dict(c.outcomes),
            forced_by_feedback=c.forced_by_feedback,
            sink_sent=c.sink_sent,
            sink_failures=c.sink_failures,
        )

    def alert_payload(self, name: str, when: str) -> dict[str, Any]:
        """The JSON an alert's webhook receives."""
        return {
            "kind": "evalsi.alert",
            "policy": self.spec.name,
            "project": self.spec.project,
            "alert": name,
            "when": when,
            "fired_at": time.time(),
            "run_id": self.run_id,
            "window_seconds": self.spec.window_s,
            "n": self.window.n,
            "metrics": [m.to_dict() for m in self.window.summaries()],
        }

    async def refresh_corpora(self, *, force: bool = False) -> bool:
        """Reduce the changed corpora of the dataset-scope steps off the event loop
        (``_corpus``); whether the window changed."""
        changed = False
        async with self.reducing:  # the tick and a drain: an older reduce never lands last
            for corpus in self.corpora.values():
                if not corpus.due(force=force):
                    continue
                records = corpus.snapshot()
                try:
                    summaries = await asyncio.to_thread(corpus.reduce, records)
                except Exception:  # a failing reduce is counted, the last metrics stay
                    log.exception("policy %s: reducing %s failed", self.spec.name, corpus.name)
                    self.counts.errors += 1
                    continue
                self.window.set_corpus(corpus.name, summaries)
                changed = True
        return changed

    # -- kept across restarts -------------------------------------------------------------------
    def state(self, wall_now: float) -> dict[str, Any]:
        """The counts and alert states as JSON (alert times as unix seconds)."""
        c = self.counts
        now = self.clock()
        return {
            "counts": {
                **{k: getattr(c, k) for k in _COUNTS},
                "skipped": dict(c.skipped),
                "outcomes": dict(c.outcomes),
            },
            "alerts": {
                name: {
                    "firing": a.firing,
                    "fired": a.fired,
                    "last_fired": None if a.last_fired is None else wall_now - (now - a.last_fired),
                }
                for name, a in self.alert_states.items()
            },
        }

    def restore_state(self, state: Mapping[str, Any], wall_now: float) -> None:
        """Counts and alert states saved by ``state`` (by a server since restarted); what does
        not read as expected is left at zero."""
        counts = state.get("counts")
        if isinstance(counts, dict):
            for k in _COUNTS:
                if type(counts.get(k)) is int:
                    setattr(self.counts, k, counts[k])
            for name in ("skipped", "outcomes"):
                saved = counts.get(name)
                if isinstance(saved, dict):
                    getattr(self.counts, name).update(
                        {str(k): v for k, v in saved.items() if type(v) is int}
                    )
        alerts = state.get("alerts")
        if isinstance(alerts, dict):
            now = self.clock()
            for name, a in alerts.items():
                if not isinstance(a, dict):
                    continue
                last = a.get("last_fired")
                self.alert_states[str(name)] = AlertState(
                    firing=a.get("firing") is True,
                    last_fired=now - (wall_now - last) if isinstance(last, int | float) else None,
                    fired=a["fired"] if type(a.get("fired")) is int else 0,
                )

    def remember(self, trace_id: str, scores: list[dict[str, Any]]) -> None:
        self.recent[trace_id] = scores
        self.recent.move_to_end(trace_id)
        while len(self.recent) > REMEMBERED_TRACES:
            self.recent.popitem(last=False)


def score_views(batch: ResultBatch) -> list[dict[str, Any]]:
    """The scored entries of a one-record batch as the CEL ``scores`` list sees them.

    ``passed`` is the verdict of a pass/fail score and true for a score without one (a number,
    a label): ``scores.all(s, s.passed)`` reads "no check failed so far".
    """
    if batch.outcome[0] != int(Outcome.SCORED):
        return []
    out = []
    for score in batch.score_list(0):
        kind = PASSED if score.passed is not None else LABEL if score.label is not None else 0
        value: float | None
        if score.passed is not None:
            value = 1.0 if score.passed else 0.0
        elif score.number is not None:
            value = float(score.number)
        else:
            value = None
        out.append(
            {
                "evaluator": batch.evaluator,
                "metric": score.name or batch.metric,
                "own": batch.metric,
                "value": value,
                "passed": bool(score.passed) if kind == PASSED else True,
                "verdict": kind == PASSED,
                "label": score.label or "",
                "outcome": "scored",
            }
        )
    return out


def score_functions(known: list[dict[str, Any]]) -> dict[str, Callable[..., Any]]:
    """``score('x')`` (the value of x's own metric, or of ``x/metric``) and ``passed('x')``
    (its verdict); null when x has no such score on this trace."""

    def find(args: tuple[Any, ...], verdict: bool) -> dict[str, Any] | None:
        name = str(args[0]) if args else ""
        metric = str(args[1]) if len(args) > 1 else None
        if metric is None and "/" in name and not any(s["evaluator"] == name for s in known):
            name, metric = name.split("/", 1)
        mine = [s for s in known if s["evaluator"] == name]
        if verdict:
            mine = [s for s in mine if s["verdict"]]
        if metric is not None:
            mine = [s for s in mine if s["metric"] == metric]
        else:
            own = [s for s in mine if s["metric"] == s["own"]]
            mine = own or mine
        return mine[0] if mine else None

    def score(*args: Any) -> float | None:
        found = find(args, False)
        return None if found is None else found["value"]

    def passed(*args: Any) -> bool | None:
        found = find(args, True)
        return None if found is None else bool(found["passed"])

    return {"score": score, "passed": passed}
