"""EvaluationHandler without a network: validation names the field, bound plans are reused,
and the dataset version is the embedded API's for the same records."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format

import evalsi
from evalsi._proto.evalsi.v1alpha1 import evaluation_service_pb2 as pb
from evalsi.core import ParamError, UnknownEvaluatorError, UserError
from evalsi.server._evaluation import EvaluationHandler
from evalsi.wire import record_from_proto
from tests.support.server_state import server_state

RECORDS = [
    {"id": "a", "output": {"text": "x"}, "reference": {"text": "x"}, "metadata": {"k": [1, "z"]}},
    {"id": "b", "output": {"json": {"v": 1.5}}, "reference": {"text": "y"}},
]


def _handler(tmp_path: Path) -> EvaluationHandler:
    return EvaluationHandler(server_state(tmp_path, store=":memory:", runs=False))


def _call(handler: EvaluationHandler, body: dict[str, Any]) -> pb.EvaluateResponse:
    request = json_format.ParseDict(body, pb.EvaluateRequest())
    return asyncio.run(handler.evaluate(request, None))


def test_dataset_version_and_metrics_equal_embedded(tmp_path: Path) -> None:
    handler = _handler(tmp_path)
    answer = _call(handler, {"records": RECORDS, "evaluators": [{"ref": "exact-match"}]})
    request = json_format.ParseDict({"records": RECORDS}, pb.EvaluateRequest())
    records = [record_from_proto(r) for r in request.records]
    embedded = evalsi.evaluate(records, ["exact-match"], store=":memory:")
    assert answer.dataset_version == embedded.dataset_version
    assert answer.metrics[0].n == embedded.metric("exact-match").n == 2
    assert answer.metrics[0].mean == embedded.metric("exact-match").mean == 0.5


def test_plans_are_bound_once_per_evaluator_list(tmp_path: Path) -> None:
    handler = _handler(tmp_path)
    options = pb.EvaluateOptions()

    def config(ref: str, cluster_by: str = "") -> Any:
        request = pb.EvaluateRequest(evaluators=[pb.EvaluatorSpec(ref=ref)], cluster_by=cluster_by)
        return handler._config(request, options, "")

    first = config("exact-match")
    again = config("exact-match", "doc")
    other = config("contains")
    assert again.plan is first.plan
    assert other.plan is not first.plan
    assert again.cluster_by == "doc"


@pytest.mark.parametrize(
    ("evaluators", "error", "path"),
    [
        ([{"ref": "nope"}], UnknownEvaluatorError, "evaluators[0].ref: unknown evaluator"),
        ([{"ref": "exact-match", "params": {"x": 1}}], ParamError, "evaluators[0].params:"),
        ([{"ref": "exact-match"}, {"ref": "exact-match"}], UserError, "used twice"),
    ],
)
def test_evaluator_errors_keep_their_class_and_name_the_field(
    tmp_path: Path, evaluators: list[dict[str, Any]], error: type[Exception], path: str
) -> None:
    with pytest.raises(error) as caught:
        _call(_handler(tmp_path), {"records": RECORDS, "evaluators": evaluators})
    assert path in str(caught.value)


def test_an_evaluator_failing_on_a_record_is_an_error_result_not_a_failed_call(
    tmp_path: Path,
) -> None:
    handler = _handler(tmp_path)
    body = {"records": RECORDS, "evaluators": [{"ref": "json-schema", "params": {"schema": {}}}]}
    answer = _call(handler, body)
    assert answer.status == "done"
    assert len(answer.results) == 2


def test_a_big_request_on_an_in_memory_store_is_graded_inline(
    tmp_path: Path,
) -> None:
    from evalsi.server._evaluation import INLINE_RECORDS

    handler = _handler(tmp_path)
    assert not handler._state.store.any_thread
    records = [{**RECORDS[i % 2], "id": f"r{i}"} for i in range(INLINE_RECORDS + 1)]
    answer = _call(handler, {"records": records, "evaluators": [{"ref": "exact-match"}]})
    assert answer.records == INLINE_RECORDS + 1
    assert answer.metrics[0].mean == pytest.approx(0.5, abs=0.01)
    assert handler._state.store.count_results(answer.run_id) == INLINE_RECORDS + 1


def test_a_call_that_fails_after_grading_leaves_a_failed_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalsi.server import _evaluation

    def broken(self: Any) -> Any:
        raise RuntimeError("summaries broke")

    monkeypatch.setattr(_evaluation._Grading, "_conclude", broken)
    handler = _handler(tmp_path)
    with pytest.raises(RuntimeError):
        _call(handler, {"records": RECORDS, "evaluators": [{"ref": "exact-match"}], "name": "n"})
    (run,) = handler._state.store.list_runs()
    assert (run.status, run.error, run.name, run.records) == ("failed", "RuntimeError", "n", 2)
    assert handler._state.store.count_results(run.id) == 0


def test_results_built_from_batch_columns_equal_result_to_proto() -> None:
    from evalsi.core import EvaluationResult, Outcome, ResultBatch, Score
    from evalsi.server._evaluation import _add_results
    from evalsi.wire import result_to_proto

    def one(**kw: Any) -> EvaluationResult:
        base: dict[str, Any] = {
            "record_id": "r", "evaluator": "e", "evaluator_ref": "builtin/e@1", "trial": 2,
            "outcome": Outcome.SCORED, "duration_s": 0.25,
        }  # fmt: skip
        return EvaluationResult(**{**base, **kw})

    results = [
        one(scores=[Score(name="m", passed=True)]),
        one(scores=[Score(name="m", passed=False, explanation="why")]),
        one(scores=[Score(name="m", number=0.125)]),
        one(scores=[Score(name="m", label="cat")]),
        one(scores=[Score(name="m", label="cat", explanation="both kept")]),
        one(scores=[Score(name="other", number=1.0)]),
        one(scores=[Score(name="m", structured={"a": [1]})]),
        one(scores=[Score(name="m", number=2.0, confidence=0.5), Score(name="x", passed=True)]),
        one(outcome=Outcome.SKIPPED, reason="no reference"),
        one(outcome=Outcome.ERROR, reason="boom"),
        one(outcome=Outcome.CANCELLED, reason=""),
        one(scores=[]),
    ]
    batch = ResultBatch.of(results, "m")
    batch.duration = 0.25
    out = pb.EvaluateResponse()
    _add_results(out.results, [batch, ResultBatch.of([], "m")])
    assert list(out.results) == [result_to_proto(batch[i]) for i in range(len(batch))]
    assert out.results[0].scores[0].passed is True


@pytest.mark.parametrize(
    "record",
    [
        {"id": "a"},
        {"id": "a", "output": {"text": ""}},
        {"id": "a", "input": {"text": "q"}, "output": {"text": "x"}, "reference": {"text": "é"}},
        {"id": "a", "output": {"json": 1}, "reference": {"text": "y"}},
        {"id": "a", "output": {"text": "x"}, "metadata": {"k": 1}},
        {"id": "a", "output": {"text": "x"}, "context": [{"text": "c"}]},
    ],
)
def test_text_records_take_a_short_cut_to_the_same_core_record(record: dict[str, Any]) -> None:
    from evalsi.server._evaluation import _records

    message = json_format.ParseDict({"records": [record]}, pb.EvaluateRequest()).records[0]
    assert _records([message]) == [record_from_proto(message)]
