"""Replay: an agent run re-graded from its cassettes, against the live run it recorded.

    python bench/replay.py                        # 1,000 trials x 20 steps, 50 ms model, 3 rounds
    python bench/replay.py --trials 200 --rounds 2   # a quick look

The stub LLM server runs in its own process on loopback with ``--latency-ms`` per call,
scripted so each trial asks for ``--tool-calls`` function-tool calls one after another, then
answers: ``2 x tool_calls`` trajectory steps a trial (a model call and a tool call in turn; the
last model call answers). The run's concurrency is the spec's default (16).

Each round, interleaved (the order is reversed every other round):

- **live**: ``execute_run`` of the agent spec (the built-in loop, one function tool, the
  cassette recorded, outputs, trajectories and ``exact-match`` results stored): trials/s;
- **replay**: ``replay_run`` of that round's live run with other evaluators
  (``exact-match,step-efficiency,loop-detection``), ``--replays`` times (a replay is CPU bound
  and lasts about a second, so one timing of it swings by a quarter on a shared machine; the
  round takes their median): trials/s; the stub's request counter is read
  before and after and must not move, and the tool's own call counter (a file the tool appends
  to) must not grow;
- **replay, whole process**: ``evalsi replay RUN --evaluators ... --quiet`` from spawn to exit.

The ratio is taken round by round (replay trials/s over the same round's live trials/s);
medians and [min-max] ranges are reported, never a best-of. Target (issue 21): replay re-grades
at >= 50x the live run's speed, with 0 model and tool calls. Results go to
``bench/out/replay.json`` (or ``--json FILE``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from connector_throughput import start_stub

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "out"
MODULE = "replay_bench_tools"
TARGET_RATIO = 50.0
EVALUATORS = "exact-match,step-efficiency,loop-detection"
TOOLS = '''
import os


def step(n: int) -> str:
    """The next step."""
    with open(os.environ["REPLAY_BENCH_CALLS"], "a") as calls:
        calls.write("x")
    return f"s{n + 1}"
'''


def script(calls: int) -> dict[str, Any]:
    """ "go" asks for step(0); each result "sK" asks for step(K), the last gets "done"."""
    tool_calls = {"go": [{"name": "step", "arguments": {"n": 0}}]}
    for k in range(1, calls):
        tool_calls[f"s{k}"] = [{"name": "step", "arguments": {"n": k}}]
    return {"tool_calls": tool_calls, "answers": {f"s{calls}": "done"}}


def write_spec(work: Path, url: str, samples: int, trials: int, calls: int) -> Path:
    (work / "tasks.jsonl").write_bytes(
        b"".join(
            orjson.dumps({"id": f"t{i}", "input": "go", "reference": "done"}) + b"\n"
            for i in range(samples)
        )
    )
    spec = work / "agent.yaml"
    spec.write_text(
        f"""apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: replay-bench}}
spec:
  target:
    agent:
      model: {{connector: openai-compatible, baseUrl: "{url}/v1", model: stub}}
      maxSteps: {calls + 2}
  environment:
    tools: [{{function: "{MODULE}:step"}}]
  dataset: {{path: tasks.jsonl}}
  trials: {trials}
  evaluators: [{{ref: exact-match}}]
