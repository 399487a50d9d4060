"""``render_report``: a run as one self-contained HTML file or as GitHub-flavoured Markdown."""

from __future__ import annotations

import datetime as dt
import functools
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

import orjson

from evalsi.core import Interval, IsolationReport, MetricSummary, UserError
from evalsi.reports._charts import NO_CHARTS, Charts, build_charts
from evalsi.reports._data import ReportData, gather_report
from evalsi.runs import IsolationSummary, format_number, open_store
from evalsi.store import SqlStore

if TYPE_CHECKING:
    import jinja2

ReportFormat = Literal["html", "md"]
StoreLike = SqlStore | str | os.PathLike[str] | None
FORMATS: Final = ("html", "md")


def render_report(
    store: StoreLike,
    run_id: str,
    *,
    fmt: ReportFormat,
    by: str | None = None,
    compare: str | None = None,
    failures: int = 20,
) -> str:
    """Render one stored run as a report.

    HTML is one self-contained file: inline CSS, charts as inline SVG (with
    ``pip install evalsi[reports]``), no scripts and nothing fetched from the network; every
    value that came from the user is escaped. Markdown has the same sections as tables.

    Args:
        store: An open ``SqlStore``, a SQLite path or URL, or None for ``.evalsi/evalsi.db``.
        run_id: The run: an id, a unique id prefix, or ``latest``.
        fmt: ``"html"`` or ``"md"``.
        by: A metadata key to slice every metric by (the run's dataset is read again for it).
        compare: The baseline run A to compare this run (B) with; deltas are B − A, as
            ``evalsi compare A B`` gives them.
        failures: How many failing records to show (0: none).

    Raises:
        UserError: An unknown run, an unknown format, a bad ``by`` or ``failures``.

    Example:
        >>> import evalsi
        >>> from evalsi.store import SqlStore
        >>> store = SqlStore.open(":memory:")
        >>> rows = [{"id": "a", "output": "4", "reference": "4"},
        ...         {"id": "b", "output": "5", "reference": "4"}]
        >>> run = evalsi.evaluate(rows, ["exact-match"], store=store).run_id
        >>> md = render_report(store, run, fmt="md")
        >>> "| exact-match | exact-match | 2 | 0.500 |" in md
        True
    """
    if fmt not in FORMATS:
        raise UserError(f"unknown report format {fmt!r}", hint="use html or md")
    owned = not isinstance(store, SqlStore)
    db = open_store(store, create=False)
    try:
        data = gather_report(db, run_id, by=by, compare=compare, failures=failures)
    finally:
        if owned:
            db.close()
    if fmt == "md":
        from evalsi.reports._markdown import render_markdown

        return render_markdown(data)
    return render_html(data)


def render_html(data: ReportData) -> str:
    from markupsafe import Markup

    charts = build_charts(data)
    svg = _svgs(charts, Markup)
    return (
        _environment()
        .get_template("report.html.j2")
        .render(
            data=data,
            run=data.run,
            svg=svg,
            charts_available=charts.available,
            no_charts=NO_CHARTS,
            manifest_json=pretty_json(data.run.manifest),
            spec_json=pretty_json(data.run.spec),
            evalsi_version=_version(),
        )
    )


def _svgs(charts: Charts, markup: Any) -> dict[str, Any]:
    # matplotlib wrote these (text inside is XML-escaped by its SVG backend): safe to inline.
    out: dict[str, Any] = {
        "ci": markup(charts.ci) if charts.ci else None,
        "outcomes": markup(charts.outcomes) if charts.outcomes else None,
        "compare": markup(charts.compare) if charts.compare else None,
    }
    out["histograms"] = {k: markup(v) for k, v in charts.histograms.items()}
    return out


@functools.cache
def _environment() -> jinja2.Environment:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("evalsi.reports", "templates"),
        autoescape=True,  # everything user-provided is escaped, whatever the template name
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        num=format_number,
        ci=format_interval,
        when=when,
        signed=signed,
        label=metric_label,
        mean=metric_mean,
        pct=percent,
        value=any_value,
    )
    env.filters.update(record_isolation=record_isolation_text)
    env.globals.update(
        duration=duration,
        failures_title=failures_title,
        gate_verdict=gate_verdict,
        isolation_warning=isolation_warning,
    )
    return env


def _version() -> str:
    from evalsi.core import VERSION

    return VERSION


# -- formatting shared by HTML and Markdown ---------------------------------------------------


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
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return str(value)


def pretty_json(value: Any) -> str:
    if value is None:
        return "null"
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
    except TypeError:
        return str(value)


# -- writing ----------------------------------------------------------------------------------


def check_output_path(path: str | os.PathLike[str]) -> Path:
    """Fail early, naming the path, when a report cannot be written there."""
    target = Path(path)
    parent = target.parent
    if target.is_dir():
        raise UserError(f"-o {path}: is a directory; give a file name such as report.html")
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        raise UserError(f"-o {path}: cannot write the report there: {parent} {what}")
    if not os.access(parent, os.W_OK):
        raise UserError(f"-o {path}: cannot write the report there: {parent} is not writable")
    return target


def write_report(text: str, path: str | os.PathLike[str]) -> Path:
    """Write ``text`` to ``path`` atomically (a half-written report never replaces a whole one).

    Raises:
        UserError: The path cannot be written; the message names it.
    """
    target = check_output_path(path)
    tmp = ""
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except OSError as e:
        if tmp:
            Path(tmp).unlink(missing_ok=True)
        raise UserError(f"-o {path}: cannot write the report: {e.strerror or e}") from e
    return target
