"""Warnings and failure causes to proto and back (through bytes), field for field, and a Run
carrying them in typed fields (an older server's ``details`` still read)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from evalsi._proto.evalsi.v1alpha1 import run_service_pb2, score_pb2
from evalsi.core import Record
from evalsi.datasets import RepeatedIds
from evalsi.runs import RunResult
from evalsi.wire import (
    cause_from_proto,
    cause_to_proto,
    run_from_proto,
    run_result_to_proto,
    struct_to_proto,
    warning_from_proto,
    warning_to_proto,
)

# Protobuf strings are UTF-8: lone surrogates cannot travel.
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
COUNT = st.integers(min_value=0, max_value=2**63 - 1)
WARNING = st.fixed_dictionaries(
    {"kind": TEXT, "message": TEXT, "count": COUNT, "examples": st.lists(TEXT, max_size=5)}
)
CAUSE = st.fixed_dictionaries({"kind": TEXT, "count": COUNT, "example": TEXT})


def _bytes_trip(message: Any) -> Any:
    return type(message).FromString(message.SerializeToString())


@given(WARNING)
def test_warning_round_trip(warning: dict[str, Any]) -> None:
    back = warning_from_proto(_bytes_trip(warning_to_proto(warning)))
    assert back == warning
    assert {k: type(v) for k, v in back.items()} == {k: type(v) for k, v in warning.items()}


@given(CAUSE)
def test_cause_round_trip(cause: dict[str, Any]) -> None:
    back = cause_from_proto(_bytes_trip(cause_to_proto(cause)))
    assert back == cause
    assert {k: type(v) for k, v in back.items()} == {k: type(v) for k, v in cause.items()}


def test_every_key_has_a_field() -> None:
    # A key added to the dicts (or a field to the messages) on one side only would be dropped.
    warning = RepeatedIds()
    warning.add([Record(id="a"), Record(id="a")], 1)
    found = warning.warning()
    assert found is not None
    assert set(found.to_dict()) == {f.name for f in score_pb2.RunWarning.DESCRIPTOR.fields}
    cause = {"kind": "http_500", "count": 3, "example": "HTTP 500 from x"}  # runs/_failures.py
    assert set(cause) == {f.name for f in score_pb2.FailureCause.DESCRIPTOR.fields}


def test_a_count_read_from_json_and_bad_values() -> None:
    # A stored summary read back from JSON may hold 3.0; a bool or a string is no count.
    assert warning_to_proto({"kind": "k", "count": 3.0}).count == 3
    assert warning_to_proto({"kind": "k", "count": True}).count == 0
    assert cause_to_proto({"kind": "k", "count": "7"}).count == 0
    assert cause_to_proto({"kind": "k", "count": -2}).count == 0
    assert warning_from_proto(warning_to_proto({})) == {
        "kind": "", "message": "", "count": 0, "examples": []
    }  # fmt: skip


WARNINGS = [
    {"kind": "bad_records", "message": "skipped 2 bad record(s)", "count": 2,
     "examples": ["line 3: not JSON", "line 9: not JSON"]},
    {"kind": "target_errors", "message": "4 of 10 target calls failed", "count": 4,
     "examples": ["HTTP 403 from http://x"]},
]  # fmt: skip
INFRA = [{"kind": "connection", "count": 2, "example": "connection refused by 127.0.0.1:9"}]
TARGET = [{"kind": "http_403", "count": 4, "example": "HTTP 403 from http://x: forbidden"}]


def test_a_run_carries_them_in_typed_fields() -> None:
    result = RunResult(
        "r1", "done", 10, [], "/d.jsonl", "sha256:1", tasks={"ok": 4, "target_error": 4,
        "infra_error": 2}, infra_errors=2, warnings=WARNINGS, infra_error_causes=INFRA,
        target_error_causes=TARGET,
    )  # fmt: skip
    message = _bytes_trip(run_result_to_proto(result))
    assert [w.kind for w in message.warnings] == ["bad_records", "target_errors"]
    assert [c.kind for c in message.infra_error_causes] == ["connection"]
    assert [c.kind for c in message.target_error_causes] == ["http_403"]
    # Once: not again in the untyped details.
    for key in ("warnings", "infra_error_causes", "target_error_causes", "failures"):
        assert key not in message.details.fields, key
    back = run_from_proto(message)
    assert (back.warnings, back.infra_error_causes, back.target_error_causes) == (
        WARNINGS,
        INFRA,
        TARGET,
    )
    assert back.to_dict() == result.to_dict()


def test_a_run_from_an_older_server_is_read_from_its_details() -> None:
    message = run_service_pb2.Run(id="r1", kind="run", status="failed")
    details = {"warnings": WARNINGS, "infra_error_causes": INFRA, "target_error_causes": TARGET}
    message.details.CopyFrom(struct_to_proto(details))
    back = run_from_proto(message)
    assert back.warnings == WARNINGS
    assert back.infra_error_causes == INFRA
    assert back.target_error_causes == TARGET
    assert back.exit_code == 2  # failed: nothing could be judged
    assert message.exit_code == 0  # (this hand-built message never set it)
