"""The scores online policies gave traces, read back for the TraceService.

A policy version keeps its results in a ``watch`` run with ``record_id`` = the trace id, at
``(seq, trial)`` = a hash of that id (``evalsi.policies.result_key``). The caller
passes those keys, so one query over the project's watch runs finds a page of traces' rows by
the results table's primary key ``(run, seq, trial, evaluator)`` rather than by scanning for
the record id; the record id is compared too, so two traces sharing a hash never mix.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from evalsi.core import EvaluationResult, StoreError, TraceScore
from evalsi.store._schema import results, runs
from evalsi.store._sql import SqlStore
from evalsi.store._sql import _decode as decode_result

WATCH_KIND = "watch"
MAX_TRACES = 1000
"""Trace ids one call reads (a ListTraces page at most)."""


def trace_scores(
    store: SqlStore, project: str, keys: Mapping[str, tuple[int, int]]
) -> dict[str, list[TraceScore]]:
    """The stored policy results of each trace in ``keys`` (trace id -> its ``(seq, trial)``),
    in project ``project``: by policy name, then the newest version first, then the evaluator's
    place in the policy. Traces no policy graded are left out.

    Example:
        >>> from evalsi.store import SqlStore
        >>> trace_scores(SqlStore.open(":memory:"), "default", {"ab" * 16: (1, 2)})
        {}
    """
    if not keys:
        return {}
    if len(keys) > MAX_TRACES:
        raise ValueError(f"at most {MAX_TRACES} traces at once, got {len(keys)}")
    seqs = sorted({seq for seq, _ in keys.values()})
    query = (
        sa.select(
            runs.c.id.label("run_id"),
            runs.c.name.label("policy"),
            runs.c.spec,
            runs.c.created_at,
            results.c.seq,
            results.c.trial,
            results.c.evaluator,
            results.c.record_id,
            results.c.outcome,
            results.c.kind,
            results.c.value,
            results.c.text,
            results.c.extra,
        )
        .select_from(runs.join(results, results.c.run == runs.c.pk))
        .where(
            runs.c.kind == WATCH_KIND,
            runs.c.project_id == project,
            results.c.seq.in_(seqs),
            results.c.record_id.in_(sorted(keys)),
        )
    )
    try:
        with store.engine.connect() as conn:
            rows = list(conn.execute(query).mappings())
    except sa.exc.SQLAlchemyError as e:
        raise StoreError(f"cannot read policy scores in {store.location}: {e}") from e
    found: dict[str, list[tuple[tuple[Any, ...], TraceScore]]] = {}
    for row in rows:
        trace_id = row["record_id"]
        if keys.get(trace_id) != (row["seq"], row["trial"]):
            continue  # another trace's rows at a colliding seq
        spec: dict[str, Any] = row["spec"] if isinstance(row["spec"], dict) else {}
        specs = spec.get("evaluators") or []
        index = row["evaluator"]
        result = _decode(row, specs[index] if index < len(specs) else {})
        order = (row["policy"], -row["created_at"], row["run_id"], index)
        found.setdefault(trace_id, []).append(
            (order, TraceScore(row["policy"], row["run_id"], result))
        )
    return {tid: [s for _, s in sorted(items, key=lambda x: x[0])] for tid, items in found.items()}


def _decode(row: Any, spec: dict[str, Any]) -> EvaluationResult:
    result = decode_result(row, spec)
    result.trial = 0  # the hash half, not a repetition
    return result
