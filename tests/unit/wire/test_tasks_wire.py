"""ListRunTasks carries the task dicts of ``evalsi.runs.iter_tasks`` unchanged: every key
(present or absent), every score kind, the steps of a trajectory, in the same order, so a
client prints the JSON the store gives."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as pb
from evalsi.runs import task_json
from evalsi.wire import task_from_proto, task_to_proto

AGENT_TASK: dict[str, Any] = {
    "sample_id": "t1",
    "seq": 3,
    "trial": 2,
    "status": "ok",
    "output": {"text": "Alice has 120."},
    "scores": [
        {
            "evaluator": "exact-match",
            "outcome": "scored",
            "scores": {"exact-match": True},
            "reason": "",
        },
        {
            "evaluator": "judge",
            "outcome": "scored",
            "scores": {"judge": 1.0, "label": "good", "count": 3, "parts": {"a": [1, 2]}},
            "reason": "fine",
        },
        {"evaluator": "slow", "outcome": "error", "scores": {}, "reason": "TimeoutError: x"},
    ],
    "trajectory": {
        "steps": [
            {
                "type": "model_call",
                "name": "m",
                "input": [{"content": "hi", "role": "user"}],
                "output": "calling",
                "usage": {"input_tokens": 5, "output_tokens": 2, "cost_usd": 0.25},
            },
            {"type": "tool_call", "tool": "balance", "arguments": {"who": "alice"}, "result": None},
            {
                "type": "tool_call",
                "name": "search",
                "tool": "search",
                "arguments": "raw",
                "result": {"hits": []},
                "error": "boom",
            },
            {"type": "message"},
        ],
        "stop_reason": "final_answer",
    },
}

FAILED_TASK: dict[str, Any] = {
    "sample_id": "t2",
    "seq": 0,
    "trial": 0,
    "status": "target_error",
    "output": None,
    "scores": [],
    "error": "http_500: down",
}

SCORE_RUN_TASK: dict[str, Any] = {
    "sample_id": "r1",
    "seq": 7,
    "trial": 0,
    "scores": [{"evaluator": "e", "outcome": "skipped", "scores": {}, "reason": "no output"}],
}


@pytest.mark.parametrize("task", [AGENT_TASK, FAILED_TASK, SCORE_RUN_TASK])
def test_a_task_crosses_the_wire_unchanged(task: dict[str, Any]) -> None:
    wire = pb.RunTask.FromString(task_to_proto(task).SerializeToString())
    back = task_from_proto(wire)
    assert back == task
    # byte for byte as printed: key order and 1.0 vs 1 included
    assert orjson.dumps(back) == orjson.dumps(task)


def test_absent_keys_stay_absent() -> None:
    back = task_from_proto(task_to_proto(SCORE_RUN_TASK))
    assert set(back) == {"sample_id", "seq", "trial", "scores"}
    message = task_to_proto(FAILED_TASK)
    assert message.HasField("output")  # a null output is still an output
    assert not message.HasField("trajectory")


def test_free_form_values_read_back_in_the_store_views_form() -> None:
    """A wire Value keeps no key order and no 1.0 apart from 1: the store's view takes the
    form the wire gives back (keys sorted, whole floats as integers), so both print alike."""
    raw = {"zeta": 2.0, "alpha": [{"b": 1, "a": 0.5}], "mid": None, "c": "x", "aa": True}
    assert list(task_json(raw)) == ["aa", "alpha", "c", "mid", "zeta"]
    assert task_json(raw)["zeta"] == 2
    assert isinstance(task_json(raw)["zeta"], int)
    task = {**FAILED_TASK, "output": task_json(raw)}
    for _ in range(5):  # map order on the wire varies from one serialisation to the next
        back = task_from_proto(pb.RunTask.FromString(task_to_proto(task).SerializeToString()))
        assert orjson.dumps(back) == orjson.dumps(task)
