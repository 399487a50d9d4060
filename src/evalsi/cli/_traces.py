"""``evalsi traces list|show|sessions``: the traces received over OTLP and the scores online
policies gave them, from a server (``--server``) or read straight from a local store
(``--store``, default ``.evalsi/evalsi.db``)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from evalsi.cli._output import note, print_json, print_table
from evalsi.cli._remote import add_server_flag, connect_reader, project_of, server_of
from evalsi.core import NotFoundError, UserError

if TYPE_CHECKING:
    from evalsi.core import Score, SessionSummary, Span, Trace, TraceScore, TraceSummary

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)([smhdw])")
_PREVIEW = 40
# The last whole second whose unix nanoseconds fit a signed 64-bit integer (2262-04-11).
_MAX_SECONDS = (2**63 - 1) // 1_000_000_000


def register(commands: Any) -> None:
    p = commands.add_parser("traces", help="list and inspect traces received over OTLP")
    sub = p.add_subparsers(dest="traces_command", metavar="SUBCOMMAND", required=True)
    ls = sub.add_parser("list", help="assembled traces, newest first")
    ls.add_argument("--service", help="only traces of this service (the root's service.name)")
    ls.add_argument(
        "--since",
        metavar="WHEN",
        help="started within this long (30m, 1h, 2d) or since an ISO time",
    )
    ls.add_argument("--until", metavar="WHEN", help="started before this (same forms as --since)")
    ls.add_argument("--session", metavar="ID", help="only traces of this session id")
    ls.add_argument("--errors", action="store_true", help="only traces with a failed span")
    ls.add_argument(
        "--attr",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="only traces with a span (or resource) attribute equal to VALUE; repeatable",
    )
    ls.add_argument("--name", help="only traces whose root span has this name")
    ls.add_argument("--limit", type=int, default=20, help="how many (default: 20, at most 1000)")
    ls.add_argument("--format", choices=("table", "json"), default="table")
    _common(ls)
    ls.set_defaults(handler=list_traces)
    show = sub.add_parser("show", help="one trace: its spans as a tree, feedback and scores")
    show.add_argument("trace_id", metavar="TRACE_ID")
    show.add_argument("--format", choices=("table", "json"), default="table")
    _common(show)
    show.set_defaults(handler=show_trace)
    sessions = sub.add_parser("sessions", help="sessions (traces sharing a session id)")
    sessions.add_argument("--service", help="only traces of this service")
    sessions.add_argument("--since", metavar="WHEN", help="as for traces list")
    sessions.add_argument("--until", metavar="WHEN", help="as for traces list")
    sessions.add_argument("--user", metavar="ID", help="only sessions of this user id")
    sessions.add_argument("--limit", type=int, default=20, help="how many (default: 20)")
    sessions.add_argument("--format", choices=("table", "json"), default="table")
    _common(sessions)
    sessions.set_defaults(handler=list_sessions)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store", metavar="PATH", help="store to read (default: .evalsi/evalsi.db)"
    )
    add_server_flag(parser)


# -- list ------------------------------------------------------------------------------------------
def list_traces(args: argparse.Namespace) -> int:
    remote, local = _window(args)
    attributes = dict(_attr(a) for a in args.attr)
    error = True if args.errors else None
    server = server_of(args)
    if server is not None:
        with connect_reader(args, server) as client:
            rows = client.list_traces(
                **remote,
                session_id=args.session or "",
                error=error,
                attributes=attributes,
                name=args.name or "",
            )
    else:
        project = project_of(args) or "default"
        with _local(args) as store:
            rows, _ = store.list_traces(
                project,
                **local,
                session_id=args.session,
                error=error,
                attributes=attributes,
                name=args.name,
            )
            found = _local_scores(store, project, [r.trace_id for r in rows])
        rows = [_with_scores(r, found.get(r.trace_id, [])) for r in rows]
    if args.format == "json":
        print_json({"traces": [_summary_json(r) for r in rows]})
        return 0
    if not rows:
        note("no traces")
        return 0
    print_table(
        [
            "TRACE",
            "START (UTC)",
            "SERVICE",
            "ROOT",
            "DURATION",
            "SPANS",
            "STATUS",
            "SCORES",
            "SESSION",
            "INPUT",
        ],
        [
            [
                r.trace_id,
                _when(r.start_time_unix_nano),
                r.service,
                r.root_name,
                _ms(r.duration_ms),
                str(r.span_count),
                "error" if r.error else "ok",
                pass_fail(r.scores),
                r.session_id,
                _cut(r.input_preview),
            ]
            for r in rows
        ],
    )
    return 0


# -- show ------------------------------------------------------------------------------------------
def show_trace(args: argparse.Namespace) -> int:
    trace_id = str(args.trace_id).lower()
    if not re.fullmatch(r"[0-9a-f]{32}", trace_id):
        raise UserError(f"TRACE_ID: expected 32 hex digits, got {args.trace_id!r}")
    server = server_of(args)
    trace: Trace | None
    scores: Sequence[TraceScore]
    if server is not None:
        with connect_reader(args, server) as client:
            stored = client.get_trace(trace_id, project_id=project_of(args))
        trace, summary, scores = stored.trace, stored.summary, stored.scores
    else:
        project = project_of(args) or "default"
        with _local(args) as store:
            trace, summary = (
                store.get_trace(project, trace_id),
                store.trace_summary(project, trace_id),
            )
            scores = _local_scores(store, project, [trace_id]).get(trace_id, [])
        if trace is None and summary is None:
            raise NotFoundError(f"TRACE_ID: no trace {trace_id} in project {project!r}")
        if trace is not None and summary is not None and summary.record is None:
            from evalsi.traces import record_row

            summary.record = record_row(trace)
    spans = trace.spans if trace is not None else []
    feedback = trace.feedback if trace is not None else []
    if args.format == "json":
        print_json(
            {
                "trace_id": trace_id,
                "summary": _summary_json(summary) if summary is not None else None,
                "record": summary.record if summary is not None else None,
                "spans": [_span_json(s) for s in spans],
                "feedback": [_plain(f) for f in feedback],
                "scores": [row for s in scores for row in trace_score_rows(s)],
            }
        )
        return 0
    head = f"trace {trace_id}"
    if summary is not None:
        status = "error" if summary.error else "ok"
        head += (
            f"  service {summary.service or '-'}  {_when(summary.start_time_unix_nano)} UTC  "
            f"{_ms(summary.duration_ms)}  {summary.span_count} spans  {status}"
        )
        if summary.session_id:
            head += f"  session {summary.session_id}"
    else:
        head += f"  (not assembled yet: {len(spans)} spans received)"
    print(head)
    for prefix, span in tree(spans):
        view = span.view
        label = span.name
        if view is not None and view.name and view.name != span.name:
            label += f" ({view.name})"
        status = "error" if span.error else "ok"
        if span.error and span.status_message:
            status += f": {span.status_message}"
        kind = view.type if view is not None else "generic"
        links = "".join(f"  linked to {k.trace_id}/{k.span_id}" for k in span.links)
        print(f"{prefix}{kind}  {label}  {_ms(span.duration_ms)}  {status}{links}")
    if feedback:
        print("feedback:")
        for f in feedback:
            value = "" if f.value is None else f"{f.value:g}"
            parts = [f.name, value, f.label, f'"{f.comment}"' if f.comment else ""]
            print("  " + "  ".join(p for p in parts if p))
    if not scores:
        print("scores: (none)")
        return 0
    print("scores:")
    print_table(
        ["POLICY", "EVALUATOR", "METRIC", "OUTCOME", "VALUE", "WHY"],
        [
            [
                row["policy"],
                row["evaluator"],
                row["metric"] or "-",
                row["outcome"],
                _value_text(row["value"]),
                _cut(row["explanation"] or row["reason"]),
            ]
            for s in scores
            for row in trace_score_rows(s)
        ],
    )
    return 0


# -- sessions --------------------------------------------------------------------------------------
def list_sessions(args: argparse.Namespace) -> int:
    remote, local = _window(args)
    server = server_of(args)
    rows: list[SessionSummary]
    if server is not None:
        with connect_reader(args, server) as client:
            rows = client.list_sessions(**remote, user_id=args.user or "")
    else:
        with _local(args) as store:
            rows, _ = store.list_sessions(project_of(args) or "default", **local, user_id=args.user)
    if args.format == "json":
        print_json({"sessions": [_plain(r) for r in rows]})
        return 0
    if not rows:
        note("no sessions")
        return 0
    print_table(
        ["SESSION", "TRACES", "ERRORS", "FIRST START (UTC)", "LAST END (UTC)", "USER"],
        [
            [
                r.session_id,
                str(r.trace_count),
                str(r.error_count),
                _when(r.first_start_unix_nano),
                _when(r.last_end_unix_nano),
                r.user_id,
            ]
            for r in rows
        ],
    )
    return 0


def tree(spans: list[Span]) -> Iterator[tuple[str, Span]]:
    """Spans depth first, children by start time, each with its tree-drawing prefix. A span
    whose parent is not in the trace (not received, or expired) is drawn as a root."""
    ids = {s.span_id for s in spans}
    children: dict[str, list[Span]] = {}
    roots = []
    for s in sorted(spans, key=lambda s: (s.start_time_unix_nano, s.end_time_unix_nano)):
        if s.parent_span_id and s.parent_span_id in ids and s.parent_span_id != s.span_id:
            children.setdefault(s.parent_span_id, []).append(s)
        else:
            roots.append(s)
    seen: set[str] = set()

    def walk(span: Span, lead: str, prefix: str) -> Iterator[tuple[str, Span]]:
        if span.span_id in seen:  # a cycle of parent ids: draw each span once
            return
        seen.add(span.span_id)
        yield prefix, span
        kids = children.get(span.span_id, [])
        for i, kid in enumerate(kids):
            last = i == len(kids) - 1
            yield from walk(
                kid, lead + ("   " if last else "│  "), lead + ("└─ " if last else "├─ ")
            )

    for root in roots:
        yield from walk(root, "", "")


# -- helpers ---------------------------------------------------------------------------------------
def parse_when(text: str | None, flag: str, now: float) -> float | None:
    """``30m``/``1h``/``2d`` ago, or an ISO time (UTC unless it says), as unix seconds."""
    if text is None:
        return None
    match = _DURATION.fullmatch(text.strip())
    if match:
        seconds = now - float(match[1]) * _UNITS[match[2]]
    else:
        try:
            when = dt.datetime.fromisoformat(text.strip())
            if when.tzinfo is None:
                when = when.replace(tzinfo=dt.UTC)
            seconds = when.timestamp()
        except (ValueError, OverflowError):
            raise UserError(
                f"{flag}: expected a duration (30s, 15m, 1h, 2d, 1w) or an ISO time, got {text!r}"
            ) from None
    # Span times are unix nanoseconds in signed 64-bit columns (and on the wire): anything
    # outside overflows the store's query or the request (a huge duration is even inf).
    if not 0 <= seconds <= _MAX_SECONDS:
        raise UserError(
            f"{flag}: expected a time between 1970-01-01 and 2262-04-11 (unix nanoseconds fit "
            f"a signed 64-bit integer), got {text!r}"
        )
    return seconds


def _window(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """``--project``, ``--limit``, ``--service``, ``--since`` and ``--until`` as the client's
    listings take them, and as the local store's do."""
    if not 1 <= args.limit <= 1000:
        raise UserError(f"--limit: expected 1 to 1000, got {args.limit}")
    now = time.time()
    since, until = parse_when(args.since, "--since", now), parse_when(args.until, "--until", now)
    remote = {"project_id": project_of(args), "limit": args.limit, "service": args.service or ""}
    local = {"service": args.service, "since_ns": _ns(since), "until_ns": _ns(until)}
    return {**remote, "since": since, "until": until}, {**local, "limit": args.limit}


