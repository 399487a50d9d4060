"""What ``evalsi.evaluate`` returns: the run id, the metric summaries, and the results on demand."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import orjson

from evalsi.core import EvaluationResult, MetricSummary, Outcome, Score
from evalsi.runs._failing import SHOWN_FAILURES, FailingRecord, first_failures
from evalsi.runs._failures import first_error_reason, judged_nothing
from evalsi.runs._isolation import IsolationSummary, RecordIsolation, iter_record_isolation
from evalsi.runs.gates import GATE_COLUMNS, gate_rows, gates_exit_code

if TYPE_CHECKING:
    from evalsi.store import SqlStore


def format_number(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "-"
    if value != 0 and (abs(value) >= 1e5 or abs(value) < 0.1):
        return f"{value:.{digits}g}"
    return f"{value:.{digits}f}"


def format_ci(m: MetricSummary) -> str:
    if m.ci.low is None or m.ci.high is None:
        return "-"
    return f"[{format_number(m.ci.low)}, {format_number(m.ci.high)}]"


TABLE_COLUMNS = ("evaluator", "metric", "n", "mean", "95% CI", "method", "skipped", "errors")


def metric_columns(metrics: Sequence[MetricSummary]) -> tuple[str, ...]:
    """``TABLE_COLUMNS``, and ``infra`` when a metric lost results to infrastructure: only
    then, so the common table stays as it is and a lost judge cannot pass for a clean run."""
    return (*TABLE_COLUMNS, "infra") if _any_infra(metrics) else TABLE_COLUMNS


def _any_infra(metrics: Sequence[MetricSummary]) -> bool:
    return any(m.infra_errors for m in metrics)


def metric_rows(metrics: list[MetricSummary]) -> list[tuple[str, ...]]:
    """One row per metric under ``metric_columns(metrics)``."""
    infra = _any_infra(metrics)
    rows: list[tuple[str, ...]] = []
    for m in metrics:
        mean = format_number(m.mean)
        if m.kind == "label" and m.labels:
            top = sorted(m.labels.items(), key=lambda kv: -kv[1])[:3]
            mean = ", ".join(f"{k}:{v}" for k, v in top)
        elif m.kind == "structured" and m.n:
            mean = "(structured: see --format json)"
        rows.append(
            (
                m.evaluator,
                m.metric,
                str(m.n),
                mean,
                format_ci(m),
                m.ci.method,
                str(m.skipped),
                str(m.errors),
                *((str(m.infra_errors),) if infra else ()),
            )
        )
    return rows


ISOLATION_COLUMNS = ("evaluator", "level", "drivers", "enforcement", "missing", "sandboxed")


def isolation_rows(items: Sequence[IsolationSummary]) -> list[tuple[str, ...]]:
    """One row per sandboxed evaluator; partial enforcement is upper-cased so it stands out."""
    rows: list[tuple[str, ...]] = []
    for i in items:
        sandboxed = str(i.sandboxed)
        if i.unreported:
            sandboxed += f" ({i.unreported} unreported)"
        enforcement = "PARTIAL" if i.enforcement == "partial" else "full"
        if i.partial:
            enforcement += f" ({i.partial} of {i.sandboxed})"
        rows.append(
            (
                i.evaluator,
                i.level,
                ", ".join(i.drivers) or "-",
                enforcement,
                ", ".join(i.missing) or "-",
                sandboxed,
            )
        )
    return rows


def render_plain(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Aligned plain text with a rule under the header (logs, pipes, CI)."""
    all_rows = [tuple(columns), *[tuple(r) for r in rows]]
    widths = [max(len(r[i]) for r in all_rows) for i in range(len(columns))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in all_rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def render_markdown(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub Markdown table; a cell's ``|`` is escaped and its line breaks become ``<br>``
    (a reason with a hint on its own line must not end the row)."""
    head = "| " + " | ".join(columns) + " |"
    sep = "|" + "|".join("---" for _ in columns) + "|"
    body = ["| " + " | ".join(_md_cell(c) for c in r) + " |" for r in rows]
    return "\n".join([head, sep, *body])


class _Named(Protocol):
    @property
    def evaluator(self) -> str: ...
    @property
    def metric(self) -> str: ...


_M = TypeVar("_M", bound=_Named)


def find_metric(metrics: Sequence[_M], evaluator: str, metric: str | None, what: str) -> _M:
    """The entry of ``metric`` of ``evaluator`` in ``metrics``; with ``metric`` omitted, the
    evaluator's own metric, else its first. ``what`` names the entry in the KeyError."""
    for m in metrics:
        if m.evaluator == evaluator and m.metric == (metric or evaluator):
            return m
    for m in metrics:
        if m.evaluator == evaluator and metric is None:
            return m
    raise KeyError(f"no {what} {metric or evaluator!r} for evaluator {evaluator!r}")


def _md_cell(text: str) -> str:
    return "<br>".join(text.replace("|", "\\|").splitlines()) if text else text


@dataclass
class ScoreResult:
    """The outcome of a Score run.

    ``metrics`` holds one summary per metric; ``results`` reads the per-record results back
    from the store (streamed there while the run went on, so large runs stay small in memory).
    ``gates`` holds one ``{"expr", "passed", "verdict", "value", "reason"}`` dict per gate;
    ``exit_code`` is what the CLI exits with (0 all passed, 1 one failed, 2 undecided).
    """

    run_id: str
    status: str
    records: int
    metrics: list[MetricSummary]
    dataset_source: str
    dataset_version: str | None
    bad_records: int = 0
    bad_examples: list[tuple[int, str]] = field(default_factory=list)
    evaluators: list[dict[str, Any]] = field(default_factory=list)
    store: SqlStore | None = None
    gates: list[dict[str, Any]] = field(default_factory=list)
    dataset_results: list[EvaluationResult] = field(default_factory=list)
    """One result per dataset-scope evaluator (corpus BLEU, a confusion matrix…), with its
    explanation and metadata (a sacrebleu signature, skip reasons)."""
    warnings: list[dict[str, Any]] = field(default_factory=list)
    """What the run noticed without stopping, one ``{"kind", "message", "count", "examples"}``
    each: bad records skipped, record ids that repeat, and for a Run the tasks lost to target
    or infrastructure errors (``kind`` ``target_errors`` / ``infra_errors``)."""
    isolation: list[IsolationSummary] = field(default_factory=list)
    """Per evaluator that ran code in the sandbox: the weakest level its scored results ran at,
    the drivers, the enforcement (partial with what was missing) and how many results reported
    isolation (``sandboxed``) or did not (``unreported``)."""

    @property
    def exit_code(self) -> int:
        """The CLI's exit code: 3 when an evaluator judged nothing because every attempt failed
        on infrastructure (an unreachable judge), 2 when one judged nothing because every
        record it tried was an error (a judge refusing its key), else the gates' verdict."""
        if self.lost_evaluators:
            return 3
        return 2 if self.unjudged_evaluators else gates_exit_code(self.gates)

    @property
    def lost_evaluators(self) -> list[str]:
        """Evaluators that scored nothing and lost records to infrastructure errors."""
        lost = (m.evaluator for m in self.metrics if m.infra_errors and not m.scored)
        return list(dict.fromkeys(lost))

    @property
    def unjudged_evaluators(self) -> list[str]:
        """Evaluators that scored nothing because every record they tried was an error."""
        found = (m.evaluator for m in self.metrics if m.errors and not (m.scored or m.infra_errors))
        return list(dict.fromkeys(found))

    def first_error_reason(self, evaluator: str, infra: bool = False) -> str:
        """The reason of ``evaluator``'s first error (infrastructure only with ``infra``);
        "" when none is stored or the result has no store."""
        if not self.has_results:
            return ""
        return first_error_reason(self.iter_results(outcome=Outcome.ERROR), evaluator, infra)

    def judged_nothing(self) -> list[dict[str, Any]]:
        """A warning per evaluator that judged nothing (``runs._failures.judged_nothing``)."""
        return judged_nothing(self.metrics, self.first_error_reason)

    def metric(self, evaluator: str, metric: str | None = None) -> MetricSummary:
        """The summary of one metric (the evaluator's own metric when ``metric`` is omitted)."""
        return find_metric(self.metrics, evaluator, metric, "metric")

    @property
    def has_results(self) -> bool:
        """Whether ``iter_results`` can read this run's results (an open store, or a server)."""
        return self.store is not None and not self.store.closed

    def failures(self, limit: int = SHOWN_FAILURES) -> list[FailingRecord]:
        """The first ``limit`` failing results (a pass/fail score that did not pass, or an
        error) and why, in record order; none for a result attached to no store. Reading
        stops at the limit, but a run with fewer failures is read to its end."""
        if not self.has_results:
            return []
        return first_failures(self.iter_results(), limit)

    @property
    def results(self) -> list[EvaluationResult]:
        """Every (record, evaluator) result, in record order, read from the store."""
        return list(self.iter_results())

    def iter_results(self, *, outcome: Outcome | None = None) -> Any:
        if self.store is None:
            raise RuntimeError("this result is not attached to a store")
        for _seq, _index, result in self.store.iter_results(self.run_id, outcome=outcome):
            yield result

    def iter_record_isolation(self) -> Iterator[RecordIsolation]:
        """Each record with sandboxed results, in dataset order, with the isolation its
        provenance gets: the weakest level across its scores (every evaluator and trial), that
        execution's driver, and details ``enforcement`` (partial if any was) and ``missing``."""
        if self.store is None:
            raise RuntimeError("this result is not attached to a store")
        return iter_record_isolation(self.store, self.run_id)

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract of ``--format json``, plus the dataset version and bad-record count,
        the warnings and the first failing results (``failures``)."""
        return {
            "run_id": self.run_id,
            "status": self.status,
            "records": self.records,
            "metrics": [m.to_dict() for m in self.metrics],
            "gates": list(self.gates),
            "infra_errors": sum(m.infra_errors for m in self.metrics),
            "dataset": {"source": self.dataset_source, "version": self.dataset_version},
            "bad_records": self.bad_records,
            "evaluators": self.evaluators,
            "dataset_results": [_dataset_result_dict(r) for r in self.dataset_results],
            "isolation": [i.to_dict() for i in self.isolation],
            "warnings": [dict(w) for w in self.warnings],
            "failures": [f.to_dict() for f in self.failures()],
        }

    def to_json(self, *, indent: bool = True) -> str:
        option = orjson.OPT_INDENT_2 if indent else 0
        return orjson.dumps(self.to_dict(), option=option).decode()

    def table(self) -> str:
        """A plain-text table of n / mean / 95% CI per metric, then the gates if any."""
        return self._tables(render_plain, "\n\n{}\n")

    def markdown(self) -> str:
        """The same tables in Markdown, for CI summaries."""
        tables = self._tables(render_markdown, "\n\n**{}**\n\n")
        return f"**run** `{self.run_id}` · {self.records} records\n\n{tables}"

    def _tables(
        self, render: Callable[[Sequence[str], Sequence[Sequence[str]]], str], heading: str
    ) -> str:
        """The metrics table, then isolation and gates (when any) under ``heading``."""
        table = render(metric_columns(self.metrics), metric_rows(self.metrics))
        if self.isolation:
            table += heading.format("sandbox isolation")
            table += render(ISOLATION_COLUMNS, isolation_rows(self.isolation))
        if self.gates:
            table += heading.format("gates") + render(GATE_COLUMNS, gate_rows(self.gates))
        return table

    def __repr__(self) -> str:
        return f"<ScoreResult {self.run_id} {self.status} records={self.records}>\n{self.table()}"

    def _repr_markdown_(self) -> str:
        return self.markdown()


def _dataset_result_dict(result: EvaluationResult) -> dict[str, Any]:
    """A dataset-scope result as ``--format json`` prints it: each score's value, explanation
    and metadata (what a summary row cannot hold: a matrix, a signature, skip reasons)."""
    out: dict[str, Any] = {
        "evaluator": result.evaluator,
        "ref": result.evaluator_ref,
        "outcome": result.outcome.name.lower(),
    }
    if result.reason:
        out["reason"] = result.reason
    out["scores"] = [_score_dict(s) for s in result.scores]
    return out


def _score_dict(s: Score) -> dict[str, Any]:
    kinds = ("number", "passed", "label", "structured")
    values = {k: v for k in kinds if (v := getattr(s, k)) is not None}
    extra = {k: v for k in ("explanation", "metadata") if (v := getattr(s, k))}
    return {"name": s.name, **values, **extra}
