"""Spans to rows of the ``spans`` table and back, free of SQLAlchemy (the ingest hot path).

A span becomes one tuple in ``SPAN_COLUMNS`` order: the columns queries filter on, and the
raw attributes, events, resource and the mapper's view as orjson text (``NULL`` when empty).
A resource is shared by every span of one OTLP ``ResourceSpans``, so each distinct resource
object is encoded once per batch. Bytes values (OTLP ``bytes_value``) are kept as
``{"$b64": ...}`` and restored on read. Events received apart from their span (``span_events``
rows) are encoded with the same helpers, so they read back as a span's own events do.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from typing import Any, TypeVar

import orjson

from evalsi.core import SPAN_TYPES, Span, SpanEvent, SpanLink, SpanView, ToolCall, Usage

SPAN_COLUMNS = (
    "project_id",
    "trace_id",
    "span_id",
    "parent_span_id",
    "name",
    "kind",
    "type",
    "service",
    "start_ns",
    "end_ns",
    "status",
    "status_message",
    "session_id",
    "model",
    "view_name",
    "scope",
    "attributes",
    "events",
    "resource",
    "view",
    "links",
)
CHUNK = 1024  # rows per statement: 21 parameters each, under SQLite's 32,766 (PG: 65,535)

T = TypeVar("T")

_B64 = "$b64"
_USAGE = ("input_tokens", "output_tokens", "total_tokens", "cost_usd", "latency_ms")


def _default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {_B64: base64.b64encode(bytes(value)).decode()}
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not a span attribute value")


MAX_SERVICE = 255
"""The ``service`` columns' width: a longer ``service.name`` is cut (the resource keeps it)."""


def dumps(value: Any) -> str:
    return orjson.dumps(value, default=_default).decode()


def _json_or_none(value: Any) -> str | None:
    return dumps(value) if value else None


