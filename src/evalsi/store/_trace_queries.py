"""The read side of the trace tables: listings with keyset paging, one trace, sessions,
feedback (``TraceStore`` in ``_traces.py`` adds the writes and retention).

Spans read (one trace, listings) get the events stored apart from them (``span_events``: OTLP
log records of a span) merged into their ``events`` by time, and only then their view.

Listings are newest first and page by a keyset (the last row's sort key, in an opaque
``page_token``), so rows arriving meanwhile never shift a page. Attribute filters read the
JSON text columns (``json_extract`` on SQLite, ``jsonb`` on PostgreSQL) of the spans of each
candidate trace, found through the primary key.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import orjson
import sqlalchemy as sa

from evalsi.core import (
    Feedback,
    SessionSummary,
    Span,
    SpanEvent,
    SpanView,
    Trace,
    TraceSummary,
    UserError,
)
from evalsi.store._schema import span_events, spans, trace_feedback, traces
from evalsi.store._trace_rows import (
    READ_COLUMNS,
    span_events_from_rows,
    span_from_row,
    span_order,
    spans_from_rows,
)

MAX_PAGE = 1000
"""The most rows one query returns."""
MAX_ATTRIBUTE_FILTERS = 8


class TraceQueries:
    """The queries of ``TraceStore`` (which sets ``engine``, ``_pg`` and ``views``)."""

    engine: sa.Engine
    _pg: bool
    views: Callable[[Span], SpanView] | None

    def _finish(
        self, conn: sa.Connection, project: str, found: list[Span], trace_id: str | None = None
    ) -> None:
        """Merge the events stored apart (``span_events``) into their spans, then build the
        views, which read the events. One query: by ``trace_id`` when the spans are of one
        trace, else by the spans' trace ids. Events of a span not among ``found`` are left."""
        if not found:
            return
        e = span_events.c
        query = sa.select(e.trace_id, e.span_id, e.name, e.time_ns, e.attributes, e.seq)
        query = query.where(e.project_id == project)
        ids: dict[str, list[str]] = {}
        if trace_id is not None:
            query = query.where(e.trace_id == trace_id)
        else:
            query = query.where(e.trace_id.in_(sa.bindparam("ids", expanding=True)))
            ids["ids"] = sorted({span.trace_id for span in found})
        by_span = {(span.trace_id, span.span_id): span for span in found}
        merged: set[tuple[str, str]] = set()
        # by time, then arrival: events of one time in the order they were sent (sorted here:
        # an ORDER BY time could tempt SQLite into the (project, time) index, away from the key's)
        rows = sorted(conn.execute(query, ids), key=lambda r: (r.time_ns or r.seq, r.seq))
        for t, s, event in span_events_from_rows(rows):
            span = by_span.get((t, s))
            if span is not None:
                span.events.append(event)
                merged.add((t, s))
        for key in merged:
            # stable: at one time the span's own events come first, then those sent apart
            by_span[key].events.sort(key=_event_time)
        for span in found:
            # a view stored before schema 5 is stale once events were merged into its span
            if self.views is not None and (
                span.view is None or (span.trace_id, span.span_id) in merged
            ):
                span.view = self.views(span)

    def list_traces(
        self,
        project: str,
        *,
        service: str | None = None,
        since_ns: int | None = None,
        until_ns: int | None = None,
        session_id: str | None = None,
        error: bool | None = None,
        attributes: Mapping[str, str] | None = None,
        name: str | None = None,
        limit: int = 50,
        page_token: str = "",
    ) -> tuple[list[TraceSummary], str]:
        """Summaries newest first (by start time), and the next page's token ("" at the end).

        ``since_ns``/``until_ns`` bound the start time (inclusive/exclusive); ``name`` is the
        root span's name; ``attributes`` match when SOME span of the trace has each key equal
        to the value (as text), in its attributes or its resource's.
        """
        _check_limit(limit)
        t = traces.c
        cols = [c for c in traces.c if c.name not in ("project_id", "tenant_id", "record")]
        query = sa.select(*cols).where(t.project_id == project)
        if service is not None:
            query = query.where(t.service == service)
        if session_id is not None:
            query = query.where(t.session_id == session_id)
        if error is not None:
            query = query.where(t.error == int(error))
        if name is not None:
            query = query.where(t.root_name == name)
        query = _time_range(query, t.start_ns, since_ns, until_ns)
        for key, value in _attribute_filters(attributes):
            matches = sa.or_(
                self._attr(spans.c.attributes, key) == value,
                self._attr(spans.c.resource, key) == value,
            )
            query = query.where(
                sa.exists()
                .where(spans.c.project_id == t.project_id)
                .where(spans.c.trace_id == t.trace_id)
                .where(matches)
            )
        if page_token:
            start, trace_id = _read_token(page_token, "t", (int, str))
            query = query.where(sa.tuple_(t.start_ns, t.trace_id) < sa.tuple_(start, trace_id))
        query = query.order_by(t.start_ns.desc(), t.trace_id.desc()).limit(limit + 1)
        with self.engine.connect() as conn:
            found = [_summary(row) for row in conn.execute(query).mappings()]
        token = ""
        if len(found) > limit:
            found = found[:limit]
            token = _token("t", found[-1].start_time_unix_nano, found[-1].trace_id)
        return found, token

    def trace_summary(self, project: str, trace_id: str) -> TraceSummary | None:
        """A trace's summary row with its record, or None before the assembler wrote it."""
        query = sa.select(traces).where(traces.c.project_id == project)
        query = query.where(traces.c.trace_id == trace_id)
        with self.engine.connect() as conn:
            row = conn.execute(query).mappings().first()
        return _summary(row, with_record=True) if row is not None else None

    def get_trace(self, project: str, trace_id: str) -> Trace | None:
        """The stored spans of a trace (views rebuilt, by start time) with its feedback; None
        when no span of it is stored."""
        query = (
            sa.select(*(spans.c[c] for c in READ_COLUMNS))
            .where(spans.c.project_id == project)
            .where(spans.c.trace_id == trace_id)
        )
        with self.engine.connect() as conn:
            found = [span_from_row(row) for row in conn.execute(query)]
            self._finish(conn, project, found, trace_id)
        if not found:
            return None
        # sorted here: an ORDER BY would tempt SQLite into the (project, start) index instead
        # of the primary key's (project, trace)
        found.sort(key=span_order)
        return Trace(
            trace_id, project=project, spans=found, feedback=self.feedback_for(project, trace_id)
        )

    def get_traces(self, project: str, trace_ids: Sequence[str]) -> dict[str, Trace]:
        """``get_trace`` for many traces at once (a query for their spans, one for their
        events, one for their feedback): those with no span stored are left out."""
        ids = sorted(set(trace_ids))
        if not ids:
            return {}
        query = (
            sa.select(*(spans.c[c] for c in READ_COLUMNS))
            .where(spans.c.project_id == project)
            .where(spans.c.trace_id.in_(sa.bindparam("ids", expanding=True)))
        )
        with self.engine.connect() as conn:
            found = [span_from_row(row) for row in conn.execute(query, {"ids": ids})]
            self._finish(conn, project, found)
        by_trace: dict[str, list[Span]] = {}
        for span in found:
            by_trace.setdefault(span.trace_id, []).append(span)
        feedback = self.feedback_for_traces(project, list(by_trace))
        out: dict[str, Trace] = {}
        for trace_id, spans_of in by_trace.items():
            spans_of.sort(key=span_order)
            out[trace_id] = Trace(
                trace_id, project=project, spans=spans_of, feedback=feedback.get(trace_id, [])
            )
        return out

    def trace_from_rows(
        self,
        project: str,
        trace_id: str,
        rows: Sequence[Sequence[Any]],
        feedback: Sequence[Feedback] = (),
    ) -> Trace:
        """The trace ``get_trace`` would read, built from span rows held in memory since they
        were written (``span_rows``): the same decoding and views, no query. Events stored
        apart are not merged (a trace that has some is read back instead)."""
        found = spans_from_rows(rows, pg=self._pg)
        if self.views is not None:
            for span in found:
                span.view = self.views(span)
        return Trace(trace_id, project=project, spans=found, feedback=list(feedback))

    def list_spans(
        self,
        project: str,
        *,
        trace_id: str | None = None,
        type: str | None = None,
        name: str | None = None,
        service: str | None = None,
        since_ns: int | None = None,
        until_ns: int | None = None,
        error: bool | None = None,
        limit: int = 50,
        page_token: str = "",
    ) -> tuple[list[Span], str]:
        """Spans newest first (by start time) and the next page's token. ``name`` matches the
        span's name or its view's (the model, tool, agent... name)."""
        _check_limit(limit)
        s = spans.c
        query = sa.select(*(s[c] for c in READ_COLUMNS)).where(s.project_id == project)
        if trace_id is not None:
            query = query.where(s.trace_id == trace_id)
        if type is not None:
            query = query.where(s.type == type)
        if name is not None:
            query = query.where(sa.or_(s.name == name, s.view_name == name))
        if service is not None:
            query = query.where(s.service == service)
        if error is not None:
            query = query.where(s.status == 2 if error else s.status != 2)
        query = _time_range(query, s.start_ns, since_ns, until_ns)
        if page_token:
            key = _read_token(page_token, "s", (int, str, str))
            query = query.where(sa.tuple_(s.start_ns, s.trace_id, s.span_id) < sa.tuple_(*key))
        # "+ 0" when one trace is asked: its primary-key lookup beats walking the (project,
        # start) index in order, which SQLite (without statistics) would otherwise prefer
        start = s.start_ns + 0 if trace_id is not None else s.start_ns
        order = (start.desc(), s.trace_id.desc(), s.span_id.desc())
        query = query.order_by(*order).limit(limit + 1)
        token = ""
        with self.engine.connect() as conn:
            found = [span_from_row(row) for row in conn.execute(query)]
            if len(found) > limit:
                found = found[:limit]
                last = found[-1]
                token = _token("s", last.start_time_unix_nano, last.trace_id, last.span_id)
            self._finish(conn, project, found, trace_id)
        return found, token

    def list_sessions(
        self,
        project: str,
        *,
        service: str | None = None,
        since_ns: int | None = None,
        until_ns: int | None = None,
        user_id: str | None = None,
        limit: int = 50,
        page_token: str = "",
    ) -> tuple[list[SessionSummary], str]:
        """Sessions (traces sharing a session id) by their latest trace's start, newest first.
        The filters choose which traces count."""
        _check_limit(limit)
        t = traces.c
        last = sa.func.max(t.start_ns)
        query = (
            sa.select(
                t.session_id,
                sa.func.count().label("n"),
                sa.func.sum(t.error).label("errors"),
                sa.func.min(t.start_ns).label("first"),
                sa.func.max(t.end_ns).label("last_end"),
                last.label("last"),
                sa.func.max(t.user_id).label("user_id"),
            )
            .where(t.project_id == project)
            .where(t.session_id != "")
        )
        if service is not None:
            query = query.where(t.service == service)
        if user_id is not None:
            query = query.where(t.user_id == user_id)
        query = _time_range(query, t.start_ns, since_ns, until_ns).group_by(t.session_id)
        if page_token:
            start, session = _read_token(page_token, "n", (int, str))
            query = query.having(
                sa.or_(last < start, sa.and_(last == start, t.session_id < session))
            )
        query = query.order_by(last.desc(), t.session_id.desc()).limit(limit + 1)
        with self.engine.connect() as conn:
            rows = list(conn.execute(query).mappings())
        token = ""
        if len(rows) > limit:
            rows = rows[:limit]
            token = _token("n", int(rows[-1]["last"]), rows[-1]["session_id"])
        return [_session(r) for r in rows], token

    # -- feedback ----------------------------------------------------------------------------------

    def feedback_for(
        self, project: str, trace_id: str = "", session_id: str = ""
    ) -> list[Feedback]:
        """The feedback on a trace and/or a session, oldest first."""
        f = trace_feedback.c
        which = []
        if trace_id:
            which.append(f.trace_id == trace_id)
        if session_id:
            which.append(f.session_id == session_id)
        if not which:
            return []
        query = (
            sa.select(f.trace_id, f.session_id, f.name, f.value, f.label, f.comment, f.source)
            .add_columns(f.time_ns)
            .where(f.project_id == project)
            .where(sa.or_(*which))
            .order_by(f.time_ns, f.pk)
        )
        with self.engine.connect() as conn:
            return [
                Feedback(
                    trace_id=r.trace_id,
                    session_id=r.session_id,
                    name=r.name,
                    value=r.value,
                    label=r.label,
                    comment=r.comment,
                    source=r.source,
                    time_unix_nano=int(r.time_ns),
                )
                for r in conn.execute(query)
            ]

    def feedback_for_traces(
        self, project: str, trace_ids: Sequence[str]
    ) -> dict[str, list[Feedback]]:
        """The feedback on each of these traces, oldest first (one query): the traces that
        have none are left out."""
        if not trace_ids:
            return {}
        f = trace_feedback.c
        query = (
            sa.select(f.trace_id, f.session_id, f.name, f.value, f.label, f.comment, f.source)
            .add_columns(f.time_ns)
            .where(f.project_id == project)
            .where(f.trace_id.in_(sa.bindparam("ids", expanding=True)))
            .order_by(f.time_ns, f.pk)
        )
        found: dict[str, list[Feedback]] = {}
        with self.engine.connect() as conn:
            for r in conn.execute(query, {"ids": sorted(set(trace_ids))}):
                found.setdefault(r.trace_id, []).append(
                    Feedback(
                        trace_id=r.trace_id,
                        session_id=r.session_id,
                        name=r.name,
                        value=r.value,
                        label=r.label,
                        comment=r.comment,
                        source=r.source,
                        time_unix_nano=int(r.time_ns),
                    )
                )
        return found

    def _attr(self, column: sa.ColumnElement[Any], key: str) -> sa.ColumnElement[Any]:
        """A JSON attribute of a text column as text; booleans read "true"/"false" on both
        engines (SQLite's json_extract gives 1/0)."""
        if self._pg:
            from sqlalchemy.dialects.postgresql import JSONB

            return sa.func.jsonb_extract_path_text(sa.cast(column, JSONB), key)
        path = f'$."{key}"'
        kind = sa.func.json_type(column, path)
        return sa.case(
            (kind == "true", "true"),
            (kind == "false", "false"),
            else_=sa.cast(sa.func.json_extract(column, path), sa.Text),
        )


