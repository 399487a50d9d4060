"""Judge cache: 500 records through ``llm-judge`` against a stub judge, cold then warm.

    python bench/judge_cache.py                      # 500 records, 50 ms judge, concurrency 64
    python bench/judge_cache.py --records 2000 --concurrency 16

The stub LLM server runs in its own process on loopback, answers every chat completion after
``--latency-ms`` with a fixed JSON verdict, and counts the calls it receives (``/stub/stats``).
Both runs grade the same records (``evalsi.evaluate_async``, one ``default`` judge with
``maxConcurrency`` = ``--concurrency``) into the same SQLite store: the first fills the judge
cache (cold), the second reads it (warm). Reported: judge calls seen by the stub and wall time
of each run, from the call to the returned result (store writes and summaries included).

Targets (issue 3): the warm run makes 0 judge calls and is >= 20x faster than the cold one.
Results go to ``bench/out/judge_cache.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from connector_throughput import start_stub  # noqa: E402

import evalsi  # noqa: E402

OUT = HERE / "out"
TARGET_SPEEDUP = 20.0
VERDICT = '{"score": 0.75, "explanation": "mostly right"}'


def _stub(url: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"{url}{path}", data=data, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as reply:
        return dict(json.loads(reply.read()))


def _calls(url: str) -> int:
    return int(sum(_stub(url, "/stub/stats")["calls"].values()))


async def _grade(url: str, records: list[dict[str, Any]], store: str, concurrency: int) -> Any:
    return await evalsi.evaluate_async(
        records,
        [{"ref": "llm-judge", "params": {"rubric": "The answer is correct and concise."}}],
        judges={
            "default": {
                "connector": "openai-compatible",
                "baseUrl": f"{url}/v1",
                "model": "judge-model",
                "params": {"temperature": 0},
                "maxConcurrency": concurrency,
            }
        },
        store=store,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=500)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args(argv)
    records = [
        {"id": f"r{i}", "input": f"question {i}", "output": f"answer {i}"}
        for i in range(args.records)
    ]
    proc, url = start_stub(args.latency_ms)
    try:
        _stub(url, "/stub/config", {"default": VERDICT})
        with tempfile.TemporaryDirectory() as tmp:
            store = str(Path(tmp) / "bench.db")
            figures: dict[str, dict[str, float]] = {}
            for phase in ("cold", "warm"):
                before = _calls(url)
                started = time.perf_counter()
                result = asyncio.run(_grade(url, records, store, args.concurrency))
                seconds = time.perf_counter() - started
                metric = result.metric("llm-judge")
                assert metric.n == args.records, f"{phase}: {metric.n} scored"
                figures[phase] = {"judge_calls": _calls(url) - before, "seconds": seconds}
                print(
                    f"{phase}: {figures[phase]['judge_calls']:.0f} judge calls, "
                    f"{seconds:.3f} s, mean {metric.mean:.3f}"
                )
    finally:
        proc.terminate()
        proc.wait(10)
    speedup = figures["cold"]["seconds"] / figures["warm"]["seconds"]
    ok = figures["warm"]["judge_calls"] == 0 and speedup >= TARGET_SPEEDUP
    print(
        f"warm is {speedup:.1f}x faster (target >= {TARGET_SPEEDUP:g}x, 0 calls): "
        f"{'PASS' if ok else 'FAIL'}"
    )
    OUT.mkdir(exist_ok=True)
    report = {
        "records": args.records,
        "latency_ms": args.latency_ms,
        "concurrency": args.concurrency,
        **figures,
        "speedup": speedup,
        "target_speedup": TARGET_SPEEDUP,
        "pass": ok,
    }
    (OUT / "judge_cache.json").write_text(json.dumps(report, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
