"""Runs and comparisons to proto and back (through bytes), as a client reads them."""

from __future__ import annotations

import pytest

from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as pb
from evalsi.core import Interval, MetricSummary
from evalsi.runs import Comparison, MetricComparison, RunResult, Unmatched
from evalsi.stats import McNemar
from evalsi.store import RunInfo
from evalsi.wire import (
    Progress,
    comparison_from_proto,
    comparison_to_proto,
    run_from_proto,
    run_result_to_proto,
    run_to_proto,
)

GATES = [
    {"expr": "a", "passed": True, "verdict": "passed", "value": 0.9, "reason": "0.9 >= 0.8"},
    {"expr": "b", "passed": False, "verdict": "failed", "value": 3, "reason": "3 > 2"},
    {"expr": "c", "passed": None, "verdict": "inconclusive", "value": None, "reason": "n<10"},
]


WARNING = {
    "kind": "infra_errors",
    "message": "3 of 60 tasks were lost to infrastructure errors",
    "count": 3,
    "examples": ["connection refused by 127.0.0.1:9"],
}
CAUSE = {"kind": "connection", "count": 3, "example": "connection refused by 127.0.0.1:9"}


def _metric(**extra: object) -> MetricSummary:
    return MetricSummary(
        evaluator="exact-match",
        metric="exact-match",
        kind="passed",
        n=60,
        mean=0.65,
        std=0.48,
        ci=Interval(0.52, 0.76, "cluster-t"),
        scored=60,
        skipped=1,
        errors=2,
        cancelled=0,
        infra_errors=3,
        clusters=30,
        pass_at_k={"1": 0.65, "2": 0.7},
        pass_hat_k={"1": 0.65, "2": 0.6},
        trial_variance=0.01,
        higher_is_better=True,
        **extra,  # type: ignore[arg-type]
    )


def _result() -> RunResult:
    return RunResult(
        run_id="20260101-000000-abcdef",
        status="done",
        records=30,
        metrics=[_metric()],
        dataset_source="/data/qa.jsonl",
        dataset_version="sha256:1234",
        evaluators=[{"name": "exact-match", "ref": "builtin/exact-match@1.0.0", "params": {}}],
        gates=GATES,
        trials=2,
        tasks={"ok": 57, "infra_error": 3},
        infra_errors=3,
        stopped_reason=None,
        spend={"tokens": 1234, "usd": None, "calls": 60, "seconds": 1.25},
        pass_k_samples={"exact-match/exact-match": {"samples": 30, "excluded": 0}},
        warnings=[WARNING],
        infra_error_causes=[CAUSE],
    )


def _trip(message: pb.Run) -> pb.Run:
    return pb.Run.FromString(message.SerializeToString())


def test_run_result_round_trips() -> None:
    result = _result()
    back = run_from_proto(_trip(run_result_to_proto(result)))
    assert back.to_dict() == result.to_dict()
    assert back.exit_code == result.exit_code == 1  # a failed gate
    assert back.store is None


def test_stored_run_reads_back_as_its_result() -> None:
    result = _result()
    summary = {
        "metrics": [m.to_dict() for m in result.metrics],
        "gates": GATES,
        "dataset": {"source": "/data/qa.jsonl", "version": "sha256:1234"},
        "tasks": result.tasks,
        "infra_errors": 3,
        "stopped_reason": None,
        "spend": result.spend,
        "trials": 2,
        "pass_k_samples": result.pass_k_samples,
        "graded": True,
        "warnings": [WARNING],
        "infra_error_causes": [CAUSE],
        "target_error_causes": [],
    }
    info = RunInfo(
        id=result.run_id,
        kind="run",
        status="done",
        created_at=1_700_000_000.25,
        name="it",
        finished_at=1_700_000_010.5,
        records=30,
        spec={"evaluators": result.evaluators, "seed": 2**60, "origin": {"project_id": "old"}},
        summary=summary,
        project_id="p1",
    )
    message = _trip(run_to_proto(info))
    assert message.project_id == "p1"  # the store's column, not what the spec's origin says
    assert message.exit_code == 1
    assert message.create_time.ToNanoseconds() == 1_700_000_000_250_000_000
    assert message.spec["seed"] == str(2**60)  # beyond a double: as proto3 JSON writes int64
    assert [g.verdict for g in message.gates] == ["pass", "fail", "undecided"]
    assert [w.kind for w in message.warnings] == ["infra_errors"]
    assert [(c.kind, c.count) for c in message.infra_error_causes] == [("connection", 3)]
    assert run_from_proto(message).to_dict() == result.to_dict()