def _event_time(event: SpanEvent) -> int:
    return event.time_unix_nano


def _check_limit(limit: int) -> None:
    if not 1 <= limit <= MAX_PAGE:
        raise UserError(f"limit: must be between 1 and {MAX_PAGE}, got {limit}")


def _time_range(
    query: sa.Select[Any], column: sa.ColumnElement[int], since: int | None, until: int | None
) -> sa.Select[Any]:
    if since is not None:
        query = query.where(column >= since)
    if until is not None:
        query = query.where(column < until)
    return query


def _attribute_filters(attributes: Mapping[str, str] | None) -> Iterator[tuple[str, str]]:
    items = list((attributes or {}).items())
    if len(items) > MAX_ATTRIBUTE_FILTERS:
        raise UserError(f"attributes: at most {MAX_ATTRIBUTE_FILTERS} filters, got {len(items)}")
    for key, value in items:
        if not key or '"' in key or "\\" in key:
            raise UserError(
                f"attributes: {key!r} is not an attribute key (non-empty, no quote or backslash)"
            )
        yield key, str(value)


def _token(kind: str, *key: Any) -> str:
    return base64.urlsafe_b64encode(orjson.dumps([kind, *key])).decode().rstrip("=")


def _read_token(token: str, kind: str, types: tuple[type, ...]) -> list[Any]:
    try:
        value = orjson.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (binascii.Error, ValueError):
        value = None
    if (
        not isinstance(value, list)
        or len(value) != len(types) + 1
        or value[0] != kind
        or not all(type(v) is t for v, t in zip(value[1:], types, strict=True))
    ):
        raise UserError(
            "page_token: not a token this server gave", hint="pass next_page_token unchanged"
        )
    return value[1:]


def _summary(row: Any, *, with_record: bool = False) -> TraceSummary:
    record = row["record"] if with_record else None
    return TraceSummary(
        trace_id=row["trace_id"],
        service=row["service"],
        root_name=row["root_name"],
        start_time_unix_nano=int(row["start_ns"]),
        end_time_unix_nano=int(row["end_ns"]),
        duration_ms=float(row["duration_ms"]),
        span_count=int(row["span_count"]),
        error=bool(row["error"]),
        session_id=row["session_id"],
        user_id=row["user_id"],
        input_preview=row["input_preview"],
        output_preview=row["output_preview"],
        record=orjson.loads(record) if record is not None else None,
        completed_at=float(row["completed_at"]),
    )


def _session(row: Any) -> SessionSummary:
    return SessionSummary(
        session_id=row["session_id"],
        trace_count=int(row["n"]),
        error_count=int(row["errors"] or 0),
        first_start_unix_nano=int(row["first"]),
        last_end_unix_nano=int(row["last_end"]),
        user_id=row["user_id"] or "",
    )
