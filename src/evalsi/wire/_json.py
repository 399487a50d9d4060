"""JSON values and optional scalars between Python and ``google.protobuf`` messages."""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any, Literal

from google.protobuf import struct_pb2

from evalsi._proto.evalsi.v1alpha1 import evaluator_pb2, record_pb2, score_pb2
from evalsi.core import (
    JsonValue,
    Outcome,
    Scope,
    ScoreKind,
    StepKind,
)

ProvenanceSourceName = Literal["", "dataset", "run", "trace"]


# Largest magnitude below which every integer is exactly representable as a double.

_EXACT_INT_LIMIT = 2**53

_STEP_KIND_TO_PROTO: dict[StepKind, record_pb2.StepKind] = {
    "llm_call": record_pb2.STEP_KIND_LLM_CALL,
    "tool_call": record_pb2.STEP_KIND_TOOL_CALL,
    "retrieval": record_pb2.STEP_KIND_RETRIEVAL,
    "message": record_pb2.STEP_KIND_MESSAGE,
    "agent": record_pb2.STEP_KIND_AGENT,
    "embedding": record_pb2.STEP_KIND_EMBEDDING,
    "chain": record_pb2.STEP_KIND_CHAIN,
    "guardrail": record_pb2.STEP_KIND_GUARDRAIL,
    "other": record_pb2.STEP_KIND_OTHER,
}
_STEP_KIND_FROM_PROTO: dict[int, StepKind] = {v: k for k, v in _STEP_KIND_TO_PROTO.items()}

_SOURCE_TO_PROTO: dict[ProvenanceSourceName, record_pb2.ProvenanceSource] = {
    "": record_pb2.PROVENANCE_SOURCE_UNSPECIFIED,
    "dataset": record_pb2.PROVENANCE_SOURCE_DATASET,
    "run": record_pb2.PROVENANCE_SOURCE_RUN,
    "trace": record_pb2.PROVENANCE_SOURCE_TRACE,
}
_SOURCE_FROM_PROTO: dict[int, ProvenanceSourceName] = {v: k for k, v in _SOURCE_TO_PROTO.items()}

_SCORE_KIND_TO_PROTO: dict[ScoreKind, score_pb2.ScoreKind] = {
    "number": score_pb2.SCORE_KIND_NUMBER,
    "passed": score_pb2.SCORE_KIND_PASSED,
    "label": score_pb2.SCORE_KIND_LABEL,
    "structured": score_pb2.SCORE_KIND_STRUCTURED,
}
_SCORE_KIND_FROM_PROTO: dict[int, ScoreKind] = {v: k for k, v in _SCORE_KIND_TO_PROTO.items()}

_OUTCOME_TO_PROTO: dict[Outcome, score_pb2.Outcome] = {
    Outcome.SCORED: score_pb2.OUTCOME_SCORED,
    Outcome.SKIPPED: score_pb2.OUTCOME_SKIPPED,
    Outcome.ERROR: score_pb2.OUTCOME_ERROR,
    Outcome.CANCELLED: score_pb2.OUTCOME_CANCELLED,
}
# No entry for OUTCOME_UNSPECIFIED: an unset outcome has no safe reading (it would be miscounted).
_OUTCOME_FROM_PROTO: dict[int, Outcome] = {v: k for k, v in _OUTCOME_TO_PROTO.items()}

_SCOPE_TO_PROTO: dict[Scope, evaluator_pb2.Scope] = {
    Scope.RECORD: evaluator_pb2.SCOPE_RECORD,
    Scope.DATASET: evaluator_pb2.SCOPE_DATASET,
    Scope.SPAN: evaluator_pb2.SCOPE_SPAN,
    Scope.SESSION: evaluator_pb2.SCOPE_SESSION,
    Scope.COMPARATIVE: evaluator_pb2.SCOPE_COMPARATIVE,
}
_SCOPE_FROM_PROTO: dict[int, Scope] = {v: k for k, v in _SCOPE_TO_PROTO.items()}
# The schema documents an unset scope as the common case, a record-scope evaluator.
_SCOPE_FROM_PROTO[evaluator_pb2.SCOPE_UNSPECIFIED] = Scope.RECORD


