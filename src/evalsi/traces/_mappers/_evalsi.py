"""evalsi's own spans: the projection of an agent run's trajectory (``runs._telemetry``).

Model and tool calls follow the GenAI conventions and are read by that mapper; the steps GenAI
has no name for (``approval``, ``fault``, ``policy_block``, ``sandbox_denial``, and any other
kind a trajectory may hold) carry ``evalsi.step.kind`` with the step's name, input and output
(JSON) in ``evalsi.step.*``, read here. Which step kind each span is, where it sits in the
trajectory and why the task stopped are read when the record is built (``_records``).
"""

from __future__ import annotations

from typing import Final

from evalsi.core import Span, SpanView
from evalsi.traces._mappers import _genai
from evalsi.traces._mappers._common import as_str, json_or_raw

VERSION: Final = "evalsi/1"
KIND: Final = "evalsi.step.kind"


def map_span(span: Span) -> SpanView:
    attrs = span.attributes
    if "gen_ai.operation.name" in attrs:  # a model call, a tool call, the task: GenAI's
        return _genai.map_span(span)
    return SpanView(
        type="generic",
        convention=VERSION,
        name=as_str(attrs.get("evalsi.step.name")) or span.name,
        input=json_or_raw(attrs.get("evalsi.step.input")),
        output=json_or_raw(attrs.get("evalsi.step.output")),
    )
