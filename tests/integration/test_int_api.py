"""The Python API end to end: `evalsi.evaluate`, `evaluate_async`, results read back from the
store, custom evaluators that raise or skip, and the pinned public surface."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading

import pytest

import evalsi
from evalsi.cli import main as cli_main
from tests.support.proportions import wilson_reference

ROWS = [
    {"id": "a", "output": "Paris", "reference": "Paris", "usage": {"latency_ms": 10}},
    {"id": "b", "output": "Lyon", "reference": "Paris", "usage": {"latency_ms": 30}},
    {"id": "c", "output": "Rome", "reference": "Rome", "usage": {"latency_ms": 20}},
    {"id": "d", "output": "Oslo", "reference": ["Oslo", "Christiania"]},
    {"id": "e", "output": "nothing to compare"},  # no reference: skipped by exact-match
]


@evalsi.evaluator(name="acme/fragile", version="1.0.0", output="passed")
def fragile(record):
    """Pass on short outputs; blow up on two records."""
    if record.id in ("b", "d"):
        raise ValueError(f"cannot judge {record.id}")
    return len(record.output.as_text()) <= 5


@evalsi.evaluator(name="acme/picky", version="1.0.0", output="passed")
def picky(record):
    """Skip what it cannot judge, with a reason."""
    if record.id == "c":
        raise evalsi.Skip("not my kind of record")
    return True


def test_public_surface_is_pinned():
    assert evalsi.__all__ == [
        "AsyncClient",
        "CalibrationResult",
        "Client",
        "Content",
        "DatasetError",
        "EvalsiError",
        "EvaluationResult",
        "Evaluator",
        "FieldMap",
        "Message",
        "MetricSummary",
        "Outcome",
        "OutputSpec",
        "ParamError",
        "Record",
        "Registry",
        "RunResult",
        "RunSpec",
        "Score",
        "ScoreResult",
        "Skip",
        "ToolCall",
        "UnknownEvaluatorError",
        "Usage",
        "UserError",
        "__version__",
        "calibrate",
        "calibrate_async",
        "evaluate",
        "evaluate_async",
        "evaluator",
        "grade",
        "run",
        "run_async",
    ]
    for name in evalsi.__all__:
        assert getattr(evalsi, name) is not None, name


def test_evaluate_metrics_results_table_and_json(store):
    r = evalsi.evaluate(data=ROWS, evaluators=["exact-match", "latency"], store=store)
    assert r.status == "done"
    assert r.records == 5
    em = r.metric("exact-match")
    assert (em.n, em.scored, em.skipped, em.errors) == (4, 4, 1, 0)
    assert em.mean == 0.75
    lo, hi = wilson_reference(3, 4)  # Wilson, widened to Clopper-Pearson at the edges
    assert em.ci.method == "wilson"
    assert em.ci.low == pytest.approx(lo, abs=1e-12)
    assert em.ci.high == pytest.approx(hi, abs=1e-12)
    lat = r.metric("latency")
    assert (lat.n, lat.skipped, lat.mean) == (3, 2, 20.0)

    results = r.results
    assert all(isinstance(x, evalsi.EvaluationResult) for x in results)
    assert len(results) == 10  # 5 records x 2 evaluators
    by_key = {(x.record_id, x.evaluator): x for x in results}
    assert by_key[("a", "exact-match")].outcome is evalsi.Outcome.SCORED
    assert by_key[("a", "exact-match")].scores[0].passed is True
    assert by_key[("b", "exact-match")].scores[0].passed is False
    assert by_key[("d", "exact-match")].scores[0].passed is True  # any of the references
    skipped = by_key[("e", "exact-match")]
    assert skipped.outcome is evalsi.Outcome.SKIPPED
    assert "reference" in skipped.reason
    assert by_key[("c", "latency")].scores[0].number == 20.0

    table = r.table()
    for word in ("exact-match", "latency", "wilson", "0.750"):
        assert word in table
    data = json.loads(r.to_json())
    assert data["run_id"] == r.run_id
    assert {"run_id", "status", "records", "metrics", "gates"} <= set(data)
    assert {(m["evaluator"], m["metric"]) for m in data["metrics"]} == {
        ("exact-match", "exact-match"),
        ("latency", "latency"),
    }

    # The results are in the store the run named, readable by anyone.
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as conn:
        (n,) = conn.execute("SELECT count(*) FROM results").fetchone()
        (status,) = conn.execute("SELECT status FROM runs WHERE id = ?", (r.run_id,)).fetchone()
    assert (n, status) == (10, "done")


def test_to_json_has_the_same_keys_as_the_cli_json(store, tmp_path, capsys):
    (tmp_path / "rows.jsonl").write_text("\n".join(json.dumps(row) for row in ROWS) + "\n")
    code = cli_main(
        [
            "eval",
            "--data",
            "rows.jsonl",
            "--evaluators",
            "exact-match",
            "--format",
            "json",
            "--store",
            str(store),
            "-q",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    from_cli = json.loads(captured.out)
    from_api = json.loads(
        evalsi.evaluate(data=ROWS, evaluators=["exact-match"], store=store).to_json()
    )
    assert set(from_api) == set(from_cli)
    assert [set(m) for m in from_api["metrics"]] == [set(m) for m in from_cli["metrics"]]
    assert from_api["metrics"] == from_cli["metrics"]  # same data, same numbers


def test_an_evaluator_that_raises_is_an_error_for_those_records_only(store):
    r = evalsi.evaluate(data=ROWS, evaluators=[fragile, picky, "exact-match"], store=store)
    assert r.status == "done"
    assert r.records == 5
    m = r.metric("fragile")
    assert (m.n, m.scored, m.errors, m.skipped) == (3, 3, 2, 0)
    # a and c pass, e (long) fails; b and d are errors, which are not zeros: 2/3, not 2/5.
    assert m.mean == pytest.approx(2 / 3)
    errors = [x for x in r.results if x.outcome is evalsi.Outcome.ERROR]
    assert sorted((x.record_id, x.evaluator) for x in errors) == [
        ("b", "fragile"),
        ("d", "fragile"),
    ]
    assert all("ValueError" in x.reason and "cannot judge" in x.reason for x in errors)
    assert all(x.evaluator_ref == "acme/fragile@1.0.0" for x in errors)
    p = r.metric("picky")
    assert (p.n, p.skipped, p.errors) == (4, 1, 0)
    (skip,) = [
        x for x in r.results if x.outcome is evalsi.Outcome.SKIPPED and x.evaluator == "picky"
    ]
    assert (skip.record_id, skip.reason) == ("c", "not my kind of record")
    # The other evaluators of the same run are untouched.
    assert r.metric("exact-match").n == 4
    assert [x.record_id for x in r.iter_results(outcome=evalsi.Outcome.ERROR)] == ["b", "d"]


def test_evaluate_async_inside_asyncio_run(store):
    seen: list[str] = []

    @evalsi.evaluator(name="acme/slow-ok", version="1.0.0", output="passed")
    async def slow_ok(record):
        await asyncio.sleep(0)
        seen.append(record.id)
        return record.id != "b"

    async def main():
        return await evalsi.evaluate_async(ROWS, [slow_ok, "exact-match"], store=store)

    r = asyncio.run(main())
    assert sorted(seen) == ["a", "b", "c", "d", "e"]
    m = r.metric("slow-ok")
    assert (m.n, m.mean) == (5, 0.8)
    assert r.metric("exact-match").mean == 0.75


def test_evaluate_from_a_running_event_loop_uses_a_helper_thread(store):
    threads: set[str] = set()

    @evalsi.evaluator(name="acme/where", version="1.0.0", output="passed")
    def where(record):
        threads.add(threading.current_thread().name)
        return True

    async def notebook_cell():
        asyncio.get_running_loop()  # as in Jupyter: a loop is running here
        return evalsi.evaluate(ROWS, [where], store=store)

    r = asyncio.run(notebook_cell())
    assert r.status == "done"
    assert r.metric("where").n == 5
    assert threading.current_thread().name not in threads
    assert len(threads) == 1
    assert next(iter(threads)).startswith("evalsi")


def test_api_errors_are_typed_user_errors(store, tmp_path):
    with pytest.raises(evalsi.DatasetError, match=r"missing\.jsonl"):
        evalsi.evaluate("missing.jsonl", ["exact-match"], store=store)
    with pytest.raises(evalsi.UnknownEvaluatorError, match="did you mean exact-match"):
        evalsi.evaluate(ROWS, ["exact-mtch"], store=store)
    with pytest.raises(evalsi.ParamError, match="ignore_case"):
        evalsi.evaluate(ROWS, ["exact-match"], params={"exact-match": {"ignore_case": "maybe"}})
    assert issubclass(evalsi.DatasetError, evalsi.UserError)
    assert not (tmp_path / ".evalsi").exists()  # nothing ran, so no default store was made


def test_params_and_on_bad_record_through_the_api(store):
    rows = [*ROWS, {"id": "f", "output": "paris", "reference": "PARIS"}]
    r = evalsi.evaluate(
        rows, ["exact-match"], params={"exact-match": {"ignore_case": True}}, store=store
    )
    assert (r.metric("exact-match").n, r.metric("exact-match").mean) == (5, 0.8)
    bad = [*ROWS, {"id": "g", "output": "x", "usage": {"latency_ms": "fast"}}]
    with pytest.raises(evalsi.DatasetError, match=r"usage\.latency_ms"):
        evalsi.evaluate(bad, ["exact-match"], store=store)
    r = evalsi.evaluate(bad, ["exact-match"], store=store, on_bad_record="skip")
    assert (r.records, r.bad_records) == (5, 1)


def test_evaluate_with_an_in_memory_store():
    r = evalsi.evaluate(data=ROWS, evaluators=["exact-match"], store=":memory:")
    assert r.metric("exact-match").mean == 0.75
    assert len(r.results) == 5
    assert "exact-match" in r.table()
    assert json.loads(r.to_json())["records"] == 5
