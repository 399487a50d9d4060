"""A spec message read back as its document: whole numbers of its Struct fields are integers
again (a server's CreateRun once refused ``tool-count``'s ``max: 1`` as ``1.0``)."""

from __future__ import annotations

from google.protobuf import json_format

from evalsi._proto.evalsi.v1alpha1 import run_pb2
from evalsi.wire import message_document


def test_whole_numbers_of_params_are_integers_and_fractions_stay() -> None:
    message = json_format.ParseDict(
        {
            "apiVersion": "evals.si/v1alpha1",
            "kind": "EvalRun",
            "metadata": {"name": "x"},
            "spec": {
                "evaluators": [
                    {"ref": "tool-count", "params": {"max": 1, "ratio": 0.25, "deep": [2, 2.5]}}
                ],
                "minCompletionRate": 1.0,
            },
        },
        run_pb2.EvalRun(),
    )
    doc = message_document(message)
    params = doc["spec"]["evaluators"][0]["params"]
    assert params == {"max": 1, "ratio": 0.25, "deep": [2, 2.5]}
    assert type(params["max"]) is int
    assert type(params["deep"][0]) is int
    assert doc["spec"]["minCompletionRate"] == 1
