"""Charts as inline SVG: matplotlib figures on the Agg canvas (no pyplot, no GUI, no network).

matplotlib is optional (``pip install evalsi[reports]``); without it ``build_charts`` returns
``Charts(available=False)`` and the report says how to get them. Text stays text in the SVG
(searchable, small), is never parsed as mathtext, and every element id is prefixed per chart,
so several charts can live in one HTML document.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, cast

from evalsi.reports._data import Distribution, ReportData

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

NO_CHARTS: Final = "install evalsi[reports] for charts"

SERIES_COLORS: Final = ("#1f5fa8", "#d9822b")
PASSED, FAILED, SKIPPED, ERRORED = "#2e7d32", "#c62828", "#9e9e9e", "#ef6c00"
LABEL_CHARS: Final = 40

_RC: Final[dict[str, Any]] = {
    "svg.fonttype": "none",
    "text.parse_math": False,  # a metric called "$x$" is text, not mathtext
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.edgecolor": "#888888",
    "axes.titlesize": 10,
    "axes.titleweight": "bold",
    "axes.titlelocation": "left",
    "figure.dpi": 72,
}


@dataclass(slots=True)
class Charts:
    """The SVG markup of each chart (None where there is nothing to draw)."""

    available: bool
    ci: str | None = None
    outcomes: str | None = None
    histograms: dict[tuple[str, str], str] = field(default_factory=dict)
    compare: str | None = None


@dataclass(frozen=True, slots=True)
class CiRow:
    """One metric in an interval chart: its label and one (mean, low, high) per series."""

    label: str
    bounded: bool  # a rate or score in [0, 1]: drawn on a shared 0..1 axis
    points: tuple[tuple[float, float | None, float | None] | None, ...]


def charts_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def build_charts(data: ReportData) -> Charts:
    """Every chart of a report, or ``Charts(available=False)`` without matplotlib."""
    if not charts_available():
        return Charts(available=False)
    charts = Charts(available=True)
    rows = [
        CiRow(
            _label(m.evaluator, m.metric),
            _bounded(m.kind, m.ci.low, m.ci.high, m.mean),
            ((m.mean, m.ci.low, m.ci.high),),
        )
        for m in data.metrics
        if m.mean is not None and m.kind in ("passed", "number")
    ]
    if rows:
        charts.ci = ci_chart(rows, ["run"], key="ci", title="95% confidence interval per metric")
    binary = [d for d in data.distributions if d.kind == "passed"]
    if binary:
        charts.outcomes = outcome_chart(binary, key="outcomes")
    for i, dist in enumerate(d for d in data.distributions if d.kind == "number"):
        stored = next(
            (m for m in data.metrics if (m.evaluator, m.metric) == (dist.evaluator, dist.metric)),
            None,
        )
        mean = stored.mean if stored is not None else None
        charts.histograms[(dist.evaluator, dist.metric)] = histogram(dist, mean, key=f"h{i}")
    if data.comparison is not None:
        charts.compare = _compare_chart(data)
    return charts


def _compare_chart(data: ReportData) -> str | None:
    assert data.comparison is not None
    # A is the baseline (--compare), B this run: the order ``evalsi compare A B`` shows.
    baseline = {(m.evaluator, m.metric): m for m in data.comparison.metrics}
    rows: list[CiRow] = []
    for b in data.metrics:
        a = baseline.get((b.evaluator, b.metric))
        if a is None or a.kind not in ("passed", "number") or a.mean is None or b.mean is None:
            continue
        bounded = _bounded(a.kind, a.ci.low, a.ci.high, a.mean) and _bounded(
            b.kind, b.ci.low, b.ci.high, b.mean
        )
        points = ((a.mean, a.ci.low, a.ci.high), (b.mean, b.ci.low, b.ci.high))
        rows.append(CiRow(_label(a.evaluator, a.metric), bounded, points))
    if not rows:
        return None
    return ci_chart(
        rows,
        ["A (baseline)", "B (this run)"],
        key="cmp",
        title="95% confidence interval per metric, A and B",
    )


def _label(evaluator: str, metric: str) -> str:
    text = metric if metric == evaluator else f"{evaluator}/{metric}"
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def _bounded(kind: str, low: float | None, high: float | None, mean: float | None) -> bool:
    if kind == "passed":
        return True
    values = [v for v in (low, high, mean) if v is not None]
    return bool(values) and all(0.0 <= v <= 1.0 for v in values)


@contextmanager
def _figure(width: float, height: float) -> Iterator[Figure]:
    import matplotlib as mpl
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with mpl.rc_context(cast(Any, _RC)):
        fig = Figure(figsize=(width, height), layout="constrained")
        FigureCanvasAgg(fig)
        yield fig


def ci_chart(rows: Sequence[CiRow], series: Sequence[str], *, key: str, title: str) -> str:
    """Horizontal error bars, one row per metric; rates share a 0..1 panel, others get one each."""
    bounded = [r for r in rows if r.bounded]
    panels: list[list[CiRow]] = ([bounded] if bounded else []) + [
        [r] for r in rows if not r.bounded
    ]
    ratios = [len(p) * len(series) * 0.32 + 0.5 for p in panels]
    with _figure(8.0, sum(ratios) + 0.5) as fig:
        axes = fig.subplots(len(panels), 1, squeeze=False, height_ratios=ratios)[:, 0]
        for n, (ax, panel) in enumerate(zip(axes, panels, strict=True)):
            _ci_panel(ax, panel, series, unit=bool(bounded) and n == 0)
        axes[0].set_title(title)
        if len(series) > 1:
            fig.legend(
                *axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=len(series)
            )
        return _svg(fig, key, title)


def _ci_panel(ax: Axes, panel: Sequence[CiRow], series: Sequence[str], *, unit: bool) -> None:
    count = len(series)
    for s, name in enumerate(series):
        ys, xs, lows, highs = [], [], [], []
        for i, row in enumerate(panel):
            point = row.points[s]
            if point is None:
                continue
            mean, low, high = point
            ys.append(i + (s - (count - 1) / 2) * 0.28)
            xs.append(mean)
            lows.append(mean - low if low is not None else 0.0)
            highs.append(high - mean if high is not None else 0.0)
        ax.errorbar(
            xs,
            ys,
            xerr=[lows, highs],
            fmt="o",
            color=SERIES_COLORS[s % len(SERIES_COLORS)],
            ecolor=SERIES_COLORS[s % len(SERIES_COLORS)],
            capsize=4,
            markersize=5,
            linewidth=1.5,
            label=name,
        )
    ax.set_yticks(range(len(panel)), [r.label for r in panel])
    ax.set_ylim(len(panel) - 0.5, -0.5)
    ax.grid(axis="x", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.tick_params(axis="y", length=0)
    if unit:
        ax.set_xlim(-0.02, 1.02)
    else:
        ax.margins(x=0.15)


def outcome_chart(dists: Sequence[Distribution], *, key: str) -> str:
    """One 100% bar per pass/fail metric: passed, failed, skipped, errors."""
    from matplotlib.ticker import PercentFormatter

    labels = [_label(d.evaluator, d.metric) for d in dists]
    parts = [
        ("passed", PASSED, [d.passed for d in dists]),
        ("failed", FAILED, [d.failed for d in dists]),
        ("skipped", SKIPPED, [d.skipped for d in dists]),
        ("errors", ERRORED, [d.errors for d in dists]),
    ]
    totals = [max(d.passed + d.failed + d.skipped + d.errors, 1) for d in dists]
    with _figure(8.0, 0.42 * len(dists) + 1.1) as fig:
        ax = fig.subplots()
        left = [0.0] * len(dists)
        ys = list(range(len(dists)))
        for name, color, counts in parts:
            widths = [c / t for c, t in zip(counts, totals, strict=True)]
            if not any(widths):
                continue
            ax.barh(ys, widths, left=left, color=color, label=name, height=0.6)
            left = [a + w for a, w in zip(left, widths, strict=True)]
        for y, d in zip(ys, dists, strict=True):
            ax.text(1.01, y, f"{d.passed}/{d.passed + d.failed} passed", va="center", fontsize=8)
        ax.set_yticks(ys, labels)
        ax.set_ylim(len(dists) - 0.5, -0.5)
        ax.set_xlim(0, 1)
        ax.xaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))
        ax.tick_params(axis="y", length=0)
        ax.set_title("Outcomes per pass/fail metric (share of records)")
        fig.legend(loc="outside lower center", ncols=4, frameon=False)
        return _svg(fig, key, "Outcomes per pass/fail metric")


def histogram(dist: Distribution, mean: float | None, *, key: str) -> str:
    """The histogram of one numeric metric (from its sample on large runs)."""
    import numpy as np
    from matplotlib.ticker import MaxNLocator

    values = np.frombuffer(dist.sample, dtype=np.float64)
    edges = np.histogram_bin_edges(values, bins="auto")
    if len(edges) > 31:
        edges = np.histogram_bin_edges(values, bins=30)
    label = _label(dist.evaluator, dist.metric)
    with _figure(4.2, 2.4) as fig:
        ax = fig.subplots()
        ax.hist(
            values, bins=edges.tolist(), color=SERIES_COLORS[0], edgecolor="white", linewidth=0.5
        )
        if mean is not None:
            ax.axvline(mean, color="#333333", linestyle="--", linewidth=1)
        ax.set_xlabel(label)
        ax.set_ylabel("records (sample)" if dist.sampled else "records")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(axis="y", color="#dddddd", linewidth=0.6)
        ax.set_axisbelow(True)
        return _svg(fig, key, "Distribution of a numeric metric")


_ID = re.compile(r'\bid="([^"]+)"')
_URL_REF = re.compile(r"url\(#([^)]+)\)")
_HREF = re.compile(r'href="#([^"]+)"')
_XMLNS = re.compile(r'\s+xmlns(?::\w+)?="[^"]*"')
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.S)


def _svg(fig: Figure, key: str, label: str) -> str:
    """The figure as an ``<svg>`` element ready to inline: no XML prolog, DTD, metadata or
    namespace URIs (HTML does not need them), ids unique to this chart."""
    import matplotlib as mpl

    buf = io.StringIO()
    with mpl.rc_context({"svg.hashsalt": f"evalsi-{key}"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = _METADATA.sub("", svg)
    svg = _XMLNS.sub("", svg)
    svg = _ID.sub(lambda m: f'id="{key}-{m.group(1)}"', svg)
    svg = _URL_REF.sub(lambda m: f"url(#{key}-{m.group(1)})", svg)
    svg = _HREF.sub(lambda m: f'href="#{key}-{m.group(1)}"', svg)
    return svg.replace("<svg ", f'<svg class="chart" role="img" aria-label="{label}" ', 1)
