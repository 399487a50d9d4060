"""Mapper choice, kind tables and the content forms the golden fixtures do not cover."""

from __future__ import annotations

import json
from typing import Any

import pytest

from evalsi.core import Span, SpanEvent, ToolCall
from evalsi.traces._mappers import CONVENTIONS, normalize, normalize_all
from evalsi.traces._mappers._common import as_count, indexed, usage_of


def span(attrs: dict[str, Any], events: list[SpanEvent] | None = None, name: str = "op") -> Span:
    return Span("a" * 32, "b" * 16, name=name, attributes=attrs, events=events or [])


def test_conventions_name_every_mapper_version() -> None:
    assert CONVENTIONS == (
        "otel-genai/1.37",
        "otel-genai/1.27",
        "otel-genai/1.26",
        "openinference/0",
        "openllmetry/0",
        "mlflow/3",
        "evalsi/1",
        "generic",
    )


@pytest.mark.parametrize(
    ("attrs", "convention"),
    [
        # Framework markers win over gen_ai.* attributes on the same span.
        ({"openinference.span.kind": "LLM", "gen_ai.operation.name": "chat"}, "openinference/0"),
        ({"mlflow.spanType": '"LLM"', "gen_ai.operation.name": "chat"}, "mlflow/3"),
        ({"llm.request.type": "chat", "gen_ai.system": "openai"}, "openllmetry/0"),
        ({"traceloop.span.kind": "task", "gen_ai.operation.name": "chat"}, "openllmetry/0"),
        ({"gen_ai.system": "openai", "gen_ai.request.model": "m"}, "otel-genai/1.27"),
        ({"http.route": "/x"}, "generic"),
        ({}, "generic"),
    ],
)
def test_mapper_choice(attrs: dict[str, Any], convention: str) -> None:
    assert normalize(span(attrs)).convention == convention


@pytest.mark.parametrize(
    ("op", "kind"),
    [
        ("chat", "llm"),
        ("text_completion", "llm"),
        ("generate_content", "llm"),
        ("embeddings", "embedding"),
        ("execute_tool", "tool"),
        ("invoke_agent", "agent"),
        ("create_agent", "agent"),
        ("something_new", "generic"),
    ],
)
def test_genai_operations(op: str, kind: str) -> None:
    assert normalize(span({"gen_ai.operation.name": op})).type == kind


def test_genai_unknown_operation_with_a_model_is_an_llm_call() -> None:
    v = normalize(span({"gen_ai.operation.name": "respond", "gen_ai.response.model": "m-1"}))
    assert (v.type, v.model, v.name) == ("llm", "m-1", "m-1")


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("LLM", "llm"),
        ("TOOL", "tool"),
        ("AGENT", "agent"),
        ("RETRIEVER", "retriever"),
        ("EMBEDDING", "embedding"),
        ("CHAIN", "chain"),
        ("GUARDRAIL", "guardrail"),
        ("RERANKER", "chain"),
        ("EVALUATOR", "chain"),
        ("UNKNOWN", "generic"),
        ("agent", "agent"),
    ],
)
def test_openinference_kinds(kind: str, expected: str) -> None:
    assert normalize(span({"openinference.span.kind": kind})).type == expected


@pytest.mark.parametrize(
    ("span_type", "expected"),
    [
        ('"LLM"', "llm"),
        ('"CHAT_MODEL"', "llm"),
        ('"TOOL"', "tool"),
        ('"AGENT"', "agent"),
        ('"RETRIEVER"', "retriever"),
        ('"EMBEDDING"', "embedding"),
        ('"PARSER"', "chain"),
        ('"GUARDRAIL"', "guardrail"),
        ('"UNKNOWN"', "generic"),
        ("CHAIN", "chain"),  # not JSON-encoded (another exporter): still read
    ],
)
def test_mlflow_types(span_type: str, expected: str) -> None:
    assert normalize(span({"mlflow.spanType": span_type})).type == expected


def test_genai_details_event_carries_the_137_messages() -> None:
    details = SpanEvent(
        "gen_ai.client.inference.operation.details",
        attributes={
            "gen_ai.input.messages": json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]
            ),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": "hello"}]}]
            ),
            "gen_ai.system_instructions": json.dumps("be brief"),
        },
    )
    v = normalize(span({"gen_ai.operation.name": "chat"}, [details]))
    assert v.convention == "otel-genai/1.37"
    assert v.input == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]
    assert v.output == [{"role": "assistant", "content": "hello"}]


def test_genai_137_structured_values_and_several_tool_responses() -> None:
    # A decoded AnyValue (list of maps) is read like the JSON string form.
    v = normalize(
        span(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": [
                    {
                        "role": "tool",
                        "parts": [
                            {"type": "tool_call_response", "id": "c1", "response": {"t": 1}},
                            {"type": "tool_call_response", "id": "c2", "response": "ok"},
                        ],
                    },
                    {"role": "user", "parts": [{"type": "image", "uri": "s3://x"}]},
                ],
            }
        )
    )
    assert v.input == [
        {"role": "tool", "content": '{"t":1}', "tool_call_id": "c1"},
        {"role": "tool", "content": "ok", "tool_call_id": "c2"},
        {"role": "user", "content": None},
    ]
    assert v.output is None


