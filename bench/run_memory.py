"""Run memory: peak RSS of a Run as the number of samples grows (target: 100k samples < 500 MB).

    python bench/run_memory.py                # 25,000 and 100,000 samples
    python bench/run_memory.py --samples 200000

Each size runs in its own subprocess (so VmHWM is its own): an async Python target that answers
instantly (the cost under test is evalsi's: the task queue, pipelined grading, the stored
outputs and results), exact-match + length grading, 2 trials, results in a fresh SQLite store.
The growth per extra sample is printed too.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

OUT = Path(__file__).resolve().parent / "out"

TARGET = """
async def answer(text):
    return text.split("|", 1)[1] if "|" in text else text
"""

CHILD = r"""
import sys, time, orjson
sys.path.insert(0, sys.argv[3])
import evalsi
from evalsi.runs import DatasetSpec, EvaluatorEntry, RunSpec, TargetSpec
spec = RunSpec(
    name="memory",
    target=TargetSpec(kind="python", python="memtarget:answer"),
    dataset=DatasetSpec(source=sys.argv[1], fields={"output": None}),
    evaluators=(EvaluatorEntry("exact-match"), EvaluatorEntry("length")),
    trials=2,
    max_concurrency=64,
)
start = time.perf_counter()
result = evalsi.run(spec, store=sys.argv[2])
seconds = time.perf_counter() - start
rss = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
em = result.metric("exact-match")
print(orjson.dumps({"samples": result.records, "tasks": result.records * 2, "seconds": seconds,
                    "rss_mb": int(rss) / 1024, "status": result.status, "n": em.n}).decode())
"""


def make_data(path: Path, n: int) -> None:
    rng = random.Random(5)
    with path.open("w") as f:
        for i in range(n):
            ref = rng.choice(["Paris", "Oslo", "4", "blue"])
            guess = ref if rng.random() < 0.7 else "wrong"
            f.write(json.dumps({"id": f"s{i}", "input": f"q{i}|{guess}", "reference": ref}) + "\n")


def measure(n: int, tmp: Path) -> dict[str, float]:
    data = tmp / f"d{n}.jsonl"
    make_data(data, n)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(data), str(tmp / f"s{n}.db"), str(tmp)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"run of {n} samples failed:\n{proc.stderr[-3000:]}")
    out: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=100_000)
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "memtarget.py").write_text(TARGET)
        small = measure(args.samples // 4, tmp)
        large = measure(args.samples, tmp)
    report = {"small": small, "large": large}
    (OUT / "run_memory.json").write_text(json.dumps(report, indent=2))
    for side in (small, large):
        rate = side["tasks"] / side["seconds"]
        rss = side["rss_mb"]
        print(f"{side['samples']:>9,.0f} samples  {rate:>8,.0f} tasks/s  peak RSS {rss:.0f} MB")
    # Per-sample state that pass@k needs (trial counts) grows with the samples; report it.
    per_sample_kb = (
        (large["rss_mb"] - small["rss_mb"]) * 1024 / (large["samples"] - small["samples"])
    )
    print(f"growth: {per_sample_kb:.2f} KB of peak RSS per extra sample")
    checks = [(f"{args.samples:,} samples: peak RSS < 500 MB", large["rss_mb"] < 500)]
    for name, ok in checks:
        print(f"{'MET ' if ok else 'MISS'}  {name}")
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
