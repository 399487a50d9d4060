"""The report as GitHub-flavoured Markdown: the HTML report's sections, as tables, no images.

Every value that came from the user goes through ``text``: Markdown and HTML syntax in it is
escaped and line breaks folded, so a record cannot add formatting, links or HTML to the report,
nor break a table row.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from evalsi.reports._data import ReportData
from evalsi.reports._format import (
    any_value,
    duration,
    failures_title,
    format_interval,
    gate_verdict,
    isolation_warning,
    metric_label,
    metric_mean,
    percent,
    pretty_json,
    record_isolation_text,
    signed,
    when,
)
from evalsi.runs import format_number

_SPECIAL = re.compile(r"([\\`*_\[\]<>|~])")
_CELL_TEXT = 200
Add = Callable[[str], None]


def text(value: object, limit: int | None = None) -> str:
    """User text made literal for Markdown (tables included): one line, syntax escaped."""
    s = " ".join(str(value).split())
    if limit is not None and len(s) > limit:
        s = s[:limit] + "…"
    s = s.replace("&", "&amp;")
    return _SPECIAL.sub(_escape_one, s)


def _escape_one(match: re.Match[str]) -> str:
    char = match.group(1)
    return {"<": "&lt;", ">": "&gt;"}.get(char, "\\" + char)


def _text_with_code(value: str) -> str:
    """Text whose `backticked` spans are code (a warning naming a gate and a command)."""
    parts = value.split("`")
    if len(parts) % 2 == 0:  # an unmatched backtick: all literal
        return text(value)
    return "".join(code(p) if i % 2 else _spaced(p) for i, p in enumerate(parts))


def _spaced(value: str) -> str:
    """``text`` keeping one space where ``value`` starts or ends with whitespace."""
    lead = " " if value[:1].isspace() else ""
    trail = " " if value[-1:].isspace() and value.strip() else ""
    return lead + text(value) + trail


def code(value: object) -> str:
    """Inline code that holds any backticks in ``value`` (GFM: a longer fence)."""
    s = " ".join(str(value).split()).replace("|", "\\|")
    longest = max((len(m) for m in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def table(
    columns: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[int] = ()
) -> str:
    """A GFM table; the ``numeric`` columns are right-aligned."""
    align = ["---:" if i in numeric else "---" for i in range(len(columns))]
    lines = ["| " + " | ".join(columns) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _fenced(body: str, lang: str = "") -> str:
    longest = max((len(m) for m in re.findall(r"`{3,}", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{body}\n{fence}"


def render_markdown(data: ReportData, *, summary: bool = False) -> str:
    """The report; ``summary`` keeps what a pull-request comment needs (GitHub refuses bodies
    over 65,536 characters, and a long one is not read): the run in one line, metrics, gates,
    comparison. The full report's failures, distributions and manifest stay in the file."""
    if summary:
        return _summary(data)
    run = data.run
    out: list[str] = []
    add = out.append
    add(f"# evalsi report · run {code(run.id)}")
    facts = [
        ("run id", code(run.id)),
        ("name", text(run.name) if run.name else "-"),
        ("kind", text(run.kind)),
        ("status", text(run.status)),
        ("created", when(run.created_at)),
        ("finished", _finished(data)),
        ("records", _records(data)),
        ("dataset", code(data.dataset_source) if data.dataset_source else "-"),
        ("dataset version", code(data.dataset_version) if data.dataset_version else "-"),
        ("evalsi version", text((run.manifest or {}).get("evalsi_version", "-"))),
    ]
    add(table(("", ""), [(f"**{k}**", v) for k, v in facts]))
    if (run.summary or {}).get("external"):
        add(
            "> **Verdicts computed outside evalsi:** these results were ingested as they came "
            "(evaluators marked external); evalsi stored them and cannot derive them again."
        )
    if run.error:
        add(f"> **The run stopped:** {text(run.error)}")
    if data.run_warnings or data.failure_causes:
        _warnings(data, add)
    _metrics(data, add)
    if data.isolation:
        _isolation(data, add)
    add("## Distributions\n\n_Charts are in the HTML report (`--format html`)._")
    _distributions(data, add)
    if data.by is not None:
        _slices(data, add)
    _failures(data, add)
    _gates(data, add)
    if data.comparison is not None:
        _comparison(data, add)
    add("## Manifest")
    add(_fenced(pretty_json(run.manifest), "json"))
    return "\n\n".join(out) + "\n"


def _summary(data: ReportData) -> str:
    run = data.run
    out: list[str] = []
    add = out.append
    add(f"### evalsi · run {code(run.id)}")
    line = [f"{text(run.kind)}, {text(run.status)}", f"{_records(data)} records"]
    if run.name:
        line.insert(0, f"**{text(run.name)}**")
    if data.dataset_source:
        line.append(f"dataset {code(data.dataset_source)}")
    add(" · ".join(line))
    if run.error:
        add(f"> **The run stopped:** {text(run.error)}")
    if data.comparison is not None:  # first: what a reviewer of the change comes for
        _comparison(data, add, "####")
    _gates(data, add, "####")
    _metrics(data, add, "####")
    return "\n\n".join(out) + "\n"


