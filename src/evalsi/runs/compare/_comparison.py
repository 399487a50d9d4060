"""The result of comparing two runs: one ``MetricComparison`` per common metric, the metrics
only one run holds (``Unmatched``), and the ``Comparison`` that gathers them with its JSON,
plain-text table and Markdown renderings. ``compare_runs`` (in ``_compare``) builds them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from evalsi.core import Interval
from evalsi.runs._result import find_metric, format_number, render_markdown, render_plain
from evalsi.stats import McNemar

Verdict = Literal["improved", "regressed", "changed", "no significant change", "insufficient data"]
CompareKind = Literal["passed", "number"]


@dataclass(frozen=True, slots=True)
class MetricComparison:
    """One metric of two runs, compared on the records scored in both.

    Attributes:
        evaluator: Evaluator instance name.
        metric: Metric name.
        kind: ``"passed"`` (pass/fail, compared as 0/1) or ``"number"``.
        n_paired: Records (× trials) scored in both runs.
        n_a: Values scored in run A (paired or not).
        n_b: Values scored in run B (paired or not).
        mean_a: Mean of run A over the paired records (not over all of run A).
        mean_b: Mean of run B over the paired records.
        delta: ``mean(b - a)`` over the pairs.
        ci: Paired percentile bootstrap interval for ``delta``.
        p_value: Two-sided paired-bootstrap p-value for ``delta == 0``.
        mcnemar: McNemar's test on the pairs, for pass/fail metrics.
        verdict: ``improved``/``regressed`` (the interval excludes 0; the direction read from
            ``higher_is_better``), ``changed`` (excludes 0, direction unknown), ``no significant
            change``, or ``insufficient data`` (fewer than two pairs).
        mde: Approximate minimum detectable effect of this paired design at 80% power and the
            comparison's level: ``(z(1 - alpha/2) + z(0.8)) × SD(b - a) / √n``, about
            ``2.8 × SD/√n`` at 95%.
        higher_is_better: As stored with the runs' summaries (True by default for pass/fail).
        note: ``"n=… can only detect differences ≥ …"`` when the change is not significant and
            smaller than ``mde``; empty otherwise.
    """

    evaluator: str
    metric: str
    kind: CompareKind
    n_paired: int
    n_a: int
    n_b: int
    mean_a: float | None
    mean_b: float | None
    delta: float | None
    ci: Interval
    p_value: float | None
    mcnemar: McNemar | None
    verdict: Verdict
    mde: float | None
    higher_is_better: bool | None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        test = self.mcnemar
        return {
            "evaluator": self.evaluator,
            "metric": self.metric,
            "kind": self.kind,
            "n_paired": self.n_paired,
            "n_a": self.n_a,
            "n_b": self.n_b,
            "mean_a": self.mean_a,
            "mean_b": self.mean_b,
            "delta": self.delta,
            "ci": [self.ci.low, self.ci.high],
            "ci_method": self.ci.method,
            "p_value": self.p_value,
            "mcnemar": None if test is None else asdict(test),
            "verdict": self.verdict,
            "mde": self.mde,
            "higher_is_better": self.higher_is_better,
            "note": self.note,
        }


@dataclass(frozen=True, slots=True)
class Unmatched:
    """A metric only one of the two runs holds."""

    evaluator: str
    metric: str
    only_in: Literal["a", "b"]
    run_id: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Comparison:
    """Run B against run A (the baseline), metric by metric; see ``compare_runs``."""

    run_a: str
    run_b: str
    dataset_versions: tuple[str | None, str | None]
    metrics: list[MetricComparison]
    unmatched: list[Unmatched] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    level: float = 0.95
    seed: int = 0

    def metric(self, evaluator: str, metric: str | None = None) -> MetricComparison:
        """The comparison of one metric (the evaluator's own metric when ``metric`` is omitted)."""
        return find_metric(self.metrics, evaluator, metric, "compared metric")

    def to_dict(self) -> dict[str, Any]:
        """One JSON object: runs, dataset versions, warnings, metrics, unmatched metrics."""
        return {
            "run_a": self.run_a,
            "run_b": self.run_b,
            "dataset_versions": list(self.dataset_versions),
            "level": self.level,
            "seed": self.seed,
            "warnings": list(self.warnings),
            "metrics": [m.to_dict() for m in self.metrics],
            "unmatched": [u.to_dict() for u in self.unmatched],
        }

    def columns(self) -> tuple[str, ...]:
        """The table's header (the interval column names the level)."""
        interval = f"{_percent(self.level)} CI"
        return ("evaluator", "metric", "n", "A", "B", "Δ", interval, "p", "McNemar p", "verdict")

    def rows(self) -> list[tuple[str, ...]]:
        """One row per compared metric, in ``columns()`` order."""
        return [_row(m) for m in self.metrics]

    def notes(self) -> list[str]:
        """Lines to print under the table: minimum detectable effects, unmatched metrics."""
        lines = [f"{m.evaluator}/{m.metric}: {m.note}" for m in self.metrics if m.note]
        lines += [
            f"only in {'A' if u.only_in == 'a' else 'B'} ({u.run_id}): {u.evaluator}/{u.metric}"
            for u in self.unmatched
        ]
        return lines

    def table(self) -> str:
        """Plain text: a title, the table, then warnings and notes."""
        return self._render(render_plain(self.columns(), self.rows()), bullet="")

    def markdown(self) -> str:
        """The same in Markdown, for CI summaries."""
        table = render_markdown(self.columns(), self.rows())
        return self._render(table, bullet="- ", title=f"**{self.title()}**")

    def title(self) -> str:
        return f"compare A {self.run_a} → B {self.run_b} · paired, {_percent(self.level)} intervals"

    def _render(self, table: str, *, bullet: str, title: str | None = None) -> str:
        parts = [title or self.title(), table]
        if self.warnings:
            parts.append("\n".join(f"{bullet}warning: {w}" for w in self.warnings))
        notes = self.notes()
        if notes:
            parts.append("\n".join(f"{bullet}{n}" for n in notes))
        return "\n\n".join(parts)


def _percent(level: float) -> str:
    return f"{level * 100:g}%"


def _signed(value: float | None) -> str:
    text = format_number(value)
    return f"+{text}" if value is not None and value > 0 else text


def _row(m: MetricComparison) -> tuple[str, ...]:
    ci = "-"
    if m.ci.low is not None and m.ci.high is not None:
        ci = f"[{_signed(m.ci.low)}, {_signed(m.ci.high)}]"
    return (
        m.evaluator,
        m.metric,
        str(m.n_paired),
        format_number(m.mean_a),
        format_number(m.mean_b),
        _signed(m.delta),
        ci,
        format_number(m.p_value),
        "-" if m.mcnemar is None else format_number(m.mcnemar.p_value),
        m.verdict,
    )
