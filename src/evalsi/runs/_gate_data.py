"""What a stored run's gates read besides its metrics: paired deltas against a baseline run and
the number of flaky cases (``runs.gates.GateData``).

``delta('exact-match', baseline='RUN')`` is ``compare_runs(store, RUN, this run)`` for that
metric: the mean paired difference (this run minus the baseline) with its paired bootstrap
interval, exactly what ``evalsi compare`` prints. ``flaky_cases()`` counts the scenarios whose
eligible trials neither all passed nor all failed (``runs._cases``), read once from the stored
outputs and results, in (seq, trial) order.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from evalsi.core import EvalsiError, Outcome
from evalsi.runs._cases import CaseBuilder
from evalsi.runs.gates import GateData

if TYPE_CHECKING:
    from evalsi.store import SqlStore


def stored_gate_data(
    store: SqlStore, run_id: str, *, trials: int, record_scope: Sequence[int]
) -> GateData:
    """``GateData`` for run ``run_id`` of ``store`` (a Run, or a Score run with ``trials`` 1)."""

    def delta(evaluator: str, metric: str, baseline: str) -> tuple[dict[str, Any] | None, str]:
        from evalsi.runs.compare import compare_runs

        try:
            found = compare_runs(store, baseline, run_id, metrics=[f"{evaluator}/{metric}"])
        except EvalsiError as e:
            return None, f"cannot compare with baseline {baseline!r}: {e}"
        m = next((x for x in found.metrics if (x.evaluator, x.metric) == (evaluator, metric)), None)
        if m is None or m.delta is None or m.n_paired < 2:
            pairs = 0 if m is None else m.n_paired
            return None, f"{pairs} record(s) paired with baseline {baseline!r}: too few to judge"
        ci = {k: v for k, v in (("low", m.ci.low), ("high", m.ci.high)) if v is not None}
        return {"mean": m.delta, "n": m.n_paired, "ci": ci}, ""

    @functools.cache
    def flaky_cases() -> int:
        if trials < 2:
            return 0  # one trial a scenario: never flaky
        return _flaky(store, run_id, trials, frozenset(record_scope))

    return GateData(delta=delta, flaky_cases=flaky_cases)


def _flaky(store: SqlStore, run_id: str, trials: int, record_scope: frozenset[int]) -> int:
    builder = CaseBuilder(trials)
    results = store.iter_results(run_id)
    flaky = 0
    try:
        pending = next(results, None)
        for row in store.iter_outputs(run_id):
            builder.task(row.seq, row.trial, row.record_id, None, row.status)
            while pending is not None and (pending[0], pending[2].trial) <= (row.seq, row.trial):
                seq, index, result = pending
                if (seq, result.trial) == (row.seq, row.trial) and index in record_scope:
                    passes = [{"passed": s.passed} for s in result.scores if s.passed is not None]
                    builder.result(seq, result.trial, Outcome(result.outcome).name.lower(), passes)
                pending = next(results, None)
            flaky += sum(case.flaky for case in builder.ready())
        flaky += sum(case.flaky for case in builder.finish())
    finally:
        close = getattr(results, "close", None)  # a server-side cursor on PostgreSQL
        if close is not None:
            close()
    return flaky


__all__ = ["stored_gate_data"]
