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
from evalsi.packs import builtin_registry
from evalsi.server._evaluation import EvaluationHandler
from evalsi.server._state import ServerConfig, ServerState
from evalsi.store import SqlStore
from evalsi.wire import record_from_proto

RECORDS = [
    {"id": "a", "output": {"text": "x"}, "reference": {"text": "x"}, "metadata": {"k": [1, "z"]}},
    {"id": "b", "output": {"json": {"v": 1.5}}, "reference": {"text": "y"}},
]


def _handler(tmp_path: Path) -> EvaluationHandler:
    config = ServerConfig(data_dir=tmp_path, datasets_dir=tmp_path / "d", store=":memory:")
    state = ServerState(config=config, store=SqlStore.open(":memory:"), registry=builtin_registry())
    return EvaluationHandler(state)


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
    spec = [pb.EvaluatorSpec(ref="exact-match")]
    options = pb.EvaluateOptions()
    first = handler._config(spec, "", options, "")
    again = handler._config([pb.EvaluatorSpec(ref="exact-match")], "doc", options, "")
    other = handler._config([pb.EvaluatorSpec(ref="contains")], "", options, "")
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
