"""A run's metrics per category of sample: ``evalsi run`` / ``runs show --by KEY``.

A sample's category is ``metadata[KEY]`` (``category`` unless told). Samples are not stored
with the run, so the dataset the run read (its stored ``spec.dataset``: the resolved source
and field map) is read again, position by position, and every sample's id is checked against
the one stored at that position: a dataset changed since is refused, never mislabelled.

Each category's metrics are ``summarize_stored`` over that category's samples: the same
aggregation, intervals (clustered by sample with trials) and pass@k / pass^k as the run's own
metrics, from the same stored per-task scores. It reads the stored results once per category;
categories are few (tens), and a category table over thousands of values would not be read.
Dataset-scope evaluators have no per-sample results and are left out.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from evalsi.core import MetricSummary, Scope, UserError
from evalsi.datasets import FieldMap, open_dataset
from evalsi.runs._plan import bind_all
from evalsi.runs._result import format_ci, format_number
from evalsi.runs._stored import summarize_stored
from evalsi.runs._summaries import metric_dicts

if TYPE_CHECKING:
    from evalsi.evaluators import BoundEvaluator, Registry
    from evalsi.store import RunInfo, SqlStore

DEFAULT_CATEGORY_KEY = "category"
NO_CATEGORY = "(none)"
"""The category of samples without the key, shown only when some sample has it."""


@dataclass(frozen=True, slots=True)
class CategoryMetrics:
    """The metrics of the samples whose ``metadata[key]`` is ``value``."""

    key: str
    value: str
    metrics: list[MetricSummary]
    pass_k_samples: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per ``evaluator/metric``: the samples pass@k averages over, and those left out."""

    def to_dict(self) -> dict[str, Any]:
        """As ``--format json`` prints it under ``categories``: each metric in the shape of the
        top-level ``metrics``."""
        return {
            "key": self.key,
            "value": self.value,
            "metrics": metric_dicts(self.metrics, self.pass_k_samples),
        }


def category_of(metadata: Mapping[str, Any], key: str) -> str | None:
    """A sample's category: its ``metadata[key]`` as text (a number or JSON value as JSON),
    None when it has none."""
    value = metadata.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return orjson.dumps(value).decode()


def run_categories(
    db: SqlStore,
    run_id: str,
    key: str = DEFAULT_CATEGORY_KEY,
    *,
    bound: Sequence[BoundEvaluator] | None = None,
    registry: Registry | None = None,
) -> list[CategoryMetrics]:
    """The per-category metrics of run ``run_id`` (a Run, or a grade of one), sorted by value,
    ``(none)`` last; empty when no sample has ``key``.

    ``bound`` are the run's evaluators (a finished ``RunResult`` has them); else they are
    bound again from the stored spec with ``registry`` (default: built-ins + entry points).
    """
    if not key:
        raise UserError("--by: expected a metadata key (e.g. category), got an empty one")
    info = db.get_run(run_id)
    if info.kind not in ("run", "grade"):
        raise UserError(
            f"--by: run {info.id} is a {info.kind} run; categories are read for Runs "
            "(evalsi run) and their grades",
            hint="score runs keep no sample metadata to group by",
        )
    categories = _sample_categories(db, info, key)
    if categories is None:
        return []
    evaluators = _evaluators(info, bound, registry)
    trials = int(info.spec.get("trials") or (info.summary or {}).get("trials") or 1)
    counts = _task_counts(db, run_id, categories)
    values = sorted(set(categories.values()) - {NO_CATEGORY})
    if NO_CATEGORY in categories.values():
        values.append(NO_CATEGORY)
    record_scope = {b.name for b in evaluators if b.manifest.scope is not Scope.DATASET}
    out: list[CategoryMetrics] = []
    for value in values:
        samples = {seq for seq, v in categories.items() if v == value}
        stored = summarize_stored(
            db,
            run_id,
            [(b.name, b.manifest.ref.name, b.manifest.outputs) for b in evaluators],
            trials=trials,
            task_counts=counts.get(value, {}),
            samples=samples,
        )
        pass_k = stored.pass_k_samples()
        metrics = [m for m in stored.metrics if m.evaluator in record_scope]
        out.append(CategoryMetrics(key, value, metrics, pass_k))
    return out


CATEGORY_COLUMNS = ("evaluator", "metric", "n", "mean", "95% CI")


