"""Run throughput: ``execute_run`` (call, grade, persist) against a raw aiohttp loop, in one run.

    python bench/run_throughput.py                  # 2,000 samples, concurrency 64, 50 ms
    python bench/run_throughput.py --samples 5000 --repeats 5
    python bench/run_throughput.py --peers          # + Inspect AI on the same stub

The stub LLM server runs in its own process on loopback and answers after ``--latency-ms``.

- raw: one ``aiohttp.ClientSession``, ``--concurrency`` workers posting the same chat
  completions and comparing the answer to the reference by hand; nothing stored.
- evalsi: ``execute_run`` on a spec with an OpenAI-compatible target, the same dataset (JSONL
  on disk), ``exact-match`` grading, outputs and results persisted to a SQLite store, then the
  summary rebuilt from the store.

- inspect-ai (``--peers``): ``bench/peers/inspect_run_peer.py`` run by the peers' venv
  (``bench/.peers/venv``, made by ``bench/peers/setup.sh`` when missing) against the same stub
  process, on the same JSONL file: an Inspect eval (``openai-api`` provider, ``generate()``,
  ``exact()``, ``max_connections`` = ``--concurrency``, log to a temp dir, display none), timed
  around ``eval()`` only. Run once with Inspect's default logging (every sample in the log, as
  evalsi stores every sample: the figure compared against) and once with ``log_samples=False``
  (reported alongside, not compared).

Targets (issue 3): evalsi >= 80% of the raw loop's samples/s; with ``--peers`` also evalsi >= 10x
Inspect AI's samples/s. Results go to ``bench/out/run_throughput.json``.

    python bench/run_throughput.py --whole-process    # the same work, each side a whole process

``--whole-process`` (issue 16) times both sides from spawn to exit, start-up included: ``evalsi
run -f <spec> --quiet`` (the same target, dataset, grading and SQLite store) against ``python -c
<raw script>`` (imports aiohttp and orjson, then the raw loop above), rounds interleaved A B A B;
reports the median and range of each and the ratio of the medians (samples/s, whole process).
Results go to ``bench/out/run_throughput_process.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from connector_throughput import start_stub  # noqa: E402

from evalsi.packs import builtin_registry  # noqa: E402
from evalsi.runs._execute import execute_run  # noqa: E402
from evalsi.specs import DatasetSpec, EvaluatorEntry, RunSpec, TargetSpec  # noqa: E402

OUT = HERE / "out"
RAW_PROCESS = """
import asyncio, sys, time
import aiohttp, orjson

async def main(url, samples, concurrency):
    counter = iter(range(samples))
    passed = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:
        async def worker():
            nonlocal passed
            for i in counter:
                body = {"model": "stub", "max_tokens": 16,
                        "messages": [{"role": "user", "content": f"q{i}"}]}
                async with session.post(f"{url}/v1/chat/completions", json=body) as response:
                    response.raise_for_status()
                    data = orjson.loads(await response.read())
                passed += data["choices"][0]["message"]["content"] == f"q{i}"
        async with asyncio.TaskGroup() as group:
            for _ in range(concurrency):
                group.create_task(worker())
    assert passed == samples, passed

asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
"""

RUN_SPEC = """apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: bench}}
spec:
  target:
    model:
      {{connector: openai-compatible, baseUrl: "{url}/v1", model: stub, params: {{max_tokens: 16}}}}
  dataset: {{path: {data}}}
  maxConcurrency: {concurrency}
  evaluators: [{{ref: exact-match}}]
"""
TARGET_RATIO = 0.80
PEER_TARGET_RATIO = 10.0
PEERS = HERE / "peers"
PEERS_PYTHON = HERE / ".peers" / "venv" / "bin" / "python"


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
    result = asyncio.run(execute_run(spec, store=store, registry=builtin_registry()))
    seconds = time.perf_counter() - started
    m = result.metric("exact-match")
    assert (m.n, m.mean) == (samples, 1.0), (m.n, m.mean)
    return samples / seconds


def whole_process(args: argparse.Namespace) -> int:
    """Both sides as whole processes, spawn to exit (see the module docstring)."""
    evalsi = str(Path(sys.executable).with_name("evalsi"))
    proc, url = start_stub(args.latency_ms)
    seconds: dict[str, list[float]] = {"raw": [], "evalsi": []}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp) / "qa.jsonl"
            write_data(data, args.samples)
            spec = Path(tmp) / "run.yaml"
            spec.write_text(RUN_SPEC.format(url=url, data=data, concurrency=args.concurrency))
            raw_cmd = [sys.executable, "-c", RAW_PROCESS, url, str(args.samples)]
            raw_cmd.append(str(args.concurrency))
            asyncio.run(raw_round(url, 4 * args.concurrency, args.concurrency))  # warm up
            for r in range(args.repeats):
                for name in ("raw", "evalsi") if r % 2 == 0 else ("evalsi", "raw"):
                    cmd = raw_cmd
                    if name == "evalsi":
                        store = f"{tmp}/run{r}.db"
                        cmd = [evalsi, "run", "-f", str(spec), "--store", store, "--quiet"]
                    started = time.perf_counter()
                    done = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
                    took = time.perf_counter() - started
                    if done.returncode != 0:
                        raise SystemExit(f"{name} exited {done.returncode}: {done.stderr[-800:]}")
                    seconds[name].append(took)
                    print(
                        f"round {r + 1} {name:>6}: {took:6.2f} s, "
                        f"{args.samples / took:7.1f} samples/s (whole process)",
                        file=sys.stderr,
                    )
    finally:
        proc.terminate()
        proc.wait(10)
    rates = {name: [args.samples / t for t in times] for name, times in seconds.items()}
    median = {name: statistics.median(r) for name, r in rates.items()}
    ratio = median["evalsi"] / median["raw"]
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    result = {
        "samples": args.samples,
        "concurrency": args.concurrency,
        "latency_ms": args.latency_ms,
        "rounds": args.repeats,
        "loadavg": load,
        "whole_process": True,
        **{
            f"{name}_samples_per_s": {
                "median": round(median[name], 1),
                "min": round(min(r), 1),
                "max": round(max(r), 1),
                "seconds": [round(t, 3) for t in seconds[name]],
            }
            for name, r in rates.items()
        },
        "ratio_of_medians": round(ratio, 3),
    }
    OUT.mkdir(exist_ok=True)
    (OUT / "run_throughput_process.json").write_text(json.dumps(result, indent=2) + "\n")
    for name, r in rates.items():
        print(
            f"{name:6s} whole process: median {median[name]:7.1f} samples/s "
            f"(range {min(r):.1f}-{max(r):.1f})"
        )
    print(f"ratio of medians: {ratio:.3f}  (load average {' '.join(load)})")
    return 0


def peers_python() -> str:
    """The peers' interpreter, setting the venv up first when it is missing."""
    if PEERS_PYTHON.exists():
        return str(PEERS_PYTHON)
    print("peers venv missing: running bench/peers/setup.sh", file=sys.stderr)
    out = subprocess.run(
        ["bash", str(PEERS / "setup.sh")], check=True, stdout=subprocess.PIPE, text=True
    )
    return out.stdout.strip().splitlines()[-1]