def _restore(value: Any) -> Any:
    if isinstance(value, dict):
        if len(value) == 1 and _B64 in value and isinstance(value[_B64], str):
            return base64.b64decode(value[_B64])
        return {k: _restore(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_restore(v) for v in value]
    return value


def loads(text: str | bytes | None, empty: Any) -> Any:
    if text is None:
        return empty
    raw = text.encode() if isinstance(text, str) else text
    value = orjson.loads(raw)
    return _restore(value) if b'"$b64"' in raw else value


def view_dict(view: SpanView) -> dict[str, Any]:
    """The view's JSON form, without empty fields (the type is kept even when generic)."""
    out: dict[str, Any] = {"type": view.type}
    if view.convention != "generic":
        out["convention"] = view.convention
    for key in ("name", "model", "session_id", "user_id"):
        if value := getattr(view, key):
            out[key] = value
    if view.input is not None:
        out["input"] = view.input
    if view.output is not None:
        out["output"] = view.output
    if (call := view.tool_call) is not None:
        out["tool_call"] = {"name": call.name, "arguments": call.arguments, "id": call.id}
    if view.documents:
        out["documents"] = view.documents
    if (usage := view.usage) is not None:
        out["usage"] = {k: v for k in _USAGE if (v := getattr(usage, k)) is not None}
    return out


def view_from_dict(d: dict[str, Any]) -> SpanView:
    kind = d.get("type", "generic")
    call = d.get("tool_call")
    usage = d.get("usage")
    return SpanView(
        type=kind if kind in SPAN_TYPES else "generic",
        convention=d.get("convention", "generic"),
        name=d.get("name", ""),
        model=d.get("model", ""),
        input=d.get("input"),
        output=d.get("output"),
        tool_call=ToolCall(call["name"], call.get("arguments"), call.get("id", ""))
        if call
        else None,
        documents=list(d.get("documents", ())),
        usage=Usage(**usage) if usage is not None else None,
        session_id=d.get("session_id", ""),
        user_id=d.get("user_id", ""),
    )


def span_rows(project: str, spans: Iterable[Span]) -> list[tuple[Any, ...]]:
    """One tuple per distinct (trace id, span id), the last one sent winning: a multi-row
    upsert may not touch a row twice on PostgreSQL."""
    resources: dict[int, tuple[str | None, str]] = {}  # id(resource) -> (json, service)
    rows: dict[tuple[str, str], tuple[Any, ...]] = {}
    for s in spans:
        res = resources.get(id(s.resource))
        if res is None:
            res = resources[id(s.resource)] = (_json_or_none(s.resource), s.service[:MAX_SERVICE])
        view = s.view
        scope = f"{s.scope_name}\t{s.scope_version}" if s.scope_name or s.scope_version else None
        rows[(s.trace_id, s.span_id)] = (
            project,
            s.trace_id,
            s.span_id,
            s.parent_span_id,
            s.name,
            s.kind,
            view.type if view is not None else "generic",
            res[1],
            s.start_time_unix_nano,
            s.end_time_unix_nano,
            s.status_code,
            s.status_message or None,
            view.session_id if view is not None else "",
            view.model if view is not None else "",
            view.name if view is not None else "",
            scope,
            _json_or_none(s.attributes),
            dumps([[e.name, e.time_unix_nano, e.attributes] for e in s.events])
            if s.events
            else None,
            res[0],
            # The view is not stored: the mappers rebuild it from the stored (redacted)
            # attributes when a span is read (``TraceStore(views=...)``). Stored, its content
            # doubled the row and cost ~40% of SQLite's work per span (measured).
            None,
            dumps([[k.trace_id, k.span_id, k.attributes] for k in s.links]) if s.links else None,
        )
    return list(rows.values())


def span_event_key(trace_id: str, span_id: str, event: SpanEvent) -> str:
    """What identifies an event received apart from its span: 32 hex digits of a hash of its
    trace, span, name, time and attributes (keys sorted: an exporter may reorder them)."""
    fields = (trace_id, span_id, event.name, event.time_unix_nano, event.attributes)
    raw = orjson.dumps(fields, default=_default, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(raw).hexdigest()[:32]


def span_event_row(
    project: str, trace_id: str, span_id: str, event: SpanEvent, *, seq: int, pg: bool
) -> dict[str, Any]:
    """A row of ``span_events``; its attributes encoded as a span's events' are, so the round
    trip is the same. On PostgreSQL NUL characters are dropped, as from span rows."""
    row = {
        "project_id": project,
        "trace_id": trace_id,
        "span_id": span_id,
        "time_ns": event.time_unix_nano,
        "name": event.name,
        "attributes": _json_or_none(event.attributes),
        "key": span_event_key(trace_id, span_id, event),
        "seq": seq,
    }
    if pg:
        # dropped as from span rows (RowsWriter.write), so an event reads back the same
        # whether it came on its span or apart
        name, attributes = _strip_nul(_strip_json_nul((event.name, row["attributes"])))
        row["name"], row["attributes"] = name, attributes
    return row


def span_events_from_rows(rows: Iterable[Sequence[Any]]) -> Iterator[tuple[str, str, SpanEvent]]:
    """``(trace id, span id, event)`` of rows of (trace_id, span_id, name, time_ns,
    attributes, seq). An event sent with no time shows when it was received (``seq``)."""
    for trace_id, span_id, name, time_ns, attributes, seq in rows:
        when = int(time_ns) or int(seq)
        yield trace_id, span_id, SpanEvent(name, when, loads(attributes, {}))


SQLITE_CACHE_KIB = 64 * 1024


def chunks(items: Sequence[T], limit: int) -> Iterator[Sequence[T]]:
    """``items`` in slices whose sizes are powers of two, ``limit`` (one too) at most.

    The statements of a few sizes are prepared once and kept by the driver (the sqlite3
    module caches 128 a connection), where slices of whatever size a batch had were parsed
    anew each time: on SQLite a 512-row span upsert cost 22-29 µs a row to prepare and run,
    13-17 to run prepared (measured), and an ``IN`` of 300 trace ids ~0.25 ms to prepare.
    """
    start, left = 0, len(items)
    while left:
        size = min(limit, 1 << (left.bit_length() - 1))
        yield items[start : start + size]
        start, left = start + size, left - size


@functools.lru_cache(maxsize=64)
def upsert_sql(rows: int, mark: str) -> str:
    values = "(" + ", ".join([mark] * len(SPAN_COLUMNS)) + ")"
    return (
        f"INSERT INTO spans ({', '.join(SPAN_COLUMNS)}) VALUES "
        + ", ".join([values] * rows)
        + " ON CONFLICT (project_id, trace_id, span_id) DO UPDATE SET "
        + ", ".join(f"{c}=excluded.{c}" for c in SPAN_COLUMNS[3:])
    )


class RowsWriter:
    """Upserts span rows through a DB-API connection, one transaction per call.

    SQLite: multi-row ``INSERT ... ON CONFLICT`` statements of up to ``CHUNK`` rows (sizes
    from ``chunks``).
    PostgreSQL (psycopg 3): ``COPY`` into a per-connection temporary table, then one upsert
    from it, about three times the rate of multi-row VALUES or ``executemany`` (measured).
    Then summarised traces of the batch get their span count and error flag refreshed, so a
    span arriving after its trace was assembled is counted.
    """

    def __init__(self, conn: Any, *, pg: bool, claims: bool = False) -> None:
        """``claims``: the traces of each batch are upserted in ``trace_claims`` in the same
        transaction (a cluster's replicas: ``store._trace_claims``; PostgreSQL only)."""
        if claims and not pg:
            raise ValueError("trace claims need PostgreSQL")
        self.conn = conn
        self.pg = pg
        self.claims = claims
        self.mark = "%s" if pg else "?"
        if pg:
            conn.cursor().execute(
                "CREATE TEMP TABLE IF NOT EXISTS spans_in "
                "(LIKE spans INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
            )
            conn.commit()
        else:
            # A span row is ~2 kB and the primary key is random (trace ids): with SQLite's
            # default 2 MB page cache a batch re-reads index pages; 64 MB took ~20% off the
            # CPU cost of a stored span (measured on 200k-span runs).
            conn.cursor().execute(f"PRAGMA cache_size=-{SQLITE_CACHE_KIB}")

    def write(self, rows: Sequence[Sequence[Any]], traces: Sequence[Sequence[Any]] = ()) -> None:
        """Span rows (``SPAN_COLUMNS``) and trace rows (``TRACE_COLUMNS``), one transaction."""
        if self.pg:  # a JSON "\u0000" stores, but the jsonb casts of attribute filters refuse it
            rows = [_strip_json_nul(r) for r in rows]
            traces = [_strip_json_nul(r) for r in traces]
        try:
            self._write(rows, traces)
        except Exception as e:
            if not (self.pg and "NUL" in str(e)):
                raise
            # PostgreSQL text cannot hold NUL characters (JSON escapes them; plain columns do
            # not): rare enough to be handled by a second try rather than by every row
            self._write([_strip_nul(r) for r in rows], [_strip_nul(r) for r in traces])

    def _write(self, rows: Sequence[Sequence[Any]], traces: Sequence[Sequence[Any]]) -> None:
        conn = self.conn
        try:
            cur = conn.cursor()
            if rows:
                if self.pg:
                    with cur.copy(_COPY) as copy:
                        for row in rows:
                            copy.write_row(row)
                    cur.execute(_FROM_STAGE)
                    if self.claims:
                        cur.execute(CLAIM_UPSERT)
                else:
                    for chunk in chunks(rows, CHUNK):
                        sql = upsert_sql(len(chunk), self.mark)
                        cur.execute(sql, list(chain.from_iterable(chunk)))
                # summarised traces of these spans: their count and error flag, for late spans
                self._per_trace(cur, _TOUCH, rows)
            if traces:
                # multi-row statements: each step releases and retakes the GIL once, where
                # executemany would do it per row, and every retake waits for the event loop
                for chunk in chunks(traces, TRACE_CHUNK):
                    cur.execute(
                        trace_upsert_sql(len(chunk), self.mark),
                        list(chain.from_iterable(chunk)),
                    )
                # at least the spans already stored (the assembler may not have seen them all)
                self._per_trace(cur, _COUNT_PG if self.pg else _COUNT, traces)
            conn.commit()
        except BaseException:
            conn.rollback()
            raise

    def _per_trace(self, cur: Any, update: str, rows: Sequence[Sequence[Any]]) -> None:
        """``update`` on the trace rows of (project id, trace id) in ``rows``' first columns."""
        by_project: dict[str, set[str]] = {}
        for r in rows:
            by_project.setdefault(r[0], set()).add(r[1])
        m = self.mark
        for project, found in by_project.items():
            for chunk in chunks(sorted(found), CHUNK):
                cur.execute(update + in_ids(len(chunk), m), [project, *chunk])

    def close(self) -> None:
        self.conn.close()


_COPY = f"COPY spans_in ({', '.join(SPAN_COLUMNS)}) FROM STDIN"
_FROM_STAGE = (
    f"INSERT INTO spans ({', '.join(SPAN_COLUMNS)}) SELECT {', '.join(SPAN_COLUMNS)} FROM spans_in "
    "ON CONFLICT (project_id, trace_id, span_id) DO UPDATE SET "
    + ", ".join(f"{c}=excluded.{c}" for c in SPAN_COLUMNS[3:])
)
_CLOCK = "CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS FLOAT)"  # the store's clock
CLAIM_UPSERT = (
    "INSERT INTO trace_claims (project_id, trace_id, last_at, root_at, batches) "
    f"SELECT project_id, trace_id, {_CLOCK}, "
    f"CASE WHEN bool_or(parent_span_id = '') THEN {_CLOCK} END, 1 "
    "FROM spans_in GROUP BY project_id, trace_id "
    # one lock order for every writer: two batches of the same traces never deadlock
    "ORDER BY project_id, trace_id "
    "ON CONFLICT (project_id, trace_id) DO UPDATE SET last_at = excluded.last_at, "
    "root_at = COALESCE(trace_claims.root_at, excluded.root_at), done_at = NULL, "
    "batches = trace_claims.batches + 1"
)
"""The traces of the spans staged in ``spans_in`` (``RowsWriter``'s COPY), upserted in the
span batch's own transaction: a trace stored is a trace known, whatever happens next."""

_TOUCH = (
    "UPDATE traces SET span_count = (SELECT COUNT(*) FROM spans s WHERE "
    "s.project_id = traces.project_id AND s.trace_id = traces.trace_id), "
    "error = CASE WHEN error = 1 OR EXISTS (SELECT 1 FROM spans s WHERE "
    "s.project_id = traces.project_id AND s.trace_id = traces.trace_id "
    "AND s.status = 2) THEN 1 ELSE 0 END "
)


_COUNT = (
    "UPDATE traces SET span_count = MAX(span_count, (SELECT COUNT(*) FROM spans s WHERE "
    "s.project_id = traces.project_id AND s.trace_id = traces.trace_id)) "
)
_COUNT_PG = _COUNT.replace("MAX(", "GREATEST(")


@functools.lru_cache(maxsize=64)
def in_ids(n: int, mark: str) -> str:
    """The WHERE clause of ``n`` trace ids of one project (``chunks`` keeps ``n`` to a few)."""
    return f"WHERE project_id = {mark} AND trace_id IN ({', '.join([mark] * n)})"


TRACE_COLUMNS = (
    "project_id",
    "trace_id",
    "service",
    "root_name",
    "start_ns",
    "end_ns",
    "duration_ms",
    "span_count",
    "error",
    "session_id",
    "user_id",
    "input_preview",
    "output_preview",
    "record",
    "completed_at",
)
"""A trace row's columns, in the order ``trace_row`` gives them."""


TRACE_CHUNK = 1024  # rows per statement: 15 parameters each


@functools.lru_cache(maxsize=64)
def trace_upsert_sql(rows: int, mark: str) -> str:
    values = "(" + ", ".join([mark] * len(TRACE_COLUMNS)) + ")"
    return (
        f"INSERT INTO traces ({', '.join(TRACE_COLUMNS)}) VALUES "
        + ", ".join([values] * rows)
        + " "
        "ON CONFLICT (project_id, trace_id) DO UPDATE SET "
        + ", ".join(f"{c}=excluded.{c}" for c in TRACE_COLUMNS[2:])
    )


def _strip_nul(row: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(v.replace("\x00", "") if isinstance(v, str) else v for v in row)


# A JSON escape of NUL: "\u0000" after an even number of backslashes (an odd number means the
# backslash before "u0000" is itself escaped, and the text is a literal "\u0000").
_JSON_NUL = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")


def _strip_json_nul(row: Sequence[Any]) -> Sequence[Any]:
    if not any(isinstance(v, str) and "\\u0000" in v for v in row):
        return row
    return tuple(
        _JSON_NUL.sub(r"\1", v) if isinstance(v, str) and "\\u0000" in v else v for v in row
    )


READ_COLUMNS = SPAN_COLUMNS[1:]
"""The columns ``span_from_row`` reads, in order (``project_id`` is known to the caller)."""


def span_from_row(row: Sequence[Any]) -> Span:
    (
        trace_id,
        span_id,
        parent,
        name,
        kind,
        _type,
        _service,
        start,
        end,
        status,
        message,
        _session,
        _model,
        _view_name,
        scope,
        attributes,
        events,
        resource,
        view,
        links,
    ) = row
    scope_name, _, scope_version = (scope or "").partition("\t")
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        kind=int(kind),
        start_time_unix_nano=int(start),
        end_time_unix_nano=int(end),
        status_code=int(status),
        status_message=message or "",
        attributes=loads(attributes, {}),
        events=[SpanEvent(n, int(t), a) for n, t, a in loads(events, [])],
        resource=loads(resource, {}),
        scope_name=scope_name,
        scope_version=scope_version,
        view=view_from_dict(loads(view, {})) if view is not None else None,
        links=[SpanLink(t, i, a) for t, i, a in loads(links, [])],
    )


def spans_from_rows(rows: Iterable[Sequence[Any]], *, pg: bool = False) -> list[Span]:
    """Spans of written rows (``SPAN_COLUMNS``, as ``span_rows`` built them) as the store
    would read them back: on PostgreSQL with NUL characters dropped as the writer drops them,
    ordered as ``get_trace`` orders them. Views are not built here."""
    found = [span_from_row((_strip_nul(_strip_json_nul(row)) if pg else row)[1:]) for row in rows]
    found.sort(key=span_order)
    return found


def span_order(span: Span) -> tuple[int, int, str]:
    """How a trace's spans are ordered when read: by start, end, span id."""
    return (span.start_time_unix_nano, span.end_time_unix_nano, span.span_id)


def row_bytes(row: Sequence[Any]) -> int:
    """About what a span row holds in memory: its text, plus the tuple and its objects."""
    return 400 + sum(len(v) for v in row if type(v) is str)