"""
    )
    return spec


def stub_calls(url: str) -> int:
    with urllib.request.urlopen(f"{url}/stub/stats", timeout=10) as response:
        stats = json.loads(response.read())
    return int(sum(stats.get("calls", {}).values()))


def tool_calls(counter: Path) -> int:
    return counter.stat().st_size if counter.exists() else 0


async def live_round(spec_path: Path, store: Path) -> tuple[float, str, int]:
    """(trials/s, run id, trials)."""
    from evalsi.packs import builtin_registry
    from evalsi.runs import execute_run
    from evalsi.specs import load_run_spec

    spec = load_run_spec(spec_path)
    wall = time.perf_counter()
    result = await execute_run(spec, store=store, registry=builtin_registry())
    wall = time.perf_counter() - wall
    trials = result.records * result.trials
    assert result.tasks == {"ok": trials}, result.tasks
    assert result.metric("exact-match").mean == 1.0
    return trials / wall, result.run_id, trials


async def replay_round(store: Path, run_id: str, trials: int) -> float:
    from evalsi.packs import builtin_registry
    from evalsi.runs import replay_run

    wall = time.perf_counter()
    result = await replay_run(
        store, run_id, registry=builtin_registry(), evaluators=EVALUATORS.split(",")
    )
    wall = time.perf_counter() - wall
    assert result.tasks == {"ok": trials}, result.tasks
    assert result.metric("exact-match").mean == 1.0
    return trials / wall


def whole_replay(work: Path, store: Path, run_id: str, trials: int) -> float:
    started = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "evalsi",
            "replay",
            run_id,
            "--evaluators",
            EVALUATORS,
            "--quiet",
            "--store",
            str(store),
            "--format",
            "json",
        ],
        cwd=work,
        env={**os.environ, "PYTHONPATH": f"{work}:{ROOT / 'src'}"},
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"evalsi replay failed: {proc.stderr[-2000:]}")
    assert json.loads(proc.stdout)["replay_of"] == run_id
    return trials / wall


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--trials", type=int, default=5, help="trials per sample")
    parser.add_argument("--tool-calls", type=int, default=10)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--replays", type=int, default=3, help="replays of each live run")
    parser.add_argument("--json", type=Path, default=OUT / "replay.json")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="evalsi-replay-bench-"))
    (work / f"{MODULE}.py").write_text(TOOLS)
    counter = work / "tool-calls"
    os.environ["REPLAY_BENCH_CALLS"] = str(counter)
    sys.path.insert(0, str(work))
    os.chdir(work)
    config = work / "script.json"
    config.write_text(json.dumps(script(args.tool_calls)))
    stub, url = start_stub(args.latency_ms, config)
    try:
        spec = write_spec(work, url, args.samples, args.trials, args.tool_calls)
        live: list[float] = []
        replay: list[float] = []
        whole: list[float] = []
        ratios: list[float] = []
        each: list[float] = []  # every replay's own rate
        zero_calls = True
        for r in range(args.rounds):
            store = work / f"round{r}.db"
            rate, run_id, trials = asyncio.run(live_round(spec, store))
            live.append(rate)
            order = ["replay", "whole"] if r % 2 == 0 else ["whole", "replay"]
            for which in order:
                model_before, tools_before = stub_calls(url), tool_calls(counter)
                if which == "replay":
                    rates = [
                        asyncio.run(replay_round(store, run_id, trials))
                        for _ in range(args.replays)
                    ]
                    each.extend(rates)
                    replay.append(statistics.median(rates))
                else:
                    whole.append(whole_replay(work, store, run_id, trials))
                moved = (stub_calls(url) - model_before, tool_calls(counter) - tools_before)
                zero_calls = zero_calls and moved == (0, 0)
                print(f"round {r + 1} {which}: model and tool calls during it {moved}")
            ratios.append(replay[-1] / live[-1])
            print(
                f"round {r + 1}: live {live[-1]:.1f} trials/s, replay {replay[-1]:.0f} "
                f"trials/s ({ratios[-1]:.0f}x), whole process {whole[-1]:.0f} trials/s"
            )
    finally:
        stub.kill()
    out = {
        "trials": args.samples * args.trials,
        "steps_per_trial": 2 * args.tool_calls,
        "latency_ms": args.latency_ms,
        "live_trials_per_s": summary(live),
        "replay_trials_per_s": summary(replay),
        "replays_per_round": args.replays,
        "replay_trials_per_s_each": summary(each),
        "replay_whole_process_trials_per_s": summary(whole),
        "ratio": summary(ratios),
        "whole_process_ratio": summary([w / v for w, v in zip(whole, live, strict=True)]),
        "zero_model_and_tool_calls": zero_calls,
        "target_ratio": TARGET_RATIO,
        "met": statistics.median(ratios) >= TARGET_RATIO and zero_calls,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
