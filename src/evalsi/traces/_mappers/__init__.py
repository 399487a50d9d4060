"""Semantic-convention mappers: read one span's attributes into a canonical ``SpanView``.

Each span is read by the first mapper whose marker attribute it carries (a few dict lookups,
checked in a fixed order so a span tagged by two instrumentations reads the same every time).
A span no mapper recognises gets a ``generic`` view; its raw attributes stay on the span.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from evalsi.core import Span, SpanView
from evalsi.traces._mappers import _evalsi, _genai, _mlflow, _openinference, _openllmetry
from evalsi.traces._mappers._common import generic

Mapper = Callable[[Span], SpanView]

CONVENTIONS: Final[tuple[str, ...]] = (
    _genai.V137,
    _genai.V127,
    _genai.V126,
    _openinference.VERSION,
    _openllmetry.VERSION,
    _mlflow.VERSION,
    _evalsi.VERSION,
    "generic",
)
"""Every ``SpanView.convention`` a mapper writes (convention name / version followed)."""

# The framework-specific markers come first: OpenInference, MLflow and OpenLLMetry spans can
# also carry ``gen_ai.*`` attributes, and their own markers say more. evalsi's own spans say
# most of all (their GenAI parts go to the GenAI mapper from there).
_MARKERS: Final[tuple[tuple[str, Mapper], ...]] = (
    (_evalsi.KIND, _evalsi.map_span),
    ("openinference.span.kind", _openinference.map_span),
    ("mlflow.spanType", _mlflow.map_span),
    ("traceloop.span.kind", _openllmetry.map_span),
    ("llm.request.type", _openllmetry.map_span),
    ("gen_ai.operation.name", _genai.map_span),
    ("gen_ai.request.model", _genai.map_span),
    ("gen_ai.provider.name", _genai.map_span),
    ("gen_ai.system", _genai.map_span),
    ("gen_ai.tool.name", _genai.map_span),
    ("gen_ai.agent.name", _genai.map_span),
)

# What a malformed value can make a mapper trip over. The mappers are written not to raise;
# this is the backstop that keeps one odd span from failing a whole export request.
_TOLERATED = (TypeError, ValueError, KeyError, AttributeError, IndexError, RecursionError)


def mapper_for(span: Span) -> Mapper | None:
    """The mapper that reads ``span``, or ``None`` for a span no convention recognises."""
    attrs = span.attributes
    for key, mapper in _MARKERS:
        if key in attrs:
            return mapper
    return None


def normalize(span: Span) -> SpanView:
    """The canonical view of one span (does not set ``span.view``; ``normalize_all`` does).

    Example:
        >>> from evalsi.core import Span
        >>> s = Span("a" * 32, "b" * 16, attributes={
        ...     "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
        ...     "gen_ai.usage.input_tokens": 12, "gen_ai.usage.output_tokens": 3})
        >>> v = normalize(s)
        >>> (v.type, v.model, v.usage.input_tokens, v.input)
        ('llm', 'gpt-4o', 12, None)
    """
    mapper = mapper_for(span)
    if mapper is None:
        return generic(span)
    try:
        return mapper(span)
    except _TOLERATED:
        return generic(span)


def normalize_all(spans: Iterable[Span]) -> None:
    """Set ``span.view`` on every span (at ingest, after redaction, before storing)."""
    for span in spans:
        span.view = normalize(span)


__all__ = ["CONVENTIONS", "mapper_for", "normalize", "normalize_all"]
