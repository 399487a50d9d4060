"""Start-up: whole ``evalsi eval`` and ``evalsi run`` processes on 20 records against baselines.

    python bench/startup.py                  # 7 rounds
    python bench/startup.py --rounds 15

Each round runs, in turn (A B C D A B C D ..., so machine load hits all alike):

- ``python -c pass``: the interpreter alone;
- raw: a hand-written script doing the same work with orjson and sqlite3 (read the JSONL,
  compare output to reference, insert one row per record, print the mean);
- evalsi eval: ``evalsi eval --data <20 records> --evaluators exact-match`` on a fresh store;
- evalsi run: ``evalsi run -f <spec>`` of the same 20 records against the stub LLM server
  (``tests/support/stub_llm_server.py``, its own process, 50 ms a call), on a fresh store.

Wall clock from spawn to exit, and for evalsi the time from spawn to its first graded record
(eval) or to its first target call (run): the processes run with ``EVALSI_BENCH_MARK=1``, which
makes them write ``evalsi-mark EVENT MONOTONIC`` to stderr (``evalsi.core.startup_mark``);
``time.monotonic`` is one clock for every process of the machine. Reports the median and range
of each. Target (issue 16): the first record / first call within 0.5 s of the process starting.
Results go to ``bench/out/startup.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from connector_throughput import start_stub

TARGET_FIRST_S = 0.5
MARKS = {"evalsi eval": "first-record", "evalsi run": "first-call"}

SPEC = """
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: startup}}
spec:
  target:
    model:
      {{connector: openai-compatible, baseUrl: "{url}/v1", model: stub, params: {{max_tokens: 16}}}}
  dataset: {{path: qa.jsonl, fields: {{input: output, output: ""}}}}
  maxConcurrency: 20
  evaluators: [{{ref: exact-match}}]
"""

RAW = """
import sqlite3, sys, orjson
rows = [orjson.loads(line) for line in open(sys.argv[1], "rb")]
db = sqlite3.connect(sys.argv[2])
db.execute("create table if not exists r (id text, score real)")
scores = [(r["id"], float(r["output"] == r["reference"])) for r in rows]
db.executemany("insert into r values (?, ?)", scores)
db.commit()
print(sum(s for _, s in scores) / len(scores))
"""


def mark_of(stderr: str, event: str) -> float:
    for line in stderr.splitlines():
        if line.startswith(f"evalsi-mark {event} "):
            return float(line.split()[2])
    raise SystemExit(f"no {event} mark in the output: {stderr[-500:]!r}")


def summary(times: list[float]) -> dict[str, float]:
    return {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    evalsi = str(Path(sys.executable).with_name("evalsi"))
    env = {**os.environ, "EVALSI_BENCH_MARK": "1"}
    stub, url = start_stub(50.0)
    first: dict[str, list[float]] = {name: [] for name in MARKS}
    with tempfile.TemporaryDirectory(prefix="evalsi-startup-") as tmp:
        data = Path(tmp) / "qa.jsonl"
        data.write_text(
            "".join(
                json.dumps(
                    {"id": str(i), "output": "Paris", "reference": "Paris" if i % 2 else "x"}
                )
                + "\n"
                for i in range(20)
            )
        )
        commands = {
            "python -c pass": lambda n: [sys.executable, "-c", "pass"],
            "raw orjson+sqlite3": lambda n: [
                sys.executable, "-c", RAW, str(data), f"{tmp}/raw{n}.db"
            ],
            "evalsi eval": lambda n: [
                evalsi, "eval", "--data", str(data), "--evaluators", "exact-match",
                "--store", f"{tmp}/evalsi{n}.db", "--quiet",
            ],
            "evalsi run": lambda n: [
                evalsi, "run", "-f", str(spec), "--store", f"{tmp}/run{n}.db", "--quiet",
            ],
        }  # fmt: skip
        spec = Path(tmp) / "run.yaml"
        spec.write_text(SPEC.format(url=url))
        times: dict[str, list[float]] = {name: [] for name in commands}
        try:
            for n in range(args.rounds):
                for name, command in commands.items():
                    spawned, start = time.monotonic(), time.perf_counter()
                    done = subprocess.run(
                        command(n), capture_output=True, text=True, cwd=tmp, env=env
                    )
                    times[name].append(time.perf_counter() - start)
                    if done.returncode not in (0, 1):  # 1: a gate failed, still a whole run
                        raise SystemExit(f"{name} exited {done.returncode}: {done.stderr[-800:]}")
                    if name in MARKS:
                        first[name].append(mark_of(done.stderr, MARKS[name]) - spawned)
        finally:
            stub.terminate()
            stub.wait(10)
    result: dict[str, dict[str, float]] = {name: summary(t) for name, t in times.items()}
    raw = result["raw orjson+sqlite3"]["median_s"]
    for name, r in result.items():
        print(
            f"{name:20s} median {r['median_s']:.3f} s  range {r['min_s']:.3f}-{r['max_s']:.3f} s"
            f"  ({r['median_s'] / raw:.1f}x raw)"
        )
    firsts = {f"{name} to {MARKS[name]}": summary(t) for name, t in first.items()}
    for name, r in firsts.items():
        verdict = "MET" if r["median_s"] <= TARGET_FIRST_S else "MISS"
        print(
            f"{name:32s} median {r['median_s']:.3f} s  range {r['min_s']:.3f}-{r['max_s']:.3f} s"
            f"  (target <= {TARGET_FIRST_S} s) {verdict}"
        )
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    print(f"load average: {' '.join(load)}")
    out = Path(__file__).with_name("out")
    out.mkdir(exist_ok=True)
    document = {"rounds": args.rounds, "loadavg": load, **result, "first": firsts}
    (out / "startup.json").write_text(json.dumps(document, indent=2))


if __name__ == "__main__":
    main()