def _attr(text: str) -> tuple[str, str]:
    key, eq, value = text.partition("=")
    if not eq or not key:
        raise UserError(f"--attr: expected KEY=VALUE, got {text!r}")
    return key, value


def _local_scores(
    store: Any, project: str, trace_ids: list[str]
) -> Mapping[str, Sequence[TraceScore]]:
    from evalsi.policies import result_key
    from evalsi.store import trace_scores

    return trace_scores(store.store, project, {t: result_key(t) for t in trace_ids})


def _with_scores(summary: TraceSummary, scores: Sequence[TraceScore]) -> TraceSummary:
    """The summary with the policy scores the server would have sent (flattened)."""
    from evalsi.wire import flat_scores

    return dataclasses.replace(summary, scores=flat_scores(scores))


def pass_fail(scores: list[Score]) -> str:
    """The list's compact score column: ``pass 3/3``, ``fail 1/3`` (failed of the pass/fail
    scores), ``3 scores`` when none is pass/fail, ``-`` when no policy scored the trace."""
    verdicts = [s.passed for s in scores if s.passed is not None]
    if not verdicts:
        return f"{len(scores)} scores" if scores else "-"
    failed = verdicts.count(False)
    return f"fail {failed}/{len(verdicts)}" if failed else f"pass {len(verdicts)}/{len(verdicts)}"


