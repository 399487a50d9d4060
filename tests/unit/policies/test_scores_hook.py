"""The engine's ``on_scores`` hook: told every graded trace's results with the span to parent
them to (the record's, else the trace's root); a failing hook is counted, never raised."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any

from evalsi.core import (
    Content,
    EvaluationResult,
    Outcome,
    Provenance,
    Record,
    Span,
    SpanView,
    Trace,
)
from evalsi.policies._engine import PolicyEngine, ScoresHook
from evalsi.policies._spec import policy_from_yaml
from tests.support.registry import BUILTINS

POLICY = """\
apiVersion: evals.si/v1alpha1
kind: OnlineEvalPolicy
metadata: {name: p, labels: {evals.si/project: team-a}}
spec:
  cascade:
    - {ref: contains, params: {values: [ok]}}
    - {ref: length, when: "scores.all(s, s.passed)"}
"""


class Hook:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[dict[str, Any]] = []
        self.fail = fail

    def __call__(
        self,
        *,
        project: str,
        policy: str,
        run_id: str,
        trace_id: str,
        span_id: str,
        results: Sequence[EvaluationResult],
    ) -> None:
        if self.fail:
            raise ConnectionError("collector down")
        self.calls.append(
            {
                "project": project,
                "policy": policy,
                "run_id": run_id,
                "trace_id": trace_id,
                "span_id": span_id,
                "results": [(r.evaluator, r.outcome, [s.value for s in r.scores]) for r in results],
            }
        )


def make(i: int, output: str, span_id: str = "") -> tuple[Trace, Record]:
    tid = f"{i:032x}"
    root = Span(tid, "a" * 16, name="agent", end_time_unix_nano=5, view=SpanView(type="agent"))
    child = Span(tid, "b" * 16, parent_span_id="a" * 16, name="llm", end_time_unix_nano=4)
    record = Record(id=tid, input=Content.of_text("q"), output=Content.of_text(output))
    if span_id:
        record = dataclasses.replace(
            record, provenance=Provenance(source="trace", trace_id=tid, span_id=span_id)
        )
    return Trace(tid, project="team-a", spans=[root, child]), record


def grade(hook: ScoresHook, items: list[tuple[Trace, Record]]) -> PolicyEngine:
    async def run() -> PolicyEngine:
        engine = PolicyEngine(on_scores=hook, registry=BUILTINS)
        await engine.apply(policy_from_yaml(POLICY, registry=BUILTINS))
        for trace, record in items:
            await engine.on_trace(trace, record)
        return engine

    return asyncio.run(run())


def test_the_hook_hears_each_graded_trace() -> None:
    hook = Hook()
    engine = grade(hook, [make(1, "ok then"), make(2, "no", span_id="b" * 16)])
    first, second = hook.calls
    assert {k: first[k] for k in ("project", "policy", "trace_id", "span_id")} == {
        "project": "team-a",
        "policy": "p",
        "trace_id": f"{1:032x}",
        "span_id": "a" * 16,  # no provenance: the root
    }
    assert first["run_id"] == engine.get("p", "team-a").run_id
    assert first["results"] == [
        ("contains", Outcome.SCORED, [True]),
        ("length", Outcome.SCORED, [7.0]),  # len("ok then")
    ]
    assert second["span_id"] == "b" * 16  # the record's own span
    assert second["results"] == [
        ("contains", Outcome.SCORED, [False]),
        ("length", Outcome.SKIPPED, []),
    ]
    assert engine.stats("p", "team-a").errors == 0


def test_a_failing_hook_is_counted_and_grading_goes_on() -> None:
    engine = grade(Hook(fail=True), [make(1, "ok"), make(2, "ok")])
    stats = engine.stats("p", "team-a")
    assert (stats.evaluated, stats.errors) == (2, 2)
    assert {m.evaluator: m.n for m in stats.window} == {"contains": 2, "length": 2}
