"""What the OTLP receiver hands decoded spans to, and how it is told to slow down."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple, Protocol

from evalsi.core import EvalsiError, Span, SpanEvent

if TYPE_CHECKING:
    from evalsi.traces._prepare import Batch


class Overloaded(EvalsiError):
    """Ingest is at its memory limit: the sender should retry after ``retry_after_s``.

    Receivers answer it as the OTLP spec says for retryable throttling (HTTP 429 or 503 with
    ``Retry-After``; gRPC ``UNAVAILABLE`` with a retry delay), so nothing accepted is dropped:
    a request is either taken whole or refused whole.
    """

    exit_code = 3

    def __init__(self, message: str, retry_after_s: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class SpanSink(Protocol):
    """Takes the spans of one export request (already decoded, not yet redacted or mapped).

    ``accept`` returns once the spans are durably stored (so a 200 means they survive a crash),
    or raises ``Overloaded`` having stored none of them.
    """

    async def accept(self, project: str, spans: Sequence[Span]) -> None: ...


class BatchSink(Protocol):
    """Takes requests an ingest worker decodes, prepares and stores (``Ingest``)."""

    def accept_stored(
        self, project: str, store: Callable[[], Awaitable[Batch]]
    ) -> asyncio.Future[Batch]: ...

    def keeps_rows(self, project: str) -> bool:
        """Whether ``store`` should return the rows it stored (``Batch.kept``)."""
        ...


class LoggedEvent(NamedTuple):
    """An event of a span that arrived as an OTLP log record (GenAI instrumentations send a
    call's messages this way), kept apart from the span and merged into it when read."""

    trace_id: str
    span_id: str
    event: SpanEvent


class EventSink(Protocol):
    """Takes the span events of one logs export request (decoded, not yet redacted).

    ``accept_events`` returns once they are durably stored, or raises ``Overloaded`` having
    stored none of them.
    """

    async def accept_events(self, project: str, events: Sequence[LoggedEvent]) -> None: ...
