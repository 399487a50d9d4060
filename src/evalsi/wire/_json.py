"""JSON values and optional scalars between Python and ``google.protobuf`` messages."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, TypeVar, get_args

from google.protobuf import struct_pb2, timestamp_pb2

from evalsi._proto.evalsi.v1alpha1 import evaluator_pb2, record_pb2, score_pb2
from evalsi.core import JsonValue, Outcome, Scope, ScoreKind, StepKind

ProvenanceSourceName = Literal["", "dataset", "run", "trace"]


# Largest magnitude below which every integer is exactly representable as a double.
_EXACT_INT_LIMIT = 2**53
NS = 1_000_000_000

K = TypeVar("K")
V = TypeVar("V", bound=int)
M = TypeVar("M")


def _enum_maps(keys: Iterable[K], enum: type[V], prefix: str) -> tuple[dict[K, V], dict[int, K]]:
    """Each key's member of a proto enum (``PREFIX_KEY``; ``""`` is the unspecified one), and
    back by number; a key the schema lacks fails at import."""
    to: dict[K, V] = {
        k: getattr(enum, f"{prefix}_{str(getattr(k, 'name', k) or 'unspecified').upper()}")
        for k in keys
    }
    return to, {v: k for k, v in to.items()}


_STEP_KINDS: tuple[StepKind, ...] = get_args(StepKind)
_SOURCES: tuple[ProvenanceSourceName, ...] = get_args(ProvenanceSourceName)
_SCORE_KINDS: tuple[ScoreKind, ...] = get_args(ScoreKind)
_STEP_KIND_TO_PROTO, _STEP_KIND_FROM_PROTO = _enum_maps(
    _STEP_KINDS, record_pb2.StepKind, "STEP_KIND"
)
_SOURCE_TO_PROTO, _SOURCE_FROM_PROTO = _enum_maps(
    _SOURCES, record_pb2.ProvenanceSource, "PROVENANCE_SOURCE"
)
_SCORE_KIND_TO_PROTO, _SCORE_KIND_FROM_PROTO = _enum_maps(
    _SCORE_KINDS, score_pb2.ScoreKind, "SCORE_KIND"
)
# No entry for OUTCOME_UNSPECIFIED: an unset outcome has no safe reading (it would be miscounted).
_OUTCOME_TO_PROTO, _OUTCOME_FROM_PROTO = _enum_maps(Outcome, score_pb2.Outcome, "OUTCOME")
_SCOPE_TO_PROTO, _SCOPE_FROM_PROTO = _enum_maps(Scope, evaluator_pb2.Scope, "SCOPE")
# The schema documents an unset scope as the common case, a record-scope evaluator.
_SCOPE_FROM_PROTO[evaluator_pb2.SCOPE_UNSPECIFIED] = Scope.RECORD


# -- JSON values --------------------------------------------------------------------------------
def value_to_proto(value: JsonValue) -> struct_pb2.Value:
    """A JSON value (what ``json.loads`` returns; tuples are accepted as lists) as a ``Value``."""
    return _filled(struct_pb2.Value(), _set_value, value)


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
    return _filled(struct_pb2.Struct(), _set_struct, mapping)


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


def message_document(message: Any) -> dict[str, Any]:
    """A spec message (an EvalRun, a policy) as the document its YAML would be: proto3 JSON,
    with every whole number of its ``Struct`` fields (evaluator params, a target's body) an
    integer again. ``Struct`` holds numbers as doubles, so ``max: 1`` would come back ``1.0``
    and an integer param would refuse it."""
    from google.protobuf import json_format

    return _whole(json_format.MessageToDict(message))  # type: ignore[no-any-return]


def _whole(value: Any) -> Any:
    if isinstance(value, float):
        return _number_from_proto(value) if math.isfinite(value) else value
    if isinstance(value, dict):
        return {k: _whole(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole(v) for v in value]
    return value


def _number_from_proto(number: float) -> int | float:
    if number.is_integer() and abs(number) <= _EXACT_INT_LIMIT:
        return int(number)
    return number


# -- fields and optional scalars ----------------------------------------------------------------
def _filled(out: M, fill: Callable[[M, K], None], value: K) -> M:
    """``out`` after ``fill(out, value)``: a ``_set_x`` as an ``x_to_proto``."""
    fill(out, value)
    return out


def _fields(obj: Any, names: Iterable[str]) -> dict[str, Any]:
    """The attributes ``names`` of ``obj``: the scalar fields a core type and its message share,
    copied by name both ways."""
    return {name: getattr(obj, name) for name in names}


def _set_fields(out: Any, obj: Any, names: Iterable[str]) -> None:
    """The attributes ``names`` of ``obj`` that are not None, set on the message ``out``."""
    for name, value in _fields(obj, names).items():
        if value is not None:
            setattr(out, name, value)


def _opt_fields(message: Any, names: Iterable[str]) -> dict[str, Any]:
    """The fields ``names`` of ``message``, None where an optional one is unset."""
    return {name: getattr(message, name) if message.HasField(name) else None for name in names}


def _known(table: Mapping[Any, M], key: Any, field: str, what: str) -> M:
    """``table[key]``, or a ``ValueError`` naming the field and the value it does not know."""
    found = table.get(key)
    if found is None:
        raise ValueError(f"{field} {key!r} is not a known {what}")
    return found


def _opt_float(message: Any, name: str) -> float | None:
    return float(getattr(message, name)) if message.HasField(name) else None


def _opt_bool(message: Any, name: str) -> bool | None:
    return bool(getattr(message, name)) if message.HasField(name) else None


# -- times --------------------------------------------------------------------------------------
def _set_seconds(out: timestamp_pb2.Timestamp, seconds: float) -> None:
    # Whole seconds and the fraction apart: ``seconds * 1e9`` would round a store's
    # ``1700000000.25`` to ...249999872 ns.
    whole = math.floor(seconds)
    out.seconds, out.nanos = divmod(whole * NS + round((seconds - whole) * NS), NS)


def timestamp(seconds: float | None) -> timestamp_pb2.Timestamp | None:
    """``seconds`` since the epoch as a ``Timestamp``; None stays None (an unset field)."""
    if seconds is None:
        return None
    out = timestamp_pb2.Timestamp()
    _set_seconds(out, seconds)
    return out


def _seconds_of(message: timestamp_pb2.Timestamp) -> float:
    return float(message.seconds) + float(message.nanos) / NS


def _opt_seconds(message: Any, name: str) -> float | None:
    return _seconds_of(getattr(message, name)) if message.HasField(name) else None