def test_running_run_shows_progress_and_partial_metrics() -> None:
    info = RunInfo(id="r1", kind="run", status="running", created_at=1.0)
    partial = [_metric()]
    message = run_to_proto(info, status="queued", progress=Progress(5, 60, 1), metrics=partial)
    assert message.status == "queued"
    assert message.project_id == "default"
    assert message.exit_code == 0
    assert (message.progress.tasks_done, message.progress.tasks_total) == (5, 60)
    assert message.progress.infra_errors == 1
    assert not message.HasField("finish_time")
    assert run_from_proto(message).metrics == partial


@pytest.mark.parametrize(
    ("status", "code"),
    [("cancelled", 3), ("interrupted", 3), ("incomplete", 3), ("failed", 2), ("done", 0)],
)
def test_exit_code_follows_the_status(status: str, code: int) -> None:
    info = RunInfo(id="r1", kind="run", status=status, created_at=1.0)
    assert run_to_proto(info).exit_code == code


def test_dry_run_plan_round_trips() -> None:
    plan = {"name": "x", "tasks": 90, "samples": 30, "trials": 3, "budget": {}, "unpinned": []}
    result = RunResult("", "planned", 30, [], "/d.jsonl", None, trials=3, plan=plan)
    back = run_from_proto(_trip(run_result_to_proto(result)))
    assert back.plan == plan
    assert back.status == "planned"
    assert back.to_dict() == result.to_dict()


def _comparison() -> Comparison:
    passed = MetricComparison(
        evaluator="exact-match",
        metric="exact-match",
        kind="passed",
        n_paired=30,
        n_a=30,
        n_b=29,
        mean_a=0.6,
        mean_b=0.9,
        delta=0.3,
        ci=Interval(0.1, 0.5, "bootstrap-percentile", 0.9),
        p_value=0.002,
        mcnemar=McNemar(9, 0, 0.0, 0.0039, "exact"),
        verdict="improved",
        mde=0.2,
        higher_is_better=True,
    )
    number = MetricComparison(
        evaluator="len",
        metric="len",
        kind="number",
        n_paired=1,
        n_a=1,
        n_b=1,
        mean_a=None,
        mean_b=None,
        delta=None,
        ci=Interval(None, None, "bootstrap-percentile", 0.9),
        p_value=None,
        mcnemar=None,
        verdict="insufficient data",
        mde=None,
        higher_is_better=None,
        note="n=1",
    )
    return Comparison(
        run_a="A",
        run_b="B",
        dataset_versions=("sha256:a", None),
        metrics=[passed, number],
        unmatched=[Unmatched("f1", "f1", "b", "B"), Unmatched("g", "g", "a", "A")],
        warnings=["records missing"],
        level=0.9,
        seed=2**40,
    )


def test_comparison_round_trips() -> None:
    original = _comparison()
    message = pb.CompareRunsResponse.FromString(comparison_to_proto(original).SerializeToString())
    assert [m.verdict for m in message.metrics] == ["improved", "insufficient_data"]
    back = comparison_from_proto(message)
    assert back == original  # everything travels: McNemar's counts, seed, dataset versions
    assert back.rows() == original.rows()  # the table a client prints is the same


def test_unknown_verdict_is_refused() -> None:
    message = comparison_to_proto(_comparison())
    message.metrics[0].verdict = "better"
    with pytest.raises(ValueError, match="verdict"):
        comparison_from_proto(message)