def category_columns(category: CategoryMetrics) -> tuple[str, ...]:
    """The columns of a category's table: pass@k and pass^k when a metric has them."""
    if any(m.pass_at_k for m in category.metrics):
        return (*CATEGORY_COLUMNS, "pass@k", "pass^k")
    return CATEGORY_COLUMNS


def category_rows(category: CategoryMetrics) -> list[tuple[str, ...]]:
    """One row per metric under ``category_columns(category)``."""
    trials = any(m.pass_at_k for m in category.metrics)
    return [
        (
            m.evaluator,
            m.metric,
            str(m.n),
            format_number(m.mean),
            format_ci(m),
            *((_per_k(m.pass_at_k), _per_k(m.pass_hat_k)) if trials else ()),
        )
        for m in category.metrics
    ]


def category_title(category: CategoryMetrics) -> str:
    return f"{category.key} = {category.value}"


def _per_k(values: Mapping[str, float]) -> str:
    return ", ".join(f"{k}={v:.3f}" for k, v in values.items()) or "-"


def _sample_categories(db: SqlStore, info: RunInfo, key: str) -> dict[int, str] | None:
    """Each stored sample's category by position; None when no sample has ``key``."""
    dataset_info = _dataset_spec(db, info)
    source = dataset_info.get("source")
    if not source:
        raise UserError(f"--by: run {info.id} did not store the dataset it read")
    stored = _stored_ids(db, info)
    if not stored:
        return None
    last = max(stored)
    limit = dataset_info.get("limit")
    dataset = open_dataset(str(source), fields=FieldMap(**(dataset_info.get("fields") or {})))
    found: dict[int, str | None] = {}
    records = itertools.chain.from_iterable(dataset.iter_batches(1024))
    for seq, record in enumerate(records):
        if seq > last or (limit is not None and seq >= limit):
            break
        expected = stored.get(seq)
        if expected is None:
            continue
        if expected != record.id:
            raise UserError(
                f"--by: the dataset {source} changed since run {info.id} ran (position {seq} "
                f"holds sample {record.id!r}, the run stored {expected!r})",
                hint="categories are read from the dataset the run read; restore it",
            )
        found[seq] = category_of(record.metadata, key)
    if len(found) < len(stored):
        raise UserError(
            f"--by: the dataset {source} is shorter than when run {info.id} ran",
            hint="categories are read from the dataset the run read; restore it",
        )
    if all(v is None for v in found.values()):
        return None
    return {seq: NO_CATEGORY if v is None else v for seq, v in found.items()}


def _dataset_spec(db: SqlStore, info: RunInfo) -> Mapping[str, Any]:
    """The stored ``spec.dataset`` (source, fields, limit) of a Run, or of a grade's source."""
    spec = info.spec
    if info.kind == "grade":
        spec = db.get_run(str(spec.get("source_run"))).spec
    dataset = spec.get("dataset")
    if isinstance(dataset, Mapping):
        return dataset
    return {"source": spec.get("data")}


def _stored_ids(db: SqlStore, info: RunInfo) -> dict[int, str]:
    """The sample id the run stored at each position (from its results: a grade run has no
    outputs of its own)."""
    ids: dict[int, str] = {}
    for seq, _, result in db.iter_results(info.id):
        if seq >= 0:
            ids.setdefault(seq, result.record_id)
    return ids


def _task_counts(
    db: SqlStore, run_id: str, categories: Mapping[int, str]
) -> dict[str, dict[str, int]]:
    """Each category's task statuses (its infra errors and cancellations, counted beside every
    metric as the run's are)."""
    counts: dict[str, Counter[str]] = {}
    rows: Iterator[Any] = db.iter_outputs(run_id)
    for row in rows:
        value = categories.get(row.seq)
        if value is not None:
            counts.setdefault(value, Counter())[row.status] += 1
    return {value: dict(c) for value, c in counts.items()}


def _evaluators(
    info: RunInfo, bound: Sequence[BoundEvaluator] | None, registry: Registry | None
) -> Sequence[BoundEvaluator]:
    if bound is not None:
        return bound
    if registry is None:
        from evalsi.packs import builtin_registry

        registry = builtin_registry()
    entries = [
        {"ref": e["ref"], "name": e["name"], "params": e.get("params") or {}}
        for e in info.evaluators
    ]
    return bind_all(entries, registry=registry)
