"""ml-classic throughput: ROC-AUC, F1 and log-loss over 1,000,000 predictions, against
scikit-learn in the same run.

    python bench/mlclassic_throughput.py                  # 1,000,000 binary predictions
    python bench/mlclassic_throughput.py --records 200000 --check

Data: deterministic binary labels, p(1) from a noisy score, the predicted label p >= 0.5,
written as JSONL records ``{"output": {"label": 1, "probabilities": {"0": …, "1": …}},
"reference": 1}`` and read back with evalsi's dataset reader.

- scikit-learn: ``roc_auc_score``, ``f1_score``, ``log_loss`` on numpy arrays.
- evalsi, what the DatasetRunner does: ``map_batch`` every batch of Records (a few C-level
  passes into columns; a batch that is not uniform is mapped record by record with ``map``),
  then ``reduce`` (prepare: concatenate the columns, + weighted reduce). "streamed": each batch
  of 1,024 records is read just before it is mapped, as in a run (reading is not timed);
  "prebuilt": all records read first, then mapped in one go (the objects are no longer in the
  CPU caches: a worst case).
- two floors, streamed: the runner calling a ``map`` that does nothing on every record, and a
  ``map_batch`` that only reads every record's output and reference values (what any metric
  must at least touch).
- end to end (information): ``evalsi.evaluate(path, ["roc-auc", "f1", "log-loss"])`` into a
  fresh SQLite store, reading included.

Every side gets its best of ``--repeats``; the young-generation GC is relaxed and the prebuilt
records frozen, as a run does. Values must equal scikit-learn's to 1e-9 (asserted).

Target (issue 6): each metric, streamed, within 2x scikit-learn's time.
Results go to ``bench/out/mlclassic_throughput.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from operator import attrgetter
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from sklearn import metrics as skm

import evalsi
from evalsi.core import Record
from evalsi.datasets import open_dataset
from evalsi.evaluators import DatasetRunner, evaluator
from evalsi.packs import builtin_registry

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
TARGET = 2.0
METRICS = ("roc-auc", "f1", "log-loss")


def make_data(n: int, seed: int = 7) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    p1 = np.clip(rng.normal(0.35 + 0.3 * y, 0.2), 0.0, 1.0)
    return {"y": y, "p1": p1, "pred": (p1 >= 0.5).astype(np.int64)}


def write_jsonl(path: Path, data: dict[str, Any]) -> None:
    with path.open("wb") as f:
        for i, (t, p, lab) in enumerate(
            zip(data["y"].tolist(), data["p1"].tolist(), data["pred"].tolist(), strict=True)
        ):
            out = {"label": lab, "probabilities": {"0": 1.0 - p, "1": p}}
            f.write(orjson.dumps({"id": f"r{i}", "output": out, "reference": t}) + b"\n")


def best(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    times, value = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - started)
    return min(times), value


def sklearn_side(data: dict[str, Any], repeats: int) -> dict[str, tuple[float, float]]:
    y, p1, pred = data["y"], data["p1"], data["pred"]
    fns = {
        "roc-auc": lambda: skm.roc_auc_score(y, p1),
        "f1": lambda: skm.f1_score(y, pred),
        "log-loss": lambda: skm.log_loss(y, p1),
    }
    return {name: best(fn, repeats) for name, fn in fns.items()}


class _Echo:
    """The runner's own per-record cost: a map that does nothing."""

    def map(self, record: Record) -> None:
        return None

    def reduce(self, values: list[Any]) -> float:
        return 0.0


class _Columns:
    """A chunk: the output and reference values of a batch."""

    def __init__(self, refs: list[Any], outs: list[Any]) -> None:
        self.refs, self.outs = refs, outs

    def __len__(self) -> int:
        return len(self.refs)


class _Touch(_Echo):
    """The least a batch map does: read every record's output and reference values."""

    def map_batch(self, records: list[Record]) -> _Columns:
        return _Columns(list(map(_REF, records)), list(map(_OUT, records)))

    def unbatch(self, chunk: _Columns) -> list[None]:
        return [None] * len(chunk)


_OUT, _REF = attrgetter("output.value"), attrgetter("reference.value")
FLOORS = {"floor": _Echo, "touch": _Touch}


def run_metric(name: str, batches: Callable[[], Iterator[list[Record]]]) -> dict[str, Any]:
    """Feed every batch to a fresh DatasetRunner (timing feed only), then finish."""
    if name in FLOORS:
        bound = evaluator(name=f"bench/{name}", scope="dataset", requires=("output", "reference"))(
            FLOORS[name]
        ).bind()
    else:
        bound = builtin_registry(entry_points=False).resolve(name).bind()
    runner = DatasetRunner(bound)
    mapping = 0.0
    for batch in batches():
        started = time.perf_counter()
        runner.feed(batch)
        mapping += time.perf_counter() - started
    started = time.perf_counter()
    result = runner.finish()
    reducing = time.perf_counter() - started
    value = result.scores[0].number if result.scores else None
    out = {"map_s": mapping, "reduce_s": reducing, "total_s": mapping + reducing, "value": value}
    if name not in FLOORS:  # the reduce split in two, for the reader
        instance = bound.instance
        started = time.perf_counter()
        prepared = instance.prepare(runner.values)
        out["prepare_s"] = time.perf_counter() - started
        started = time.perf_counter()
        instance.reduce_weighted(prepared, np.ones(len(runner.values)))
        out["weighted_reduce_s"] = time.perf_counter() - started
    return out


