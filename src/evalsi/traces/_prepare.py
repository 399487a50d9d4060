"""One export request's spans made ready for the store and for assembly: a ``Batch``.

``prepare`` runs the per-span work of ingest (redaction, the semantic-convention mappers, the
store's row encoding, the refs assembly keeps, feedback carried in span events). It is plain
and picklable on purpose: the server runs it either on its event loop or, with
``traces.ingestWorkers``, in worker processes that also store the rows and send back only the
batch without them, which is how ingest uses more than one core.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from evalsi.core import Feedback, Span
from evalsi.store import span_rows
from evalsi.traces._feedback import feedback_from_events
from evalsi.traces._mappers import normalize_all
from evalsi.traces._redact import Redactor
from evalsi.traces._refs import SpanRef, ref_of


@dataclass(slots=True)
class Batch:
    """The spans of one export request, prepared.

    ``rows`` are the span rows still to be stored; ``None`` once they are committed (a worker
    stored them). ``kept``: the rows a worker committed and sent back all the same, for
    assembly to hold (see ``traces._held``). ``rejected``/``error_message`` carry the
    decoder's partial success.
    """

    refs: list[SpanRef]
    rows: list[tuple[Any, ...]] | None
    feedback: list[Feedback] = field(default_factory=list)
    kept: list[tuple[Any, ...]] | None = None
    rejected: int = 0
    error_message: str = ""

    @property
    def spans(self) -> int:
        return len(self.refs)

    def __reduce__(self) -> tuple[Any, ...]:
        # Refs cross from an ingest worker as plain tuples: a NamedTuple pickles as a call per
        # ref, which cost ~14 µs a span in the worker and the server together; plain, ~5.
        plain = [tuple(r) for r in self.refs]
        return (
            _batch,
            (plain, self.rows, self.feedback, self.kept, self.rejected, self.error_message),
        )


def _batch(
    refs: list[tuple[Any, ...]],
    rows: list[tuple[Any, ...]] | None,
    feedback: list[Feedback],
    kept: list[tuple[Any, ...]] | None,
    rejected: int,
    error_message: str,
) -> Batch:
    return Batch(list(map(SpanRef._make, refs)), rows, feedback, kept, rejected, error_message)


def prepare(
    project: str,
    spans: Sequence[Span],
    redactor: Redactor,
    *,
    rejected: int = 0,
    error_message: str = "",
) -> Batch:
    """Redacts and normalises ``spans`` in place, then encodes them (nothing is stored)."""
    redactor.spans(spans)
    normalize_all(spans)
    return Batch(
        refs=[ref_of(s) for s in spans],
        rows=span_rows(project, spans) if spans else [],
        feedback=[fb for span in spans if span.events for fb in feedback_from_events(span)],
        rejected=rejected,
        error_message=error_message,
    )
