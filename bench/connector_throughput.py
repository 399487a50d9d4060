"""Connector throughput: ``OpenAICompatible`` against a raw aiohttp loop, in one run.

    python bench/connector_throughput.py                    # 2,000 calls, concurrency 64, 50 ms
    python bench/connector_throughput.py --calls 5000 --repeats 5

The stub LLM server (``tests/support/stub_llm_server.py``) runs in its own process on loopback and
answers every chat completion after ``--latency-ms``. Both sides make the same calls with the
same concurrency against it, in this process, one after the other, ``--repeats`` times in
alternating order; each side's best round counts.

- raw: one ``aiohttp.ClientSession`` (connection limit = concurrency), ``session.post(json=…)``
  and ``response.json()``, the reply's text picked out by hand — what a careful engineer would
  write with no retries, limits or accounting.
- evalsi: ``OpenAICompatible.complete``: the shared session, the circuit breaker, the retry
  loop, a requests/min + tokens/min limiter set far above the load (so its bookkeeping runs but
  never waits), the reply parsed into a ``Completion`` with usage and latency.

Target (issue 3): evalsi >= 80% of the raw loop's calls/s. At 50 ms and concurrency 64 the
ceiling is 1,280 calls/s. Results go to ``bench/out/connector_throughput.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp

from evalsi.connectors import (
    OpenAICompatible,
    RateLimits,
    Resilience,
    close_shared_session,
    shared_session,
)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "out"
STUB = ROOT / "tests" / "support" / "stub_llm_server.py"
TARGET_RATIO = 0.80


def start_stub(
    latency_ms: float = 0.0, config: Path | None = None
) -> tuple[subprocess.Popen[str], str]:
    """The stub LLM server in a process of its own (``config``: its answer script, JSON)."""
    extra = ["--config", str(config)] if config is not None else []
    proc = subprocess.Popen(
        [sys.executable, str(STUB), "--port", "0", "--latency-ms", str(latency_ms), *extra],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("STUB_URL "):
        proc.kill()
        raise SystemExit(f"the stub did not start: {line!r}")
    return proc, line.split(" ", 1)[1]


async def drive(calls: int, concurrency: int, one: Callable[[int], Awaitable[str]]) -> float:
    """Run ``calls`` calls with ``concurrency`` workers; return calls/s."""
    counter = iter(range(calls))
    done = 0

    async def worker() -> None:
        nonlocal done
        for i in counter:
            text = await one(i)
            if text != f"q{i}":
                raise AssertionError(f"call {i}: unexpected answer {text!r}")
            done += 1

    started = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for _ in range(concurrency):
            group.create_task(worker())
    seconds = time.perf_counter() - started
    assert done == calls
    return calls / seconds


async def raw_round(url: str, calls: int, concurrency: int) -> float:
    endpoint = f"{url}/v1/chat/completions"
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(i: int) -> str:
            body = {"model": "stub", "messages": [{"role": "user", "content": f"q{i}"}]}
            async with session.post(endpoint, json=body) as response:
                response.raise_for_status()
                data = await response.json()
            return str(data["choices"][0]["message"]["content"])

        return await drive(calls, concurrency, one)


async def evalsi_round(url: str, calls: int, concurrency: int) -> float:
    await shared_session(limit=concurrency)
    client = OpenAICompatible(
        f"{url}/v1",
        "stub",
        rate_limits=RateLimits(requests_per_minute=10_000_000, tokens_per_minute=10**10),
        resilience=Resilience(),
    )

    async def one(i: int) -> str:
        return (await client.complete(f"q{i}")).text

    try:
        return await drive(calls, concurrency, one)
    finally:
        await close_shared_session()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    proc, url = start_stub(args.latency_ms)
    try:
        warm = min(args.calls, 4 * args.concurrency)
        asyncio.run(raw_round(url, warm, args.concurrency))
        asyncio.run(evalsi_round(url, warm, args.concurrency))
        raw: list[float] = []
        ours: list[float] = []
        for r in range(args.repeats):
            order = [("raw", raw_round, raw), ("evalsi", evalsi_round, ours)]
            if r % 2:
                order.reverse()
            for name, fn, sink in order:
                rate = asyncio.run(fn(url, args.calls, args.concurrency))
                sink.append(rate)
                print(f"round {r + 1} {name:>6}: {rate:8.1f} calls/s", file=sys.stderr)
    finally:
        proc.terminate()
        proc.wait(10)

    best_raw, best_ours = max(raw), max(ours)
    ratio = best_ours / best_raw
    ceiling = args.concurrency / (args.latency_ms / 1000.0) if args.latency_ms else None
    result = {
        "calls": args.calls,
        "concurrency": args.concurrency,
        "latency_ms": args.latency_ms,
        "ceiling_calls_per_s": ceiling,
        "raw_aiohttp_calls_per_s": round(best_raw, 1),
        "evalsi_calls_per_s": round(best_ours, 1),
        "ratio": round(ratio, 3),
        "target_ratio": TARGET_RATIO,
        "passed": ratio >= TARGET_RATIO,
        "rounds": {"raw": [round(x, 1) for x in raw], "evalsi": [round(x, 1) for x in ours]},
    }
    OUT.mkdir(exist_ok=True)
    (OUT / "connector_throughput.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"raw aiohttp : {best_raw:8.1f} calls/s")
    print(f"evalsi      : {best_ours:8.1f} calls/s")
    print(f"ratio       : {ratio:8.3f}  (target >= {TARGET_RATIO:.2f})")
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