def _finished(data: ReportData) -> str:
    run = data.run
    took = duration(run.created_at, run.finished_at)
    return when(run.finished_at) + (f" ({took})" if took else "")


def _records(data: ReportData) -> str:
    bad = (data.run.summary or {}).get("bad_records") or 0
    return str(data.run.records) + (f" ({bad} bad records skipped)" if bad else "")


def _metrics(data: ReportData, add: Callable, h: str = "##") -> None:  # type: ignore[type-arg]
    add(f"{h} Metrics")
    if not data.metrics:
        add(f"_This run stored no metric summary (it is {text(data.run.status)})._")
        return
    rows = [
        (
            text(m.evaluator),
            text(m.metric),
            str(m.n),
            text(metric_mean(m)),
            format_interval(m.ci),
            text(m.ci.method),
            str(m.skipped),
            str(m.errors),
        )
        for m in data.metrics
    ]
    columns = ("evaluator", "metric", "n", "mean", "95% CI", "method", "skipped", "errors")
    add(table(columns, rows, numeric=(2, 3, 4, 6, 7)))
    method = "Wilson for pass rates, Student t for means"
    if data.cluster_by:
        method += f", clustered by {code(data.cluster_by)}"
    add(f"n counts scored values only. Intervals: {method}.")


def _warnings(data: ReportData, add: Add) -> None:
    """What the run noticed without stopping, and why tasks failed: before the figures they
    qualify."""
    add("## Warnings")
    lines = []
    for w in data.run_warnings:
        lines.append(f"- **{text(w.get('kind', ''))}:** {text(w.get('message', ''), 600)}")
        lines.extend(f"  - {text(e, _CELL_TEXT)}" for e in list(w.get("examples") or [])[1:])
    for what, c in data.failure_causes:
        lines.append(
            f"- **{what} {text(c.get('kind', ''))}** ×{text(c.get('count', 0))}: "
            f"{text(c.get('example', ''), 600)}"
        )
    add("\n".join(lines))


def _isolation(data: ReportData, add: Add) -> None:
    add("## Sandbox isolation")
    rows = [
        (
            text(i.evaluator),
            text(i.level),
            text(", ".join(i.drivers) or "-"),
            f"**{i.enforcement}**" if i.enforcement == "partial" else i.enforcement,
            text(", ".join(i.missing), _CELL_TEXT) or "-",
            str(i.sandboxed),
            str(i.unreported),
        )
        for i in data.isolation
    ]
    columns = ("evaluator", "level", "drivers", "enforcement", "missing", "sandboxed", "unreported")
    add(table(columns, rows, numeric=(5, 6)))
    add(
        "level is the weakest any scored result ran at (none < confined < namespaced < kernel "
        "< vm); enforcement is partial when a sandbox limit the evaluator asked for was missing."
    )
    for i in data.isolation:
        warning = isolation_warning(i)
        if warning:
            add(f"> **warning:** {text(warning)}")


def _distributions(data: ReportData, add: Add) -> None:
    binary = [d for d in data.distributions if d.kind == "passed"]
    numeric = [d for d in data.distributions if d.kind == "number"]
    rows: list[tuple[str, ...]]
    if binary:
        rows = [
            (
                text(metric_label(d.evaluator, d.metric)),
                str(d.passed),
                str(d.failed),
                percent(d.passed, d.passed + d.failed),
                str(d.skipped),
                str(d.errors),
            )
            for d in binary
        ]
        add("### Pass / fail")
        columns: tuple[str, ...] = ("metric", "passed", "failed", "pass rate", "skipped", "errors")
        add(table(columns, rows, numeric=(1, 2, 3, 4, 5)))
    if numeric:
        rows = []
        for d in numeric:
            q = d.quantiles()
            rows.append(
                (
                    text(metric_label(d.evaluator, d.metric)),
                    str(d.seen),
                    *(format_number(q.get(k)) for k in ("min", "p25", "median", "p75", "max")),
                )
            )
        add("### Numeric metrics")
        columns = ("metric", "n", "min", "p25", "median", "p75", "max")
        add(table(columns, rows, numeric=(1, 2, 3, 4, 5, 6)))
        if any(d.sampled for d in numeric):
            add(
                f"_Quartiles of large runs come from a uniform sample of {len(numeric[0].sample)} "
                "values; min and max are exact._"
            )
    for m in data.metrics:
        if m.kind != "label" or not m.labels:
            continue
        add(f"### Labels: {text(metric_label(m.evaluator, m.metric))}")
        ordered = sorted(m.labels.items(), key=lambda kv: (-kv[1], kv[0]))
        rows = [(text(k), str(v), percent(v, m.n)) for k, v in ordered]
        add(table(("label", "count", "share"), rows, numeric=(1, 2)))
    if not binary and not numeric and not any(m.kind == "label" for m in data.metrics):
        add("_No per-record values to show._")


