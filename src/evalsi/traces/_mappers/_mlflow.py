"""MLflow Tracing (``mlflow.start_span``, ``@mlflow.trace`` and the autologgers).

MLflow JSON-encodes every attribute value, strings included: ``mlflow.spanType`` arrives as
``'"CHAT_MODEL"'``. Inputs and outputs are ``mlflow.spanInputs`` / ``mlflow.spanOutputs``
(whatever the traced function took and returned; for chat models the provider's request and
response, e.g. OpenAI's ``{"messages": ...}`` and ``{"choices": ...}``). Token counts are in
``mlflow.chat.tokenUsage``, the model in ``mlflow.llm.model``.
"""

from __future__ import annotations

from typing import Any, Final

from evalsi.core import Span, SpanType, SpanView
from evalsi.traces._mappers._common import (
    Attrs,
    as_str,
    json_or_raw,
    openai_message,
    openai_messages,
    strings,
    tool_call,
    usage_of,
)

VERSION: Final = "mlflow/3"

_TYPES: Final[dict[str, SpanType]] = {
    "LLM": "llm",
    "CHAT_MODEL": "llm",
    "TOOL": "tool",
    "AGENT": "agent",
    "RETRIEVER": "retriever",
    "EMBEDDING": "embedding",
    "CHAIN": "chain",
    "PARSER": "chain",
    "RERANKER": "chain",
    "MEMORY": "chain",
    "EVALUATOR": "chain",
    "GUARDRAIL": "guardrail",
}


def _attr(attrs: Attrs, key: str) -> Any:
    return json_or_raw(attrs.get(key))


def map_span(span: Span) -> SpanView:
    attrs = span.attributes
    kind = _TYPES.get(as_str(_attr(attrs, "mlflow.spanType")).upper(), "generic")
    inputs = _attr(attrs, "mlflow.spanInputs")
    outputs = _attr(attrs, "mlflow.spanOutputs")
    v = SpanView(
        type=kind,
        convention=VERSION,
        name=span.name,
        input=inputs,
        output=outputs,
        session_id=as_str(_attr(attrs, "mlflow.trace.session") or attrs.get("session.id")),
        user_id=as_str(_attr(attrs, "mlflow.trace.user") or attrs.get("user.id")),
    )
    if kind == "llm":
        _llm(attrs, v, inputs, outputs)
    elif kind == "tool":
        v.tool_call = tool_call(span.name, inputs)
    elif kind == "retriever":
        # LangChain/MLflow ``Document`` dicts: ``page_content`` (or ``content``/``text``)
        docs = outputs if isinstance(outputs, list) else []
        v.documents = strings(docs, "page_content", "content", "text")
    elif kind == "embedding":
        v.model = as_str(_attr(attrs, "mlflow.llm.model"))
    return v


def _llm(attrs: Attrs, v: SpanView, inputs: Any, outputs: Any) -> None:
    model = _attr(attrs, "mlflow.llm.model")
    if not model and isinstance(inputs, dict):
        model = inputs.get("model")
    v.model = as_str(model)
    if isinstance(inputs, dict):
        messages = openai_messages(inputs.get("messages")) or openai_messages(inputs.get("input"))
        if messages is not None:
            v.input = messages
    if isinstance(outputs, dict):
        choices = outputs.get("choices")
        if isinstance(choices, list):
            said = [c.get("message") for c in choices if isinstance(c, dict)]
            v.output = openai_messages(said, "assistant") or outputs
        elif outputs.get("role") == "assistant":  # Anthropic-style message
            m = openai_message(outputs, "assistant")
            v.output = [m] if m is not None else outputs
    usage = _attr(attrs, "mlflow.chat.tokenUsage")
    cost = _attr(attrs, "mlflow.llm.cost")
    total_cost = cost.get("total_cost") if isinstance(cost, dict) else None
    if isinstance(usage, dict):
        v.usage = usage_of(
            usage.get("input_tokens"),
            usage.get("output_tokens"),
            usage.get("total_tokens"),
            total_cost,
        )
    elif isinstance(outputs, dict) and isinstance(outputs.get("usage"), dict):
        u = outputs["usage"]
        v.usage = usage_of(
            u.get("prompt_tokens", u.get("input_tokens")),
            u.get("completion_tokens", u.get("output_tokens")),
            u.get("total_tokens"),
            total_cost,
        )