def best_run(name: str, batches: Callable[[], Iterator[list[Record]]], repeats: int) -> Any:
    runs = [run_metric(name, batches) for _ in range(repeats)]
    return min(runs, key=lambda r: r["total_s"])


def end_to_end(path: Path) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        result = evalsi.evaluate(str(path), list(METRICS), store=str(Path(tmp) / "bench.db"))
        seconds = time.perf_counter() - started
    assert all(result.metric(m).n > 0 for m in METRICS)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3, help="best of N for every side")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--no-e2e", action="store_true", help="skip the end-to-end run")
    args = parser.parse_args(argv)
    data = make_data(args.records)
    old = gc.get_threshold()
    gc.set_threshold(50_000, old[1], old[2])  # as a run does (runs/_score.py)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "predictions.jsonl"
        print(f"writing {args.records:,} records...", file=sys.stderr)
        write_jsonl(path, data)
        dataset = open_dataset(str(path))
        sk = sklearn_side(data, args.repeats)

        def streamed() -> Iterator[list[Record]]:
            return dataset.iter_batches(1024)

        def read_all() -> int:
            return sum(len(batch) for batch in streamed())

        reading, _ = best(read_all, args.repeats)
        print("streamed runs...", file=sys.stderr)
        stream = {m: best_run(m, streamed, args.repeats) for m in (*METRICS, *FLOORS)}
        prebuilt_batches = list(dataset.iter_batches(1024))
        gc.freeze()
        print("prebuilt runs...", file=sys.stderr)
        cold = {m: best_run(m, lambda: iter(prebuilt_batches), args.repeats) for m in METRICS}
        prebuilt_batches.clear()
        gc.unfreeze()
        e2e = None if args.no_e2e else end_to_end(path)
    report: dict[str, Any] = {"records": args.records, "repeats": args.repeats, "metrics": {}}
    print(
        f"\n{'metric':9s} {'sklearn':>9s} {'streamed':>9s} {'ratio':>6s}  {'prebuilt':>9s} "
        f"{'ratio':>6s}  {'map':>7s} {'prepare':>8s} {'reduce':>7s}"
    )
    ok = True
    for m in METRICS:
        sk_s, sk_value = sk[m]
        ours, slow = stream[m], cold[m]
        for got in (ours["value"], slow["value"]):
            assert got is not None, m
            assert abs(got - sk_value) <= 1e-9, (m, got, sk_value)
        ratio, cold_ratio = ours["total_s"] / sk_s, slow["total_s"] / sk_s
        ok = ok and ratio <= TARGET
        print(
            f"{m:9s} {sk_s:8.3f}s {ours['total_s']:8.3f}s {ratio:5.2f}x  {slow['total_s']:8.3f}s "
            f"{cold_ratio:5.2f}x  {ours['map_s']:6.3f}s {ours['prepare_s']:7.3f}s "
            f"{ours['weighted_reduce_s']:6.3f}s"
        )
        report["metrics"][m] = {
            "sklearn_s": sk_s,
            "sklearn_value": sk_value,
            "streamed": ours,
            "prebuilt": slow,
            "ratio_streamed": ratio,
            "ratio_prebuilt": cold_ratio,
        }
    floor, touch = stream["floor"]["map_s"], stream["touch"]["map_s"]
    print(f"\nrunner floor (a map that does nothing), streamed: {floor:.3f}s per metric")
    print(f"touch floor (map_batch reading output and reference values): {touch:.3f}s")
    sk_total = sum(s for s, _ in sk.values())
    ours_total = sum(stream[m]["total_s"] for m in METRICS)
    print(f"three metrics: scikit-learn {sk_total:.3f}s, evalsi {ours_total:.3f}s streamed")
    report.update(
        runner_floor_s=floor,
        touch_floor_s=touch,
        sklearn_total_s=sk_total,
        evalsi_total_s=ours_total,
    )
    print(f"reading the JSONL file into records (not in the figures above): {reading:.3f}s")
    report["reading_s"] = reading
    if e2e is not None:
        print(f"end to end, evalsi.evaluate on the JSONL file: {e2e:.3f}s (reading included)")
        report["end_to_end_s"] = e2e
    report["target"] = f"each metric streamed within {TARGET:g}x scikit-learn"
    report["pass"] = ok
    print(f"{'MET ' if ok else 'MISS'}  each metric within {TARGET:g}x scikit-learn (streamed)")
    OUT.mkdir(exist_ok=True)
    (OUT / "mlclassic_throughput.json").write_text(json.dumps(report, indent=2) + "\n")
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    raise SystemExit(main())