def test_genai_plain_prompt_and_completion_attributes() -> None:
    v = normalize(span({"gen_ai.system": "x", "gen_ai.prompt": "2+2?", "gen_ai.completion": "4"}))
    assert (v.input, v.output, v.convention) == ("2+2?", "4", "otel-genai/1.26")


def test_genai_127_assistant_and_tool_events() -> None:
    events = [
        SpanEvent(
            "gen_ai.assistant.message",
            attributes={
                "gen_ai.event.content": json.dumps(
                    {
                        "tool_calls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "f", "arguments": '{"a": 1}'},
                            }
                        ]
                    }
                )
            },
        ),
        SpanEvent("gen_ai.tool.message", attributes={"content": "42", "id": "c1"}),
        SpanEvent("gen_ai.choice", attributes={"message": json.dumps({"content": "done"})}),
    ]
    v = normalize(span({"gen_ai.operation.name": "chat"}, events))
    assert v.input == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "name": "f", "arguments": {"a": 1}}],
        },
        {"role": "tool", "content": "42", "tool_call_id": "c1"},
    ]
    assert v.output == [{"role": "assistant", "content": "done"}]


def test_openinference_llm_without_flattened_messages_reads_the_request() -> None:
    request = {"messages": [{"role": "user", "content": "hi"}], "model": "m"}
    v = normalize(
        span(
            {
                "openinference.span.kind": "LLM",
                "input.value": json.dumps(request),
                "input.mime_type": "application/json",
                "output.value": "hello",
            }
        )
    )
    assert v.input == [{"role": "user", "content": "hi"}]
    assert v.output == "hello"


def test_openinference_tool_call_attributes_and_embeddings() -> None:
    v = normalize(
        span(
            {
                "openinference.span.kind": "TOOL",
                "tool_call.function.name": "calc",
                "tool_call.function.arguments": '{"x": 2}',
                "tool_call.id": "t9",
                "input.value": "ignored when the call arguments are there",
            }
        )
    )
    assert v.tool_call == ToolCall("calc", {"x": 2}, "t9")
    e = normalize(
        span(
            {
                "openinference.span.kind": "EMBEDDING",
                "embedding.model_name": "emb-3",
                "embedding.embeddings.1.embedding.text": "b",
                "embedding.embeddings.0.embedding.text": "a",
                "embedding.embeddings.0.embedding.vector": [0.1, 0.2],
            }
        )
    )
    assert (e.type, e.name, e.input, e.output) == ("embedding", "emb-3", ["a", "b"], None)


def test_openllmetry_agent_and_entity_input_shapes() -> None:
    v = normalize(
        span(
            {
                "traceloop.span.kind": "agent",
                "traceloop.entity.name": "planner",
                "traceloop.entity.input": json.dumps({"args": ["a", "b"], "kwargs": {}}),
                "traceloop.entity.output": json.dumps({"plan": [1]}),
            }
        )
    )
    assert (v.type, v.name, v.input, v.output) == (
        "agent",
        "planner",
        {"args": ["a", "b"], "kwargs": {}},
        {"plan": [1]},
    )


def test_normalize_all_sets_views_and_a_mapper_crash_falls_back_to_generic() -> None:
    class Exploding(dict[str, Any]):
        def get(self, key: str, default: Any = None) -> Any:
            raise TypeError("boom")

    bad = span(Exploding({"gen_ai.operation.name": "chat"}), name="bad")
    good = span({"gen_ai.operation.name": "chat"})
    normalize_all([bad, good])
    assert bad.view is not None
    assert (bad.view.type, bad.view.name) == ("generic", "bad")
    assert good.view is not None
    assert good.view.type == "llm"


@pytest.mark.parametrize(
    ("raw", "count"),
    [
        (5, 5),
        (5.0, 5),
        ("12", 12),
        (-1, None),
        (2.5, None),
        ("x", None),
        (True, None),
        (float("nan"), None),
        ("9" * 40, None),
        ("١٢", None),
        (None, None),
    ],
)
def test_token_counts(raw: Any, count: int | None) -> None:
    assert as_count(raw) == count


def test_usage_of_nothing_is_none() -> None:
    assert usage_of(None, "junk", -3) is None
    u = usage_of(3, None, None, 0.5)
    assert u is not None
    assert (u.input_tokens, u.cost_usd) == (3, 0.5)


def test_indexed_groups_sparse_indices_in_order_and_ignores_junk() -> None:
    attrs = {
        "p.10.a": "ten",
        "p.2.a": "two",
        "p.x.a": "junk",
        "p.3": "no rest",
        "p.2.b.0.c": "nested",
        "other.0.a": "no",
    }
    assert indexed(attrs, "p.") == [{"a": "two", "b.0.c": "nested"}, {"a": "ten"}]
    assert indexed(attrs, "q.") == []
