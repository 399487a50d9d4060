"""Whatever the attributes hold, mapping never raises: each mapper is called directly (not
through ``normalize``'s backstop), and the record of a trace of such spans is built."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from evalsi.core import Span, SpanEvent, Trace
from evalsi.traces._mappers import _genai, _mlflow, _openinference, _openllmetry, mapper_for
from evalsi.traces._records import trace_to_record

KEYS = [
    "gen_ai.operation.name",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "gen_ai.provider.name",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.prompt_tokens",
    "gen_ai.usage.total_tokens",
    "gen_ai.tool.name",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "gen_ai.tool.call.id",
    "gen_ai.agent.name",
    "gen_ai.conversation.id",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.prompt",
    "gen_ai.completion",
    "gen_ai.prompt.0.role",
    "gen_ai.prompt.0.content",
    "gen_ai.prompt.1.tool_calls.0.name",
    "gen_ai.completion.0.content",
    "gen_ai.completion.0.tool_calls.0.arguments",
    "openinference.span.kind",
    "input.value",
    "input.mime_type",
    "output.value",
    "llm.model_name",
    "llm.token_count.prompt",
    "llm.input_messages.0.message.role",
    "llm.input_messages.0.message.content",
    "llm.input_messages.0.message.contents.0.message_content.text",
    "llm.input_messages.1.message.tool_calls.0.tool_call.function.arguments",
    "llm.output_messages.0.message.role",
    "llm.output_messages.0.message",
    "retrieval.documents.0.document.content",
    "retrieval.documents.x.document.content",
    "embedding.embeddings.0.embedding.text",
    "tool.name",
    "tool_call.function.arguments",
    "session.id",
    "traceloop.span.kind",
    "traceloop.entity.input",
    "traceloop.entity.output",
    "llm.request.type",
    "traceloop.association.properties.session_id",
    "mlflow.spanType",
    "mlflow.spanInputs",
    "mlflow.spanOutputs",
    "mlflow.chat.tokenUsage",
    "mlflow.llm.cost",
]
EVENT_NAMES = [
    "gen_ai.user.message",
    "gen_ai.choice",
    "gen_ai.tool.message",
    "gen_ai.content.prompt",
    "gen_ai.client.inference.operation.details",
    "exception",
]
EVENT_KEYS = [
    "content",
    "message",
    "tool_calls",
    "id",
    "role",
    "gen_ai.event.content",
    "event.body",
    "gen_ai.prompt",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
    | st.sampled_from(["user", "assistant", "text", "tool_call", "tool_call_response", "LLM"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    *("role", "content", "parts", "type", "message", "tool_calls", "function"),
                    *("name", "arguments", "id", "response", "messages", "choices", "args"),
                    *("kwargs", "text"),
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)
any_value = (
    json_values
    | json_values.map(json.dumps)
    | st.binary(max_size=8)
    | st.floats()
    | st.sampled_from(["LLM", "TOOL", "chat", "execute_tool", '"AGENT"', "tool", "-3", "12"])
)
keys = st.sampled_from(KEYS) | st.text(max_size=12)
attrs = st.dictionaries(keys, any_value, max_size=8)
events = st.lists(
    st.builds(
        SpanEvent,
        name=st.sampled_from(EVENT_NAMES),
        attributes=st.dictionaries(st.sampled_from(EVENT_KEYS), any_value, max_size=3),
    ),
    max_size=3,
)


def _span(a: dict[str, Any], ev: list[SpanEvent], parent: str = "") -> Span:
    return Span("a" * 32, "b" * 16, parent, name="s", attributes=a, events=ev)


@settings(max_examples=400, deadline=None)
@given(attrs, events)
@example({"mlflow.spanType": '"TOOL"', "mlflow.spanOutputs": '""', "mlflow.spanInputs": ""}, [])
@example({"traceloop.span.kind": "task", "traceloop.entity.output": '""'}, [])
@example({"openinference.span.kind": "CHAIN", "input.value": "", "output.value": ""}, [])
def test_no_mapper_raises(a: dict[str, Any], ev: list[SpanEvent]) -> None:
    span = _span(a, ev)
    for mapper in (
        _genai.map_span,
        _openinference.map_span,
        _openllmetry.map_span,
        _mlflow.map_span,
    ):
        view = mapper(span)
        # No content is None, never an empty string.
        assert view.input != ""
        assert view.output != ""
        if view.usage is not None:
            for n in (view.usage.input_tokens, view.usage.output_tokens, view.usage.total_tokens):
                assert n is None or (type(n) is int and n >= 0)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(attrs, events), min_size=1, max_size=4))
def test_record_of_arbitrary_spans(items: list[tuple[dict[str, Any], list[SpanEvent]]]) -> None:
    spans = [
        Span("c" * 32, f"{i + 1:016x}", "" if i == 0 else f"{i:016x}", attributes=a, events=ev)
        for i, (a, ev) in enumerate(items)
    ]
    record = trace_to_record(Trace("c" * 32, spans=spans))
    assert record.trajectory is not None
    assert len(record.trajectory.steps) == len(spans)
    assert all(s.view is not None for s in spans)
    assert mapper_for(spans[0]) is None or spans[0].view is not None
