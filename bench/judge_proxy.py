"""Judge forwarding to plugins: what the host's endpoint (``JudgeProxy``) adds to a judge call.

    python bench/judge_proxy.py                     # 300 calls per round, 5 rounds
    python bench/judge_proxy.py --calls 1000 --latency-ms 0

The stub LLM server runs in its own process on loopback and answers every chat completion after
``--latency-ms``. A client in a third process (a plugin's stand-in: ``httpx.Client`` with
keep-alive, one call at a time) makes the same chat completions, ``--repeats`` rounds in
alternating order, either

- direct: to the stub itself, or
- proxied: to a ``JudgeProxy`` served by this process, which hands each call to the run's judge
  (a ``StoreJudge`` on the stub, its cache off so every call reaches the stub): the extra hop,
  the request checks, the judge layer (limiter, retries, accounting) and its connector;
- cached: the same, the judge cache on and warm (what a re-run of a plugin's batch costs).

Reported per mode: the median of the rounds' median call latencies with their range, the p95
of every call, and the overhead (proxied minus direct medians). Also the cost of serving the
endpoint for one batch (start and stop, median of 50).

Target: the overhead is at most 10% of a fast judge's 50 ms answer (5 ms per call). Results go
to ``bench/out/judge_proxy.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from connector_throughput import start_stub  # noqa: E402

from evalsi.plugins import JudgeProxy  # noqa: E402
from evalsi.runs import build_judges  # noqa: E402
from evalsi.specs import JudgeSpec  # noqa: E402
from evalsi.store import SqlStore  # noqa: E402

OUT = HERE / "out"
TARGET_OVERHEAD_MS = 5.0

_CLIENT = """
import json, sys, time
import httpx

url, key, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
body = {"model": "judge-model", "messages": [
    {"role": "system", "content": "Answer yes or no."},
    {"role": "user", "content": "Q: Capital of France?\\nA: Paris"}]}
headers = {"Authorization": f"Bearer {key}"} if key else {}
times = []
with httpx.Client(timeout=30) as client:
    for i in range(calls + 20):
        started = time.perf_counter()
        reply = client.post(f"{url}/chat/completions", json=body, headers=headers)
        reply.raise_for_status()
        assert reply.json()["choices"][0]["message"]["content"]
        if i >= 20:  # the first calls warm the connection and both servers
            times.append(time.perf_counter() - started)
print(json.dumps(times))
"""


async def _client(url: str, key: str, calls: int) -> list[float]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _CLIENT, url, key, str(calls), stdout=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"the client failed ({proc.returncode})")
    return list(json.loads(out))


def _figures(rounds: list[list[float]]) -> dict[str, Any]:
    medians = [statistics.median(times) * 1000 for times in rounds]
    every = sorted(t for times in rounds for t in times)
    return {
        "median_ms": statistics.median(medians),
        "range_ms": [min(medians), max(medians)],
        "p95_ms": every[int(len(every) * 0.95) - 1] * 1000,
    }


async def _run(url: str, store: SqlStore, calls: int, repeats: int) -> dict[str, Any]:
    spec = JudgeSpec(name="default", base_url=f"{url}/v1", model="judge-model")
    uncached = build_judges({"default": dataclasses.replace(spec, cache=False)}, store, [])
    cached = build_judges({"default": spec}, store, [])
    rounds: dict[str, list[list[float]]] = {}

    async def one(mode: str) -> list[float]:
        if mode == "direct":
            return await _client(f"{url}/v1", "", calls)
        judge = (cached if mode == "cached" else uncached)["default"]
        async with JudgeProxy(judge, "default") as proxy:
            times = await _client(proxy.endpoint.base_url, proxy.endpoint.api_key, calls)
            await proxy.keep()
        return times

    async with JudgeProxy(cached["default"], "default") as proxy:  # fill the cache once
        await _client(proxy.endpoint.base_url, proxy.endpoint.api_key, 1)
        await proxy.keep()
    modes = ["direct", "proxied", "cached"]
    for round_ in range(repeats):
        for mode in modes if round_ % 2 == 0 else modes[::-1]:
            rounds.setdefault(mode, []).append(await one(mode))
    starts = []
    for _ in range(50):
        started = time.perf_counter()
        async with JudgeProxy(uncached["default"], "default"):
            pass
        starts.append(time.perf_counter() - started)
    report: dict[str, Any] = {mode: _figures(times) for mode, times in rounds.items()}
    report["serve_one_batch_ms"] = statistics.median(starts) * 1000
    report["judge_account"] = uncached["default"].account.to_dict()
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    args = parser.parse_args(argv)
    proc, url = start_stub(args.latency_ms)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            store = SqlStore.open(Path(tmp) / "bench.db")
            report = asyncio.run(_run(url, store, args.calls, args.repeats))
            store.close()
    finally:
        proc.terminate()
        proc.wait(10)
    overhead = report["proxied"]["median_ms"] - report["direct"]["median_ms"]
    ok = overhead <= TARGET_OVERHEAD_MS
    for mode in ("direct", "proxied", "cached"):
        f = report[mode]
        low, high = f["range_ms"]
        print(
            f"{mode:8s} median {f['median_ms']:.3f} ms [{low:.3f}-{high:.3f}]  "
            f"p95 {f['p95_ms']:.3f} ms"
        )
    print(
        f"serving the endpoint for one batch (start + stop): {report['serve_one_batch_ms']:.2f} ms"
    )
    print(
        f"overhead per call {overhead:.3f} ms (target <= {TARGET_OVERHEAD_MS:g} ms): "
        f"{'PASS' if ok else 'FAIL'}"
    )
    OUT.mkdir(exist_ok=True)
    report.update(
        calls=args.calls,
        repeats=args.repeats,
        latency_ms=args.latency_ms,
        overhead_ms=overhead,
        target_overhead_ms=TARGET_OVERHEAD_MS,
        **{"pass": ok},
    )
    (OUT / "judge_proxy.json").write_text(json.dumps(report, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
