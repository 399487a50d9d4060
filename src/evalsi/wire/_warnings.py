"""A run's warnings and failure causes to and from proto (``RunWarning``, ``FailureCause``).

Inside the process both are plain dicts, the shape ``--format json``, the stored summary and
``ScoreResult.warnings`` share: a warning ``{"kind", "message", "count", "examples"}``, a cause
``{"kind", "count", "example"}``. On the wire they are typed messages, so a client of any
language reads them without guessing at a ``Struct``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from evalsi._proto.evalsi.v1alpha1 import score_pb2


def warning_to_proto(warning: Mapping[str, Any]) -> score_pb2.RunWarning:
    return score_pb2.RunWarning(
        kind=str(warning.get("kind") or ""),
        message=str(warning.get("message") or ""),
        count=_count(warning.get("count")),
        examples=[str(e) for e in warning.get("examples") or ()],
    )


def warning_from_proto(message: score_pb2.RunWarning) -> dict[str, Any]:
    return {
        "kind": str(message.kind),
        "message": str(message.message),
        "count": int(message.count),
        "examples": [str(e) for e in message.examples],
    }


def cause_to_proto(cause: Mapping[str, Any]) -> score_pb2.FailureCause:
    return score_pb2.FailureCause(
        kind=str(cause.get("kind") or ""),
        count=_count(cause.get("count")),
        example=str(cause.get("example") or ""),
    )


def cause_from_proto(message: score_pb2.FailureCause) -> dict[str, Any]:
    return {"kind": str(message.kind), "count": int(message.count), "example": str(message.example)}


def warnings_from_proto(messages: Iterable[score_pb2.RunWarning]) -> list[dict[str, Any]]:
    return [warning_from_proto(m) for m in messages]


def causes_from_proto(messages: Iterable[score_pb2.FailureCause]) -> list[dict[str, Any]]:
    return [cause_from_proto(m) for m in messages]


def _count(value: Any) -> int:
    # A count read back from a JSON summary may be a float (1.0); anything else (a bool, a
    # string, a negative number) is not a count.
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        return 0
    return int(value)
