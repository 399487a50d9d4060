"""A trace's summary row built from its ``SpanRef``s (what assembly holds) says what the trace
and its record say: the same root, service, times, error, ids and input/output previews as
``Trace`` and ``trace_to_record`` give from the whole spans."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalsi.core import STATUS_ERROR, Span, Trace
from evalsi.store import TraceSummary, preview
from evalsi.traces._mappers import normalize_all
from evalsi.traces._records import to_content, trace_to_record
from evalsi.traces._refs import SpanRef, _preview, ref_of, summarize_refs
from tests.unit.traces.golden_support import fixture_files, load_cases, trace_of

CASES = [
    pytest.param(case, id=f"{path.stem}:{case['name']}")
    for path in fixture_files()
    for case in load_cases(path)
]


def _expected(trace: Trace) -> dict[str, Any]:
    """The summary fields, from the whole trace and its record (not from refs)."""
    record = trace_to_record(trace)
    root = trace.root
    user = record.metadata.get("user_id", "")
    return {
        "trace_id": trace.trace_id,
        "service": trace.service,
        "root_name": root.name if root is not None else "",
        "start_time_unix_nano": trace.start_time_unix_nano,
        "end_time_unix_nano": trace.end_time_unix_nano,
        "duration_ms": trace.duration_ms,
        "span_count": len(trace.spans),
        "error": trace.error,
        "session_id": trace.session_id,
        "user_id": user,
        "input_preview": preview(record.input.as_text()) if record.input is not None else "",
        "output_preview": preview(record.output.as_text()) if record.output is not None else "",
    }


def _got(summary: TraceSummary) -> dict[str, Any]:
    return {key: getattr(summary, key) for key in _expected(Trace("0" * 32))}


@pytest.mark.parametrize("case", CASES)
def test_golden_traces_summarise_from_refs_as_from_spans(case: dict[str, Any]) -> None:
    trace = trace_of(case)
    normalize_all(trace.spans)
    refs = [ref_of(s) for s in trace.spans]
    assert _got(summarize_refs(trace.project, trace.trace_id, refs)) == _expected(trace)


def test_a_ref_pickles_small_and_whole() -> None:
    span = Span(
        "a" * 32,
        "b" * 16,
        name="chat",
        attributes={"openinference.span.kind": "AGENT", "input.value": "hi" * 400},
    )
    ref = ref_of(span)
    assert pickle.loads(pickle.dumps(ref)) == ref
    assert isinstance(ref, SpanRef)
    assert ref.input_preview is not None
    assert len(ref.input_preview) <= 280  # a preview, not the content


_IDS = [f"{i:016x}" for i in range(1, 9)]
_ATTRS = st.sampled_from(
    [
        {},
        {"openinference.span.kind": "AGENT", "input.value": "ask", "output.value": "answer"},
        {"openinference.span.kind": "CHAIN", "input.value": "c-in", "output.value": "c-out"},
        {"openinference.span.kind": "LLM", "input.value": "prompt", "output.value": "reply"},
        {"openinference.span.kind": "LLM", "llm.token_count.prompt": 3},
        {"openinference.span.kind": "TOOL", "tool.name": "search", "input.value": "q"},
        {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "session.id": "s1"},
        {"openinference.span.kind": "AGENT", "user.id": "u7", "session.id": "s2"},
    ]
)


@st.composite
def _traces(draw: st.DrawFn) -> Trace:
    n = draw(st.integers(1, len(_IDS)))
    spans = []
    for i in range(n):
        # a parent among the earlier spans, none (a root), or one that never arrived
        parent = draw(st.sampled_from(["", "f" * 16, *_IDS[:i]]))
        start = draw(st.integers(0, 50))
        spans.append(
            Span(
                "c" * 32,
                _IDS[i],
                parent,
                name=f"s{i}",
                start_time_unix_nano=start,
                end_time_unix_nano=start + draw(st.integers(0, 50)),
                status_code=draw(st.sampled_from([0, 1, STATUS_ERROR])),
                attributes=dict(draw(_ATTRS)),
                resource=draw(st.sampled_from([{}, {"service.name": f"svc{i % 2}"}])),
            )
        )
    return Trace("c" * 32, "p", spans=spans)


@settings(max_examples=300, deadline=None)
@given(_traces())
def test_any_trace_summarises_from_refs_as_from_spans(trace: Trace) -> None:
    normalize_all(trace.spans)
    refs = [ref_of(s) for s in trace.spans]
    assert _got(summarize_refs("p", trace.trace_id, refs)) == _expected(trace)


_MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "tool", 7])},
    optional={
        "content": st.one_of(
            st.none(), st.text(max_size=400), st.integers(0, 9), st.lists(st.text())
        ),
        "tool_calls": st.sampled_from(
            [[], [{"function": {"name": "f", "arguments": "{}"}}], ["x"]]
        ),
        "name": st.text(max_size=3),
    },
)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=300),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=2)
    ),
    max_leaves=8,
)
_VALUES = st.one_of(
    _JSON,
    st.lists(_MESSAGE, max_size=4),
    st.lists(_MESSAGE, max_size=4).map(lambda m: {"messages": m}),
)


@settings(max_examples=500, deadline=None)
@given(_VALUES)
def test_the_preview_shortcut_says_what_the_content_says(value: Any) -> None:
    content = to_content(value)
    expected = None if content is None else preview(content.as_text())
    assert _preview(value) == expected
