"""``trace_to_record``: which span speaks for the trace, token sums, steps, metadata."""

from __future__ import annotations

from typing import Any

from evalsi.core import Content, Feedback, Message, Span, ToolCall, Trace
from evalsi.traces._records import to_content, trace_to_record

TID = "f" * 32


def span(
    sid: int,
    parent: int = 0,
    start: int = 0,
    end: int = 10,
    status: int = 0,
    message: str = "",
    **attrs: Any,
) -> Span:
    return Span(
        TID,
        f"{sid:016x}",
        f"{parent:016x}" if parent else "",
        name=f"span{sid}",
        start_time_unix_nano=start,
        end_time_unix_nano=end,
        status_code=status,
        status_message=message,
        attributes={k.replace("__", "."): v for k, v in attrs.items()},
    )


def oi(kind: str, sid: int, parent: int = 0, start: int = 0, **attrs: Any) -> Span:
    return span(sid, parent, start, openinference__span__kind=kind, **attrs)


def llm(sid: int, parent: int, start: int, prompt: int, completion: int, text: str = "") -> Span:
    extra = {}
    if text:
        extra = {
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": text,
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": f"q{sid}",
        }
    s = oi("LLM", sid, parent, start, llm__token_count__prompt=prompt)
    s.attributes["llm.token_count.completion"] = completion
    s.attributes.update(extra)
    return s


def test_generic_root_defers_to_the_outermost_agent_or_chain() -> None:
    root = span(1, http__route="/chat")
    inner_chain = oi("CHAIN", 3, 2, 2, input__value="inner in", output__value="inner out")
    agent = oi("AGENT", 2, 1, 1, input__value="agent in", output__value="agent out")
    r = trace_to_record(Trace(TID, spans=[inner_chain, root, agent]))
    assert r.input == Content.of_text("agent in")
    assert r.output == Content.of_text("agent out")
    assert r.provenance is not None
    assert r.provenance.span_id == f"{1:016x}"


def test_root_with_content_wins_over_agents() -> None:
    root = oi("CHAIN", 1, input__value="root in", output__value="root out")
    agent = oi("AGENT", 2, 1, 1, input__value="agent in", output__value="agent out")
    r = trace_to_record(Trace(TID, spans=[agent, root]))
    assert (r.input, r.output) == (Content.of_text("root in"), Content.of_text("root out"))


def test_without_agent_content_first_llm_input_and_last_llm_output() -> None:
    root = oi("AGENT", 1)  # content not captured on the agent span
    first = llm(2, 1, 1, 5, 1, text="first answer")
    last = llm(3, 1, 5, 7, 2, text="last answer")
    r = trace_to_record(Trace(TID, spans=[last, root, first]))
    assert r.input == Content.of_messages([Message("user", "q2")])
    assert r.output == Content.of_messages([Message("assistant", "last answer")])
    assert r.output is not None
    assert r.output.as_text() == "last answer"


def test_tokens_sum_over_llm_calls_and_a_wrapped_call_counts_once() -> None:
    # Same start time for the wrapper and the wrapped span: the sort puts the shorter (inner)
    # one first, and it must still not be counted twice.
    root = oi("AGENT", 1, end=100)
    wrapper = llm(2, 1, 10, 100, 20)
    wrapper.end_time_unix_nano = 50
    inner = llm(3, 2, 10, 100, 20)
    inner.end_time_unix_nano = 40
    other = llm(4, 1, 60, 7, 3)
    embed = oi("EMBEDDING", 5, 1, 70, llm__token_count__prompt=1000)
    r = trace_to_record(Trace(TID, spans=[root, wrapper, inner, other, embed]))
    assert r.usage is not None
    assert (r.usage.input_tokens, r.usage.output_tokens, r.usage.total_tokens) == (107, 23, 130)
    assert r.usage.latency_ms == 100 / 1e6
    # Every call is still a step.
    assert r.trajectory is not None
    assert [s.kind for s in r.trajectory.steps] == [
        "agent",
        "llm_call",
        "llm_call",
        "llm_call",
        "embedding",
    ]


def test_no_token_counts_leaves_token_fields_unknown() -> None:
    r = trace_to_record(Trace(TID, spans=[oi("LLM", 1, end=2_000_000)]))
    assert r.usage is not None
    assert (r.usage.input_tokens, r.usage.output_tokens, r.usage.total_tokens) == (
        None,
        None,
        None,
    )
    assert r.usage.latency_ms == 2.0
    assert not r.has("usage.tokens")
    assert r.has("usage.latency_ms")


def test_steps_carry_errors_tool_calls_and_times() -> None:
    root = oi("AGENT", 1, end=50)
    tool = span(
        2,
        1,
        5,
        9,
        status=2,
        gen_ai__operation__name="execute_tool",
        gen_ai__tool__name="search",
        gen_ai__tool__call__arguments='{"q": "x"}',
    )
    silent_fail = span(3, 1, 10, 12, status=2, openinference__span__kind="GUARDRAIL")
    r = trace_to_record(Trace(TID, spans=[root, tool, silent_fail]))
    assert r.trajectory is not None
    _, t, g = r.trajectory.steps
    assert (t.kind, t.error, t.start_time_unix_nano, t.end_time_unix_nano) == (
        "tool_call",
        "error",
        5,
        9,
    )
    assert t.tool_call == ToolCall("search", {"q": "x"})
    assert (g.kind, g.error) == ("guardrail", "error")
    assert r.metadata["trace_error"] is True