# -- JSON values --------------------------------------------------------------------------------
def value_to_proto(value: JsonValue) -> struct_pb2.Value:
    """A JSON value (what ``json.loads`` returns; tuples are accepted as lists) as a ``Value``."""
    out = struct_pb2.Value()
    _set_value(out, value)
    return out


def value_from_proto(message: struct_pb2.Value) -> JsonValue:
    """The JSON value a ``Value`` holds; an unset ``Value`` reads as ``None``."""
    kind = message.WhichOneof("kind")
    if kind == "string_value":
        return str(message.string_value)
    if kind == "number_value":
        return _number_from_proto(float(message.number_value))
    if kind == "bool_value":
        return bool(message.bool_value)
    if kind == "struct_value":
        return struct_from_proto(message.struct_value)
    if kind == "list_value":
        return [value_from_proto(item) for item in message.list_value.values]
    return None


def struct_to_proto(mapping: Mapping[str, JsonValue]) -> struct_pb2.Struct:
    """A JSON object as a ``Struct``."""
    out = struct_pb2.Struct()
    _set_struct(out, mapping)
    return out


def struct_from_proto(message: struct_pb2.Struct) -> dict[str, JsonValue]:
    """The JSON object a ``Struct`` holds; an unset ``Struct`` reads as ``{}``."""
    return {str(key): value_from_proto(item) for key, item in message.fields.items()}


def _set_value(out: struct_pb2.Value, value: JsonValue) -> None:
    # bool before numbers: bool is an int subclass, and True must not become 1.0.
    if value is None:
        out.null_value = struct_pb2.NULL_VALUE
    elif isinstance(value, bool):
        out.bool_value = value
    elif isinstance(value, numbers.Integral):
        if abs(int(value)) > _EXACT_INT_LIMIT:
            raise ValueError(
                f"integer {value} does not fit a JSON number exactly (|n| > 2**53); "
                "send it as a string"
            )
        out.number_value = float(value)
    elif isinstance(value, numbers.Real):
        out.number_value = float(value)
    elif isinstance(value, str):
        out.string_value = value
    elif isinstance(value, Mapping):
        _set_struct(out.struct_value, value)
    elif isinstance(value, list | tuple):
        items = out.list_value
        items.SetInParent()  # an empty list is still a list, not an unset value
        for item in value:
            _set_value(items.values.add(), item)
    else:
        raise TypeError(f"not a JSON value: {type(value).__name__}")


def _set_struct(out: struct_pb2.Struct, mapping: Mapping[str, JsonValue]) -> None:
    out.SetInParent()
    for key, item in mapping.items():
        if not isinstance(key, str):
            raise TypeError(f"JSON object keys must be strings, got {type(key).__name__}")
        _set_value(out.fields[key], item)


def _set_value_map(out: Any, mapping: Mapping[str, JsonValue]) -> None:
    for key, item in mapping.items():
        _set_value(out[key], item)


def _value_map_from_proto(message_map: Any) -> dict[str, JsonValue]:
    return {str(key): value_from_proto(item) for key, item in message_map.items()}


def _number_from_proto(number: float) -> int | float:
    if number.is_integer() and abs(number) <= _EXACT_INT_LIMIT:
        return int(number)
    return number


# -- optional scalars ---------------------------------------------------------------------------
def _opt_int(message: Any, name: str) -> int | None:
    return int(getattr(message, name)) if message.HasField(name) else None


def _opt_float(message: Any, name: str) -> float | None:
    return float(getattr(message, name)) if message.HasField(name) else None


def _opt_bool(message: Any, name: str) -> bool | None:
    return bool(getattr(message, name)) if message.HasField(name) else None
