"""Load the hand-written trace fixtures in ``tests/fixtures/traces/`` and compare against them.

A fixture file holds ``cases``; each case has the spans (as an OTLP decoder would build them),
optional feedback, the expected view of some spans (by span id; unnamed view fields must hold
their defaults) and the expected record.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from evalsi.core import Feedback, Span, SpanEvent, SpanView, Trace, Usage

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "traces"

_VIEW_DEFAULTS: dict[str, Any] = {
    "type": "generic",
    "convention": "generic",
    "name": "",
    "model": "",
    "input": None,
    "output": None,
    "tool_call": None,
    "documents": [],
    "usage": None,
    "session_id": "",
    "user_id": "",
}


def fixture_files() -> list[Path]:
    return sorted(FIXTURES.glob("*.json"))


def load_cases(path: Path) -> list[dict[str, Any]]:
    doc = orjson.loads(path.read_bytes())
    return list(doc["cases"])


def span_of(data: dict[str, Any]) -> Span:
    events = [
        SpanEvent(e["name"], e.get("time_unix_nano", 0), dict(e.get("attributes", {})))
        for e in data.get("events", [])
    ]
    return Span(
        trace_id=data["trace_id"],
        span_id=data["span_id"],
        parent_span_id=data.get("parent_span_id", ""),
        name=data.get("name", ""),
        kind=data.get("kind", 0),
        start_time_unix_nano=data.get("start_time_unix_nano", 0),
        end_time_unix_nano=data.get("end_time_unix_nano", 0),
        status_code=data.get("status_code", 0),
        status_message=data.get("status_message", ""),
        attributes=dict(data.get("attributes", {})),
        events=events,
        resource=dict(data.get("resource", {})),
        scope_name=data.get("scope_name", ""),
    )


def trace_of(case: dict[str, Any]) -> Trace:
    spans = [span_of(s) for s in case["spans"]]
    feedback = [Feedback(**f) for f in case.get("feedback", [])]
    return Trace(spans[0].trace_id, spans=spans, feedback=feedback)


def usage_dict(u: Usage | None) -> dict[str, Any] | None:
    if u is None:
        return None
    return {
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens,
        "total_tokens": u.total_tokens,
        "cost_usd": u.cost_usd,
        "latency_ms": u.latency_ms,
    }


def _usage_expected(value: dict[str, Any] | None) -> dict[str, Any] | None:
    if value is None:
        return None
    full: dict[str, Any] = dict.fromkeys(
        ("input_tokens", "output_tokens", "total_tokens", "cost_usd", "latency_ms")
    )
    full.update(value)
    return full


def view_dict(v: SpanView) -> dict[str, Any]:
    return {
        "type": v.type,
        "convention": v.convention,
        "name": v.name,
        "model": v.model,
        "input": v.input,
        "output": v.output,
        "tool_call": None
        if v.tool_call is None
        else {"name": v.tool_call.name, "arguments": v.tool_call.arguments, "id": v.tool_call.id},
        "documents": v.documents,
        "usage": usage_dict(v.usage),
        "session_id": v.session_id,
        "user_id": v.user_id,
    }


def expected_view(spec: dict[str, Any]) -> dict[str, Any]:
    full = dict(_VIEW_DEFAULTS)
    full.update(spec)
    if full["tool_call"] is not None:
        full["tool_call"] = {"id": "", "arguments": None, **full["tool_call"]}
    full["usage"] = _usage_expected(full["usage"])
    return full
