"""Every hand-written fixture: each span's view and the trace's record match what was written
down by hand from the instrumentations' documented attribute shapes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evalsi.core import Content, message_to_dict
from evalsi.traces._mappers import CONVENTIONS, normalize, normalize_all
from evalsi.traces._records import trace_to_record
from tests.unit.traces.golden_support import (
    expected_view,
    fixture_files,
    load_cases,
    trace_of,
    usage_dict,
    view_dict,
)

CASES = [
    pytest.param(case, id=f"{path.stem}:{case['name']}")
    for path in fixture_files()
    for case in load_cases(path)
]


def test_every_convention_has_a_fixture() -> None:
    names = {p.stem for p in fixture_files()}
    assert {
        "genai_v137_attributes",
        "genai_v127_events",
        "genai_v126_content_events",
        "openinference",
        "openllmetry",
        "mlflow",
        "mixed_agent",
        "no_content",
        "malformed",
    } <= names


@pytest.mark.parametrize("case", CASES)
def test_views(case: dict[str, Any]) -> None:
    trace = trace_of(case)
    by_id = {s.span_id: s for s in trace.spans}
    assert case["expected_views"], "a fixture case must pin at least one view"
    for span_id, spec in case["expected_views"].items():
        got = view_dict(normalize(by_id[span_id]))
        assert got == expected_view(spec), span_id
        assert got["convention"] in CONVENTIONS


def _content_value(c: Content | None) -> Any:
    if c is None:
        return None
    if c.kind == "messages":
        return {"messages": [message_to_dict(m) for m in c.value]}
    return c.to_value()


@pytest.mark.parametrize("case", CASES)
def test_record(case: dict[str, Any]) -> None:
    exp = case["expected_record"]
    trace = trace_of(case)
    normalize_all(trace.spans)
    r = trace_to_record(trace)

    assert r.id == trace.trace_id
    assert _content_value(r.input) == exp["input"]
    assert _content_value(r.output) == exp["output"]
    assert [c.text for c in r.context] == exp.get("context", [])
    assert all(c.kind == "text" for c in r.context)

    assert r.trajectory is not None
    steps = r.trajectory.steps
    assert len(steps) == len(exp["steps"])
    for step, want in zip(steps, exp["steps"], strict=True):
        got = {
            "kind": step.kind,
            "name": step.name,
            "span_id": step.span_id,
            "error": step.error,
            "tool": step.tool_call.name if step.tool_call else None,
            "tool_arguments": step.tool_call.arguments if step.tool_call else None,
            "usage": usage_dict(step.usage),
        }
        assert {k: got[k] for k in want} == want

    want_usage = {
        "input_tokens": None,
        "output_tokens": None,
        "total_tokens": None,
        "cost_usd": None,
        **exp["usage"],
    }
    assert usage_dict(r.usage) == want_usage
    assert r.metadata == exp["metadata"]
    assert r.provenance is not None
    assert (r.provenance.source, r.provenance.trace_id, r.provenance.span_id) == (
        "trace",
        trace.trace_id,
        exp["root_span_id"],
    )


def test_fixture_dir_is_where_the_loader_looks() -> None:
    assert fixture_files(), "no fixtures found"
    assert all(isinstance(p, Path) for p in fixture_files())
