"""The harness protocol's cost: the same harness run in evalsi's process and as a process of its
own over gRPC (a unix socket), on the same tasks.

    python bench/harness_protocol.py                    # 500 tasks, 5 rounds
    python bench/harness_protocol.py --tasks 2000 --rounds 3

The harness is the to-do harness of ``examples/agent/harness/`` (per task: its workspace with
a fixture, one step, a Final, its Check), run by ``execute_run`` with outputs, trajectories
(checks and end state included) and ``exact-match`` results persisted to SQLite. Rounds
alternate in-process and gRPC; the figures are tasks/s and ms per task, median and range, the
gRPC/in-process ratio round by round, and a whole-process ``evalsi run`` of the gRPC spec
(start-up, the harness process's start and stop included). The issue sets no target for it: it
records what a harness in another process costs (four calls per task: Setup, Run, Check,
Teardown), against agent tasks whose model calls take hundreds of milliseconds. Results go to
``bench/out/harness_protocol.json``.
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
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
EXAMPLE = ROOT / "examples" / "agent" / "harness"
OUT = HERE / "out"

sys.path.insert(0, str(HERE))
from agent_harness import spread  # noqa: E402 - one summary of rounds for the agent benches


def write_spec(work: Path, tasks: int, harness: str) -> Path:
    rows = [
        json.dumps({"id": f"t{i}", "input": f"item {i}", "reference": "3 items"})
        for i in range(tasks)
    ]
    (work / "tasks.jsonl").write_text("\n".join(rows) + "\n")
    spec = work / f"run-{harness}.yaml"
    target = (
        '{python: "todo_harness:TodoHarness"}'
        if harness == "python"
        else f'{{command: {{argv: [python, "{EXAMPLE / "todo_harness.py"}"]}}}}'
    )
    spec.write_text(
        f"""apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: harness-bench}}
spec:
  target:
    agent:
      harness: {target}
  environment:
    sandbox: {{minIsolation: none}}
    fixtures: {{files: {{todo.json: {{items: [a, b]}}}}}}
  dataset: {{path: tasks.jsonl}}
  maxConcurrency: 16
  evaluators: [{{ref: exact-match}}]
"""
    )
    return spec


async def one_round(spec: Path, store: Path) -> float:
    from evalsi.packs import builtin_registry
    from evalsi.runs import execute_run, load_run_spec
    from evalsi.wire import remote_harness

    loaded = load_run_spec(str(spec))
    started = time.perf_counter()
    result = await execute_run(
        loaded, store=str(store), registry=builtin_registry(), remote_harness=remote_harness
    )
    elapsed = time.perf_counter() - started
    assert result.tasks == {"ok": loaded_tasks(spec)}, result.tasks
    return elapsed


def loaded_tasks(spec: Path) -> int:
    return sum(1 for _ in (spec.parent / "tasks.jsonl").open())


def whole_process(spec: Path, work: Path) -> float:
    started = time.perf_counter()
    subprocess.run(
        [
            str(Path(sys.executable).with_name("evalsi")),
            "run",
            "-f",
            str(spec),
            "--quiet",
            "--store",
            str(work / "whole.db"),
        ],
        check=True,
        capture_output=True,
        env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "PYTHONPATH": str(EXAMPLE)},
    )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, str(EXAMPLE))
    figures: dict[str, list[float]] = {"python": [], "grpc": [], "ratio": [], "whole": []}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        specs = {h: write_spec(work, args.tasks, h) for h in ("python", "grpc")}
        for r in range(args.rounds):
            times = {}
            for harness in ("python", "grpc") if r % 2 == 0 else ("grpc", "python"):
                times[harness] = asyncio.run(one_round(specs[harness], work / f"{harness}{r}.db"))
                figures[harness].append(times[harness] / args.tasks * 1000)
            figures["ratio"].append(times["grpc"] / times["python"])
            figures["whole"].append(whole_process(specs["grpc"], work))
    report: dict[str, Any] = {
        "tasks": args.tasks,
        "rounds": args.rounds,
        "ms_per_task": {h: spread(figures[h]) for h in ("python", "grpc")},
        "tasks_per_s": {
            h: args.tasks / (statistics.median(figures[h]) / 1000 * args.tasks)
            for h in ("python", "grpc")
        },
        "grpc_over_python": spread(figures["ratio"]),
        "added_ms_per_task": statistics.median(
            g - p for g, p in zip(figures["grpc"], figures["python"], strict=True)
        ),
        "whole_process_s": spread(figures["whole"]),
    }
    OUT.mkdir(exist_ok=True)
    (OUT / "harness_protocol.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
