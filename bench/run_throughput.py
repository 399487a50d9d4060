"""Run throughput: ``execute_run`` (call, grade, persist) against a raw aiohttp loop, in one run.

    python bench/run_throughput.py                  # 2,000 samples, concurrency 64, 50 ms
    python bench/run_throughput.py --samples 5000 --repeats 5

The stub LLM server runs in its own process on loopback and answers after ``--latency-ms``.

- raw: one ``aiohttp.ClientSession``, ``--concurrency`` workers posting the same chat
  completions and comparing the answer to the reference by hand; nothing stored.
- evalsi: ``execute_run`` on a spec with an OpenAI-compatible target, the same dataset (JSONL
  on disk), ``exact-match`` grading, outputs and results persisted to a SQLite store, then the
  summary rebuilt from the store.

Target (issue 3): evalsi >= 80% of the raw loop's samples/s. Results go to
``bench/out/run_throughput.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from connector_throughput import start_stub  # noqa: E402

from evalsi.runs._execute import execute_run  # noqa: E402
from evalsi.runs._runspec import DatasetSpec, EvaluatorEntry, RunSpec, TargetSpec  # noqa: E402

OUT = HERE / "out"
TARGET_RATIO = 0.80


def write_data(path: Path, samples: int) -> None:
    with path.open("wb") as f:
        for i in range(samples):
            f.write(orjson.dumps({"id": f"s{i}", "input": f"q{i}", "reference": f"q{i}"}) + b"\n")


async def raw_round(url: str, samples: int, concurrency: int) -> float:
    endpoint = f"{url}/v1/chat/completions"
    counter = iter(range(samples))
    passed = 0
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            nonlocal passed
            for i in counter:
                body = {
                    "model": "stub",
                    "max_tokens": 16,
                    "messages": [{"role": "user", "content": f"q{i}"}],
                }
                async with session.post(endpoint, json=body) as response:
                    response.raise_for_status()
                    data = await response.json()
                passed += data["choices"][0]["message"]["content"] == f"q{i}"

        started = time.perf_counter()
        async with asyncio.TaskGroup() as group:
            for _ in range(concurrency):
                group.create_task(worker())
        seconds = time.perf_counter() - started
    assert passed == samples
    return samples / seconds


def evalsi_round(url: str, data: Path, store: Path, samples: int, concurrency: int) -> float:
    spec = RunSpec(
        name="bench",
        target=TargetSpec(
            kind="model",
            connector="openai-compatible",
            base_url=f"{url}/v1",
            model="stub",
            params={"max_tokens": 16},
        ),
        dataset=DatasetSpec(source=str(data)),
        evaluators=(EvaluatorEntry(ref="exact-match"),),
        max_concurrency=concurrency,
    )
    started = time.perf_counter()
    result = asyncio.run(execute_run(spec, store=store))
    seconds = time.perf_counter() - started
    m = result.metric("exact-match")
    assert (m.n, m.mean) == (samples, 1.0), (m.n, m.mean)
    return samples / seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    proc, url = start_stub(args.latency_ms)
    raw: list[float] = []
    ours: list[float] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp) / "qa.jsonl"
            write_data(data, args.samples)
            asyncio.run(raw_round(url, 4 * args.concurrency, args.concurrency))  # warm up
            for r in range(args.repeats):
                for name in ("raw", "evalsi") if r % 2 == 0 else ("evalsi", "raw"):
                    if name == "raw":
                        rate = asyncio.run(raw_round(url, args.samples, args.concurrency))
                        raw.append(rate)
                    else:
                        store = Path(tmp) / f"run{r}.db"
                        rate = evalsi_round(url, data, store, args.samples, args.concurrency)
                        ours.append(rate)
                    print(f"round {r + 1} {name:>6}: {rate:8.1f} samples/s", file=sys.stderr)
    finally:
        proc.terminate()
        proc.wait(10)

    best_raw, best_ours = max(raw), max(ours)
    ratio = best_ours / best_raw
    result = {
        "samples": args.samples,
        "concurrency": args.concurrency,
        "latency_ms": args.latency_ms,
        "ceiling_samples_per_s": args.concurrency / (args.latency_ms / 1000.0)
        if args.latency_ms
        else None,
        "raw_aiohttp_samples_per_s": round(best_raw, 1),
        "evalsi_samples_per_s": round(best_ours, 1),
        "ratio": round(ratio, 3),
        "target_ratio": TARGET_RATIO,
        "passed": ratio >= TARGET_RATIO,
        "rounds": {"raw": [round(x, 1) for x in raw], "evalsi": [round(x, 1) for x in ours]},
    }
    OUT.mkdir(exist_ok=True)
    (OUT / "run_throughput.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"raw aiohttp : {best_raw:8.1f} samples/s")
    print(f"evalsi run  : {best_ours:8.1f} samples/s (graded and stored)")
    print(f"ratio       : {ratio:8.3f}  (target >= {TARGET_RATIO:.2f})")
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