def _slices(data: ReportData, add: Add) -> None:
    by = data.by or ""
    add(f"## Slices by {code(by)}")
    if data.slices_problem:
        add(f"> **Not sliced:** {text(data.slices_problem)}.")
        return
    if not data.slices:
        add("_No scored values to slice._")
        return
    add(
        f"{data.slice_values} distinct value(s) of {code(by)}, read from the run's dataset and "
        "joined by record position. Per slice: Wilson intervals for pass rates, Student t for "
        "means (not clustered)."
    )
    for t in data.slices:
        add(f"### {text(metric_label(t.evaluator, t.metric))}")
        head = "pass rate" if t.kind == "passed" else "mean"
        rows = [
            (
                text(r.value, _CELL_TEXT),
                str(r.n),
                format_number(r.mean),
                format_interval(r.ci),
                text(r.ci.method),
            )
            for r in t.rows
        ]
        add(table((text(by), "n", head, "95% CI", "method"), rows, numeric=(1, 2, 3)))


def _failures(data: ReportData, add: Add) -> None:
    add("## Failures")
    if data.failures_limit == 0:
        add("_Not listed (--failures 0)._")
        return
    add(failures_title(data) + ".")
    if not data.failures:
        return
    if data.records_problem:
        add(f"> **Inputs and outputs are not shown:** {text(data.records_problem)}.")
    sandboxed = any(f.isolation is not None for f in data.failures)
    rows = []
    for f in data.failures:
        problems = "; ".join(
            f"{p.outcome} {text(metric_label(p.evaluator, p.metric))}"
            + (f" (trial {p.trial})" if p.trial else "")
            + (f": {text(p.detail, _CELL_TEXT)}" if p.detail else "")
            for p in f.problems
        )
        row = (code(f.record_id), problems, *(_cell(v) for v in (f.input, f.output, f.reference)))
        if sandboxed:
            row = (*row, text(record_isolation_text(f.isolation), _CELL_TEXT))
        rows.append(row)
    columns = ("record", "problems", "input", "output", "reference")
    add(table((*columns, "isolation") if sandboxed else columns, rows))


def _cell(value: str | None) -> str:
    return "-" if value is None else text(value, _CELL_TEXT)


def _gates(data: ReportData, add: Add, h: str = "##") -> None:
    add(f"{h} Gates")
    if not data.gates:
        add("no gates")
        return
    rows = []
    for g in data.gates:
        verdict = gate_verdict(g)
        shown = f"**{verdict}**" if verdict != "passed" else verdict
        reason = text(g.get("reason") or "", _CELL_TEXT) or "-"
        rows.append((code(g.get("expr", "")), shown, text(any_value(g.get("value"))), reason))
    add(table(("gate", "verdict", "value", "reason"), rows, numeric=(2,)))
    for w in data.gate_warnings:
        add(f"> **warning:** {_text_with_code(w)}")


def _comparison(data: ReportData, add: Add, h: str = "##") -> None:
    c = data.comparison
    assert c is not None
    add(f"{h} Comparison with run {code(c.run.id)}")
    intro = f"Baseline A is {code(c.run.id)}, B is this run; Δ = B − A."
    if c.paired:
        intro += (
            " Records scored in both runs are paired by id: means over the pairs, a paired "
            "bootstrap interval and p-value for Δ, McNemar's test for pass/fail metrics."
        )
    add(intro)
    for w in c.warnings:
        add(f"> **warning:** {text(w)}")
    columns: tuple[str, ...]
    rows: list[tuple[str, ...]]
    if c.paired:
        columns = (
            "evaluator",
            "metric",
            "pairs",
            "A",
            "B",
            "Δ",
            "95% CI of Δ",
            "p",
            "McNemar p",
            "verdict",
        )
        rows = [
            (
                text(r.evaluator),
                text(r.metric),
                str(r.n_paired),
                format_number(r.mean_a),
                format_number(r.mean_b),
                signed(r.delta),
                format_interval(r.ci),
                format_number(r.p_value),
                format_number(r.mcnemar_p),
                text(r.verdict),
            )
            for r in c.rows
        ]
        add(table(columns, rows, numeric=(2, 3, 4, 5, 6, 7, 8)))
    else:
        columns = ("evaluator", "metric", "n A", "mean A", "n B", "mean B", "Δ")
        rows = [
            (
                text(r.evaluator),
                text(r.metric),
                "-" if r.n_a is None else str(r.n_a),
                format_number(r.mean_a),
                "-" if r.n_b is None else str(r.n_b),
                format_number(r.mean_b),
                signed(r.delta),
            )
            for r in c.rows
        ]
        add(table(columns, rows, numeric=(2, 3, 4, 5, 6)))
    for n in c.notes:
        add(f"- {text(n)}")
