"""Code rollouts: 1,024 Python solutions, each with 2 unit tests, through ``code-exec-tests`` in
the real sandbox (every run at ``namespaced``), against the same harness as plain subprocesses.

    python bench/code_rollouts.py                 # 1,024 rollouts
    python bench/code_rollouts.py --n 256 --check

- evalsi: ``evalsi.evaluate(records, ["code-exec-tests"])``: one namespaced sandbox per
  solution (bwrap, seccomp, rlimits, a pool uid), the harness forking one process per test,
  the nonce-tagged result read back; sandboxes in parallel up to the CPU count
  (``EVALSI_SANDBOX_CONCURRENCY``).
- baseline: the same harness, files and nonce as plain ``python3 -I harness.py`` subprocesses
  in temporary directories, as many at once as the sandboxes: what the grading costs with no
  isolation at all.

Target: at least 8 rollouts/s on this machine. One in eight solutions is wrong on purpose and
must fail; every score must report namespaced isolation. Results go to
``bench/out/code_rollouts.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import evalsi
from evalsi.core import Content, Record
from evalsi.packs.code import HARNESS, default_concurrency, read_report, read_tests
from evalsi.packs.code._harness import new_nonce

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
TARGET_PER_S = 8.0
TIMEOUT_S = 5.0


def rollouts(n: int) -> list[dict[str, Any]]:
    """n solutions of ``f(x) = a*x + b`` style problems, 2 tests each; every 8th is wrong."""
    rows = []
    for i in range(n):
        a, b = i % 7 + 1, i % 11
        wrong = i % 8 == 7
        body = f"return {a} * x + {b + (1 if wrong else 0)}"
        rows.append(
            {
                "id": f"r{i}",
                "output": f"```python\ndef f(x):\n    {body}\n```\n",
                "reference": [f"assert f(1) == {a + b}", f"assert f(3) == {3 * a + b}"],
                "expected": not wrong,
            }
        )
    return rows


def run_evalsi(rows: list[dict[str, Any]]) -> tuple[float, dict[str, Any]]:
    data = [{k: r[k] for k in ("id", "output", "reference")} for r in rows]
    params = {"code-exec-tests": {"timeout_seconds": TIMEOUT_S}}
    started = time.perf_counter()
    result = evalsi.evaluate(data, ["code-exec-tests"], params=params, store=":memory:")
    seconds = time.perf_counter() - started
    levels: Counter[str] = Counter()
    passed: dict[str, bool] = {}
    for _, _, res in result.store.iter_results(result.run_id):
        for score in res.scores:
            iso = score.metadata.get("isolation") or {}
            levels[f"{iso.get('driver')}/{iso.get('level')}"] += 1
        if res.scores:
            passed[res.record_id] = bool(res.scores[0].passed)
    wrong = [r["id"] for r in rows if passed.get(r["id"]) is not r["expected"]]
    return seconds, {"isolation": dict(levels), "graded": len(passed), "mismatched": wrong}


def run_plain(rows: list[dict[str, Any]], workers: int) -> tuple[float, int]:
    """The same harness and files, unsandboxed; returns (seconds, solutions that passed)."""

    def one(row: dict[str, Any]) -> bool:
        record = Record(id=row["id"], reference=Content.from_value(row["reference"]))
        plan = read_tests(record, tests_field="", entry_point="")
        nonce = new_nonce()
        work = Path(tempfile.mkdtemp(prefix="evalsi-bench-plain-"))
        try:
            (work / "harness.py").write_text(HARNESS)
            (work / "solution.py").write_text(row["output"].split("```python\n")[1][:-5])
            (work / "tests.json").write_text(json.dumps(plan.to_json(TIMEOUT_S)))
            proc = subprocess.run(
                ["/usr/bin/python3", "-I", "harness.py"],
                cwd=work,
                input=(nonce + "\n").encode(),
                capture_output=True,
                env={"PATH": "/usr/bin:/bin"},
                timeout=60,
                check=False,
            )
        finally:
            shutil.rmtree(work, ignore_errors=True)
        report = read_report(proc.stdout, nonce)
        return not report.problem and all(t.get("passed") for t in report.tests)

    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        ok = sum(pool.map(one, rows))
    return time.perf_counter() - started, ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1024, help="rollouts (solutions)")
    parser.add_argument("--check", action="store_true", help="exit 1 when the target is missed")
    args = parser.parse_args()
    if shutil.which("bwrap") is None or os.geteuid() != 0:
        print("needs bubblewrap and root (the sandbox's uid pool)", file=sys.stderr)
        return 2
    rows = rollouts(args.n)
    workers = default_concurrency()
    run_evalsi(rows[:8])  # warm: the ladder's probe, the seccomp filter, the page cache
    ours_s, info = run_evalsi(rows)
    plain_s, plain_ok = run_plain(rows, workers)
    ours_rate, plain_rate = args.n / ours_s, args.n / plain_s
    expected_ok = sum(r["expected"] for r in rows)
    all_namespaced = set(info["isolation"]) == {"bwrap/namespaced"}
    print(f"{args.n} rollouts x 2 tests, {workers} sandboxes at once, {os.cpu_count()} CPUs")
    print(f"evalsi   {ours_s:7.2f}s  {ours_rate:7.1f} rollouts/s  isolation {info['isolation']}")
    print(f"plain    {plain_s:7.2f}s  {plain_rate:7.1f} rollouts/s  (same harness, no sandbox)")
    print(f"ratio    {ours_rate / plain_rate:7.2f}  (evalsi / plain throughput)")
    failed = []
    if ours_rate < TARGET_PER_S:
        failed.append(f"{ours_rate:.1f} rollouts/s < {TARGET_PER_S}")
    if info["mismatched"] or info["graded"] != args.n:
        failed.append(f"verdicts wrong for {info['mismatched'][:5]} (graded {info['graded']})")
    if plain_ok != expected_ok:
        failed.append(f"plain baseline passed {plain_ok}, expected {expected_ok}")
    if not all_namespaced:
        failed.append(f"isolation not all namespaced: {info['isolation']}")
    print("MET   all targets" if not failed else "MISS  " + "; ".join(failed))
    OUT.mkdir(exist_ok=True)
    result = {
        "n": args.n,
        "tests_per_rollout": 2,
        "concurrency": workers,
        "cpus": os.cpu_count(),
        "evalsi_seconds": ours_s,
        "evalsi_per_s": ours_rate,
        "plain_seconds": plain_s,
        "plain_per_s": plain_rate,
        "ratio": ours_rate / plain_rate,
        "isolation": info["isolation"],
        "target_per_s": TARGET_PER_S,
    }
    (OUT / "code_rollouts.json").write_text(json.dumps(result, indent=2))
    return 1 if failed and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
