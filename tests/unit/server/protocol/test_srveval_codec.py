"""The server's JSON codec answers exactly like ``google.protobuf.json_format`` (the codec it
replaces): same messages from the same bodies, same errors, same JSON out (compact)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from google.protobuf import json_format
from google.protobuf.message import Message

from evalsi._proto.evalsi.v1alpha1 import evaluation_service_pb2 as pb
from evalsi._proto.evalsi.v1alpha1 import run_service_pb2, score_pb2
from evalsi.server.protocol._json_codec import FastJSONCodec, message_to_dict, parse

RECORD = {
    "id": "r1",
    "input": {"messages": {"messages": [{"role": "user", "content": "hi", "toolCalls": [
        {"id": "t", "name": "f", "arguments": {"a": [1, 2.5, None, True, {"b": "c"}]}}]}]}},
    "output": {"text": "Paris"},
    "reference": {"json": {"v": 1.5, "w": [None]}},
    "context": [{"text": "a"}, {"row": {"features": {"x": 1}, "probabilities": {"a": 0.5}}}],
    "trajectory": {"steps": [{"kind": "STEP_KIND_TOOL_CALL", "name": "s",
                              "startTimeUnixNano": "1700000000000000000", "usage": {
                                  "inputTokens": "12", "outputTokens": 3}}]},
    "metadata": {"k": [1, "z"], "n": None, "d": {"e": {}}},
    "usage": {"inputTokens": 5},
    "provenance": {},
}  # fmt: skip

GOOD: list[Any] = [
    {"records": [RECORD], "evaluators": [{"ref": "exact-match"}]},
    {"records": [{"id": "a", "output": {"text": "x"}}], "evaluators": [
        {"ref": "contains", "params": {"substring": "x"}, "name": "c"}],
     "clusterBy": "doc", "options": {"ciMethod": "bootstrap-bca", "seed": "42", "concurrency": 2},
     "name": "nightly", "gates": ["metric('c').mean >= 0.5"], "minCompletionRate": 0.5,
     "max_evaluator_error_rate": 0},
    {"options": {"seed": 7}, "cluster_by": "x"},
    {"records": []},
    {},
    {"records": [{"id": "x", "trajectory": {"steps": [{"kind": 2}]}}]},  # an enum as a number
    {"records": [{"id": "x", "metadata": {"big": 1e300, "neg": -0.0}}]},
    {"options": {"concurrency": 3.0}},  # a whole float for an int
    {"options": {"seed": "1_000"}},
    {"minCompletionRate": "NaN"},
    {"minCompletionRate": "0.5"},
]  # fmt: skip

BAD: list[Any] = [
    {"records": [{"id": 5}]},
    {"records": [{"nope": 1}]},
    {"records": {"id": "x"}},
    {"records": [None]},
    {"records": [{"id": "x", "output": {"text": "a", "json": 1}}]},  # two members of a oneof
    {"records": [{"id": "x", "recordId": "y"}]},
    {"evaluators": [{"ref": "a", "params": 5}]},
    {"options": {"concurrency": True}},
    {"options": {"concurrency": 1.5}},
    {"options": {"concurrency": 2**40}},
    {"options": {"seed": -1}},
    {"options": {"seed": " 5"}},
    {"options": {"ciMethod": 3}},
    {"records": [{"id": "x", "trajectory": {"steps": [{"kind": "NOPE"}]}}]},
    {"clusterBy": ["a"]},
    {"name": "a", "name2": 1},
    [1, 2],
    "text",
    {"records": [{"id": "x", "metadata": {"k": {"a": {"b": {}}}}}]},  # fine, see below
]


def _reference(data: bytes, cls: type[Message]) -> tuple[Message | None, str | None]:
    message = cls()
    try:
        json_format.Parse(data, message, ignore_unknown_fields=False)
    except Exception as e:  # noqa: BLE001 - the class and the words must match
        return None, f"{type(e).__name__}: {e}"
    return message, None


def _ours(data: bytes, cls: type[Message]) -> tuple[Message | None, str | None]:
    try:
        return parse(data, cls), None
    except Exception as e:  # noqa: BLE001
        return None, f"{type(e).__name__}: {e}"


@pytest.mark.parametrize("doc", GOOD + BAD)
def test_decode_equals_json_format(doc: Any) -> None:
    data = json.dumps(doc).encode()
    expected = _reference(data, pb.EvaluateRequest)
    assert _ours(data, pb.EvaluateRequest) == expected


@pytest.mark.parametrize(
    "data",
    [b"", b"{", b"{'a': 1}", b'{"name": NaN}', b'{"name": "\\ud800"}', b"\xff", b"null",
     b'{"records": [{"id": "x", "metadata": {"n": NaN}}]}', b"[" * 200 + b"]" * 200],
)  # fmt: skip
def test_bodies_orjson_refuses_are_json_formats_to_judge(data: bytes) -> None:
    assert _ours(data, pb.EvaluateRequest) == _reference(data, pb.EvaluateRequest)


def test_nesting_deeper_than_json_format_allows_is_refused_the_same_way() -> None:
    deep: dict[str, Any] = {"kind": "STEP_KIND_AGENT"}
    doc: dict[str, Any] = {"records": [{"id": "x", "input": {"json": deep}}]}
    inner = deep
    for _ in range(150):
        inner["x"] = {"y": 1}
        inner = inner["x"]
    data = json.dumps(doc).encode()
    assert _ours(data, pb.EvaluateRequest) == _reference(data, pb.EvaluateRequest)


def test_decode_fast_path_really_builds_the_message() -> None:
    # Equality with json_format alone would pass if every input fell back to it.
    from evalsi.server.protocol import _json_codec

    doc = GOOD[0]
    kwargs = _json_codec._message_kwargs(doc, pb.EvaluateRequest.DESCRIPTOR, 1)
    assert (
        pb.EvaluateRequest(**kwargs) == _reference(json.dumps(doc).encode(), pb.EvaluateRequest)[0]
    )


def _response() -> list[Message]:
    request = json_format.ParseDict(GOOD[0], pb.EvaluateRequest())
    response = pb.EvaluateResponse(run_id="r", records=2**40, status="done", dataset_version="v")
    result = response.results.add(record_id="a", evaluator="e", outcome=score_pb2.OUTCOME_SCORED)
    result.scores.add(name="s", passed=False, confidence=0.0)
    result.scores.add(name="n", number=math.nan, explanation="é ☃")
    result.scores.add(name="l", label="").metadata["k"].number_value = 1.0
    result.duration.FromMilliseconds(1500)
    metric = response.metrics.add(evaluator="e", metric="m", kind=score_pb2.SCORE_KIND_NUMBER)
    metric.mean, metric.std, metric.n = math.inf, -math.inf, 3
    metric.labels["a"] = 2
    metric.pass_at_k["1"] = 0.25
    metric.ci.low = 0.0
    metric.higher_is_better = False
    response.gates.add(expr="x", passed=False, verdict="undecided")
    run = run_service_pb2.Run(id="r", gates=[score_pb2.GateResult(expr="g")])
    run.create_time.FromSeconds(1_700_000_000)
    empty_enum = score_pb2.EvaluationResult(outcome=99)  # type: ignore[arg-type]
    return [request, response, run, empty_enum, pb.EvaluateResponse()]


@pytest.mark.parametrize("message", _response())
def test_encode_equals_json_format(message: Message) -> None:
    ours = FastJSONCodec().encode(message)
    assert b"\n" not in ours  # compact
    assert json.loads(ours) == json.loads(json_format.MessageToJson(message))
    assert message_to_dict(message) == json_format.MessageToDict(message)


@pytest.mark.parametrize("message", _response())
def test_encode_with_defaults_equals_json_format(message: Message) -> None:
    # The REST routes print defaults (``"passed": false``, ``"records": "0"``).
    expected = json_format.MessageToDict(message, always_print_fields_with_no_presence=True)
    assert message_to_dict(message, defaults=True) == expected


def test_codec_round_trip() -> None:
    codec = FastJSONCodec()
    request = json_format.ParseDict(GOOD[1], pb.EvaluateRequest())
    assert codec.name() == "json"
    assert codec.decode(codec.encode(request), pb.EvaluateRequest) == request