def trace_score_rows(s: TraceScore) -> list[dict[str, Any]]:
    """One JSON row per score of a policy result (one row, no value, when not scored)."""
    r = s.result
    base = {
        "policy": s.policy,
        "run_id": s.run_id,
        "evaluator": r.evaluator,
        "evaluator_ref": r.evaluator_ref,
        "outcome": r.outcome.name.lower(),
    }
    scores: list[tuple[str, Any, Any, str]] = [
        (x.name or r.evaluator, x.kind, x.value, x.explanation) for x in r.scores
    ]
    return [
        {**base, "metric": m, "kind": kind, "value": v, "explanation": why, "reason": r.reason}
        for m, kind, v, why in scores or [("", None, None, "")]
    ]


def _value_text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "pass" if value else "fail"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _ns(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds * 1e9)


@contextlib.contextmanager
def _local(args: argparse.Namespace) -> Iterator[Any]:
    """The local store's traces, closed after use."""
    from evalsi.runs import open_store
    from evalsi.store import TraceStore
    from evalsi.traces import normalize

    sql = open_store(args.store, create=False)
    traces = TraceStore(sql, views=normalize)
    try:
        yield traces
    finally:
        traces.close()
        sql.close()


def _when(ns: int) -> str:
    return dt.datetime.fromtimestamp(ns / 1e9, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _ms(ms: float) -> str:
    return f"{ms:.1f} ms" if ms < 10_000 else f"{ms / 1000:.2f} s"


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _PREVIEW else text[: _PREVIEW - 1] + "…"


def _plain(row: Any, *skip: str) -> dict[str, Any]:
    """A dataclass row's fields, in their order, but ``skip``."""
    return {f.name: getattr(row, f.name) for f in dataclasses.fields(row) if f.name not in skip}


def _summary_json(s: TraceSummary) -> dict[str, Any]:
    """The summary's fields with its (flattened, scored) policy scores."""
    scores = [
        {
            "policy": x.metadata.get("policy", ""),
            "evaluator": x.metadata.get("evaluator", ""),
            "name": x.name,
            "kind": x.kind,
            "value": x.value,
        }
        for x in s.scores
    ]
    return {**_plain(s, "record", "scores"), "scores": scores}


def _span_json(s: Span) -> dict[str, Any]:
    from evalsi.wire import attr_json

    view = s.view
    return {
        "span_id": s.span_id,
        "parent_span_id": s.parent_span_id,
        "name": s.name,
        "type": view.type if view is not None else "generic",
        "service": s.service,
        "start_time_unix_nano": s.start_time_unix_nano,
        "end_time_unix_nano": s.end_time_unix_nano,
        "duration_ms": s.duration_ms,
        "status_code": s.status_code,
        "status_message": s.status_message,
        "attributes": attr_json(s.attributes),
        "events": [
            {
                "name": e.name,
                "time_unix_nano": e.time_unix_nano,
                "attributes": attr_json(e.attributes),
            }
            for e in s.events
        ],
        "links": [
            {"trace_id": k.trace_id, "span_id": k.span_id, "attributes": attr_json(k.attributes)}
            for k in s.links
        ],
        "view": _view_json(s),
    }


def _view_json(s: Span) -> dict[str, Any] | None:
    from evalsi.store import view_dict
    from evalsi.wire import attr_json

    return attr_json(view_dict(s.view)) if s.view is not None else None