def test_context_is_every_retrieved_document_in_order() -> None:
    later = oi("RETRIEVER", 3, 1, 20)
    later.attributes["retrieval.documents.0.document.content"] = "c"
    earlier = oi("RETRIEVER", 2, 1, 10)
    earlier.attributes["retrieval.documents.1.document.content"] = "b"
    earlier.attributes["retrieval.documents.0.document.content"] = "a"
    r = trace_to_record(Trace(TID, spans=[later, oi("AGENT", 1), earlier]))
    assert r.context == [Content.of_text("a"), Content.of_text("b"), Content.of_text("c")]


def test_feedback_and_identity_metadata() -> None:
    root = oi("AGENT", 1, session__id="s1", user__id="u1")
    root.resource["service.name"] = "svc"
    feedback = [
        Feedback(trace_id=TID, name="thumbs", value=1.0),
        Feedback(trace_id=TID, name="topic", label="billing"),
    ]
    r = trace_to_record(Trace(TID, project="p", spans=[root], feedback=feedback))
    assert r.metadata == {
        "session_id": "s1",
        "user_id": "u1",
        "service": "svc",
        "project": "p",
        "trace_error": False,
        "content_captured": False,
        "feedback_negative": False,
        "feedback": [
            {"name": "thumbs", "value": 1.0, "label": ""},
            {"name": "topic", "value": None, "label": "billing"},
        ],
    }
    r2 = trace_to_record(
        Trace(TID, spans=[oi("AGENT", 1)], feedback=[Feedback(trace_id=TID, value=-1.0)])
    )
    assert r2.metadata["feedback_negative"] is True


def test_views_are_computed_when_ingest_did_not() -> None:
    s = oi("TOOL", 1, tool__name="calc", input__value='{"x": 1}')
    assert s.view is None
    trace_to_record(Trace(TID, spans=[s]))
    assert s.view is not None
    assert s.view.tool_call == ToolCall("calc", {"x": 1})


def test_empty_trace_and_parent_cycles_do_not_hang_or_fail() -> None:
    empty = trace_to_record(Trace(TID))
    assert (empty.input, empty.output, empty.usage) == (None, None, empty.usage)
    assert empty.trajectory is not None
    assert empty.trajectory.steps == []
    a = llm(1, 2, 0, 1, 1)
    b = llm(2, 1, 1, 2, 2)  # a and b are each other's parent: no root at all
    r = trace_to_record(Trace(TID, spans=[a, b]))
    assert r.provenance is not None
    assert r.provenance.span_id == ""
    assert r.usage is not None
    assert r.usage.input_tokens in (1, 2, 3)


def test_to_content_kinds() -> None:
    assert to_content(None) is None
    assert to_content("hi") == Content.of_text("hi")
    assert to_content({"a": 1}) == Content.of_json({"a": 1})
    assert to_content([1, 2]) == Content.of_json([1, 2])
    assert to_content([]) == Content.of_json([])
    assert to_content({"messages": [{"role": "user", "content": "q"}]}) == Content.of_messages(
        [Message("user", "q")]
    )
    assert to_content({"messages": []}) == Content.of_json({"messages": []})
    assert to_content(
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c", "name": "f", "arguments": {}}],
            }
        ]
    ) == Content.of_messages([Message("assistant", None, [ToolCall("f", {}, "c")])])
    # A list that looks like messages but is not usable as such stays JSON.
    odd = [{"role": "user", "tool_calls": ["not a call"]}]
    assert to_content(odd) == Content.of_json(odd)


def test_a_deep_chain_of_nested_llm_spans_counts_the_outermost_once() -> None:
    """5,000 LLM spans each wrapping the next (a pathological but legal trace): tokens are the
    outermost span's, and building the record stays linear (it used to walk every chain)."""
    from evalsi.core import Span, SpanView, Trace, Usage
    from evalsi.traces._records import trace_to_record

    n = 5000
    spans = [
        Span(
            "ab" * 16,
            f"{i + 1:016x}",
            f"{i:016x}" if i else "",
            name=f"llm-{i}",
            start_time_unix_nano=i,
            end_time_unix_nano=2 * n - i,
            view=SpanView(type="llm", usage=Usage(input_tokens=10 + i, output_tokens=1)),
        )
        for i in range(n)
    ]
    record = trace_to_record(Trace("ab" * 16, spans=spans[::-1]))
    assert record.usage is not None
    assert (record.usage.input_tokens, record.usage.output_tokens) == (10, 1)
    assert len(record.trajectory.steps) == n  # type: ignore[union-attr]
