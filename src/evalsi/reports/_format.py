"""Formatting shared by the HTML and the Markdown report (numbers, intervals, times, gates)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import orjson

from evalsi.core import Interval, IsolationReport, MetricSummary
from evalsi.reports._data import ReportData
from evalsi.reports._join import compact
from evalsi.runs import IsolationSummary, format_number


def format_interval(ci: Interval | None) -> str:
    if ci is None or ci.low is None or ci.high is None:
        return "-"
    return f"[{format_number(ci.low)}, {format_number(ci.high)}]"


def signed(value: float | None) -> str:
    text = format_number(value)
    return f"+{text}" if value is not None and value > 0 else text


def percent(part: int, whole: int) -> str:
    return "-" if whole <= 0 else f"{100.0 * part / whole:.1f}%"


def when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def duration(start: float | None, end: float | None) -> str:
    if start is None or end is None or end < start:
        return ""
    seconds = end - start
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {secs:02d} s"


def metric_label(evaluator: str, metric: str) -> str:
    return evaluator if not metric or metric == evaluator else f"{evaluator}/{metric}"


def metric_mean(m: MetricSummary) -> str:
    """The mean, or for a label metric its three most frequent labels."""
    if m.kind == "label" and m.labels:
        top = sorted(m.labels.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
        return ", ".join(f"{k}: {v}" for k, v in top)
    return format_number(m.mean)


def failures_title(data: ReportData) -> str:
    shown, total = len(data.failures), data.failures_total
    if total == 0:
        return "no record failed or errored"
    if shown == total:
        return f"{total} record(s) failed or errored"
    return f"showing the first {shown} of {total} records that failed or errored"


def isolation_warning(i: IsolationSummary) -> str:
    """Why an evaluator's sandbox isolation needs a look (partial enforcement, unreported
    results), or "" when it does not."""
    parts = []
    if i.enforcement == "partial":
        gaps = f" (missing: {', '.join(i.missing)})" if i.missing else ""
        parts.append(
            f"{i.evaluator} ran with partial sandbox enforcement in {i.partial} of "
            f"{i.sandboxed} sandboxed results{gaps}"
        )
    if i.unreported:
        parts.append(
            f"{i.unreported} scored results of {i.evaluator} reported no sandbox isolation; "
            "a gate on its isolation cannot judge"
        )
    return "; ".join(parts)


def record_isolation_text(report: IsolationReport | None) -> str:
    """A record's provenance isolation: ``confined (landlock), enforcement partial: …``."""
    if report is None:
        return "-"
    text = f"{report.level} ({report.driver})" if report.driver else report.level
    if report.details.get("enforcement") == "partial":
        missing = report.details.get("missing")
        text += ", enforcement partial" + (f": missing {missing}" if missing else "")
    return text


def gate_verdict(gate: dict[str, Any]) -> str:
    """``passed``, ``failed`` or ``inconclusive`` (older summaries hold only ``passed``)."""
    verdict = gate.get("verdict")
    if verdict:
        return str(verdict)
    passed = gate.get("passed")
    return "inconclusive" if passed is None else ("passed" if passed else "failed")


def any_value(value: Any) -> str:
    """A gate's value: numbers as in the tables, anything else as compact JSON."""
    if value is None:
        return "-"
    if isinstance(value, float | int) and not isinstance(value, bool):
        return format_number(float(value))
    if isinstance(value, str):
        return value
    return compact(value)


def pretty_json(value: Any) -> str:
    if value is None:
        return "null"
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
    except TypeError:
        return str(value)


# The HTML templates' vocabulary: filters (``{{ m | mean }}``) and functions.
FILTERS: dict[str, Callable[..., str]] = {
    "num": format_number,
    "ci": format_interval,
    "when": when,
    "signed": signed,
    "label": metric_label,
    "mean": metric_mean,
    "pct": percent,
    "value": any_value,
    "record_isolation": record_isolation_text,
}
GLOBALS: dict[str, Callable[..., str]] = {
    "duration": duration,
    "failures_title": failures_title,
    "gate_verdict": gate_verdict,
    "isolation_warning": isolation_warning,
}