def inspect_round(
    python: str, url: str, data: Path, concurrency: int, log_samples: bool = True
) -> dict[str, object]:
    """Run the Inspect AI peer once on ``data`` against the stub at ``url``; its JSON line."""
    cmd = [python, str(PEERS / "inspect_run_peer.py"), "--url", url, "--data", str(data)]
    cmd += ["--concurrency", str(concurrency)]
    if not log_samples:
        cmd.append("--no-log-samples")
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, cwd=data.parent)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--peers",
        action="store_true",
        help="also run Inspect AI (bench/peers/inspect_run_peer.py) against the same stub",
    )
    parser.add_argument(
        "--whole-process",
        action="store_true",
        help="time `evalsi run` and a raw aiohttp script as whole processes, start-up included",
    )
    args = parser.parse_args()
    if args.whole_process:
        return whole_process(args)
    python = peers_python() if args.peers else None

    proc, url = start_stub(args.latency_ms)
    raw: list[float] = []
    ours: list[float] = []
    inspect: dict[str, object] | None = None
    inspect_nolog: dict[str, object] | None = None
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
            if python is not None:
                inspect = inspect_round(python, url, data, args.concurrency)
                rate = float(inspect["samples_per_s"])  # type: ignore[arg-type]
                print(f"inspect-ai (log samples)   : {rate:8.1f} samples/s", file=sys.stderr)
                inspect_nolog = inspect_round(python, url, data, args.concurrency, False)
                rate = float(inspect_nolog["samples_per_s"])  # type: ignore[arg-type]
                print(f"inspect-ai (no log samples): {rate:8.1f} samples/s", file=sys.stderr)
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
    peer_passed = True
    if inspect is not None and inspect_nolog is not None:
        rate = float(inspect["samples_per_s"])  # type: ignore[arg-type]
        rate_nolog = float(inspect_nolog["samples_per_s"])  # type: ignore[arg-type]
        peer_ratio = best_ours / rate
        peer_passed = peer_ratio >= PEER_TARGET_RATIO
        result["peers"] = {
            "inspect-ai": {
                "version": inspect["version"],
                "model": "openai-api/stub/stub",
                "samples_per_s": round(rate, 1),
                "seconds": inspect["seconds"],
                "log_samples": True,
                "evalsi_over_inspect": round(peer_ratio, 2),
                "target_ratio": PEER_TARGET_RATIO,
                "passed": peer_passed,
                "no_log_samples": {
                    "samples_per_s": round(rate_nolog, 1),
                    "seconds": inspect_nolog["seconds"],
                    "evalsi_over_inspect": round(best_ours / rate_nolog, 2),
                },
            }
        }
    OUT.mkdir(exist_ok=True)
    (OUT / "run_throughput.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"raw aiohttp : {best_raw:8.1f} samples/s")
    print(f"evalsi run  : {best_ours:8.1f} samples/s (graded and stored)")
    print(f"ratio       : {ratio:8.3f}  (target >= {TARGET_RATIO:.2f})")
    if inspect is not None and inspect_nolog is not None:
        peer = result["peers"]["inspect-ai"]  # type: ignore[index]
        nolog = peer["no_log_samples"]
        verdict = "MET" if peer_passed else "MISS"
        rate, times = peer["samples_per_s"], peer["evalsi_over_inspect"]
        print(f"inspect-ai  : {rate:8.1f} samples/s ({peer['version']}, samples logged)")
        print(f"evalsi/insp : {times:8.2f}x  (target >= {PEER_TARGET_RATIO:.0f}x) {verdict}")
        print(
            f"  (Inspect with log_samples=False: {nolog['samples_per_s']:.1f} samples/s,"
            f" evalsi/insp {nolog['evalsi_over_inspect']:.2f}x)"
        )
    return 0 if result["passed"] and peer_passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
