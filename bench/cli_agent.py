"""CLI agents in the sandbox: trials/s of a trivial agent that fixes one file of a git checkout,
graded by a checker that runs two unit tests, against the same work as plain subprocesses.

    python bench/cli_agent.py                    # 48 trials a round, 5 rounds a side
    python bench/cli_agent.py --trials 96 --rounds 7 --check

- evalsi: ``evalsi.run`` on an EvalRun with ``kind: cli`` (in process, a fresh SQLite store per
  round): per trial a namespaced sandbox (bwrap, seccomp, rlimits, a pool uid), the repository
  checked out into its workspace at the commit, the agent (``sh`` + ``sed``) run there, its
  reported commands read and its ``git diff`` taken, the checker (``python3 -m unittest``, 2
  tests) run in the same sandbox, the workspace snapshotted, the cassette recorded, the result
  stored and graded (``task-success``).
- plain: the same agent, checkout, diff and tests as plain subprocesses in temporary
  directories (``git read-tree -u`` into the directory, ``sh``, ``git diff``, ``python3 -m
  unittest``), as many trials at once as the run's ``maxConcurrency``: the work with no
  sandbox, no harness, no store.
- whole process: ``evalsi run -f spec.yaml --format json`` as a user runs it (interpreter
  start, imports, the ladder's probe included), once per round.

Rounds alternate evalsi, plain, evalsi, plain...; each side reports the median and the range of
its rounds (never the best). Target (issue "Agents in the wild"): at least 4 trials/s on this
machine (2 cores) in process; every trial must resolve. Results go to ``bench/out/cli_agent.json``.
Needs root (the sandbox's uid pool) and bubblewrap.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
TARGET_PER_S = 4.0
SOURCE = "def add(a, b):\n    return a - b\n\n\ndef double(x):\n    return x * 2\n"
TESTS = (
    "import unittest\n\nfrom calc import add, double\n\n\n"
    "class TestCalc(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n"
    "    def test_double(self):\n        self.assertEqual(double(4), 8)\n"
)
AGENT = (
    "sed 's/a - b/a + b/' calc/__init__.py > .evalsi/fixed && cat .evalsi/fixed > calc/__init__.py"
    ' && echo \'{"command": "sed calc/__init__.py", "exit_code": 0}\' >> "$EVALSI_COMMANDS_FILE"'
)
TEST_ARGV = ["python3", "-m", "unittest", "tests.test_calc"]
GIT_ENV = {
    "GIT_AUTHOR_NAME": "b",
    "GIT_AUTHOR_EMAIL": "b@example.com",
    "GIT_COMMITTER_NAME": "b",
    "GIT_COMMITTER_EMAIL": "b@example.com",
}


def make_repo(root: Path) -> Path:
    repo = root / "calc"
    (repo / "calc").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "calc" / "__init__.py").write_text(SOURCE)
    (repo / "tests" / "__init__.py").write_text("")
    (repo / "tests" / "test_calc.py").write_text(TESTS)
    (repo / ".gitignore").write_text("__pycache__/\n")
    env = {**os.environ, **GIT_ENV}
    for argv in (["init", "-q"], ["add", "."], ["commit", "-qm", "calc"]):
        subprocess.run(["git", *argv], cwd=repo, env=env, check=True)
    return repo


def write_spec(root: Path, repo: Path, trials: int, concurrency: int) -> Path:
    rows = [{"id": f"t{i}", "input": "make add add"} for i in range(trials)]
    (root / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = root / "spec.yaml"
    spec.write_text(f"""\
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: bench-cli}}
spec:
  maxConcurrency: {concurrency}
  target:
    agent:
      kind: cli
      cli: {{command: [sh, -c, {json.dumps(AGENT)}], timeoutSeconds: 30}}
  environment:
    repository: {{path: {repo}}}
    sandbox: {{minIsolation: namespaced, timeoutSeconds: 30}}
    checkers:
      - exitCode: {{command: {json.dumps(TEST_ARGV)}}}
        name: two-tests
  dataset: {{path: tasks.jsonl}}
  evaluators: [{{ref: task-success}}]
""")
    return spec


def run_evalsi(spec: Path, trials: int, work: Path) -> tuple[float, int]:
    import evalsi

    store = work / f"store-{time.monotonic_ns()}.db"
    started = time.perf_counter()
    result = evalsi.run(spec, store=store)
    seconds = time.perf_counter() - started
    metric = next(m for m in result.metrics if m.metric == "task-success")
    resolved = round(metric.mean * metric.n) if metric.mean is not None else 0
    store.unlink(missing_ok=True)
    return seconds, resolved if result.tasks == {"ok": trials} else -1


def run_plain(repo: Path, trials: int, workers: int) -> tuple[float, int]:
    """The same checkout, agent, diff and tests as plain subprocesses."""
    git_dir = repo / ".git"
    sha = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()

    def one(_: int) -> bool:
        base = Path(tempfile.mkdtemp(prefix="evalsi-bench-cli-"))
        ws = base / "ws"
        ws.mkdir()
        env = {
            "PATH": "/usr/bin:/bin",
            "GIT_DIR": str(git_dir),
            "GIT_WORK_TREE": str(ws),
            "GIT_INDEX_FILE": str(base / "index"),
        }
        try:
            subprocess.run(["git", "read-tree", "--reset", "-u", sha], env=env, check=True)
            (ws / ".evalsi").mkdir()
            agent_env = {"PATH": "/usr/bin:/bin", "EVALSI_COMMANDS_FILE": ".evalsi/c.jsonl"}
            subprocess.run(["sh", "-c", AGENT], cwd=ws, env=agent_env, check=True)
            diff = subprocess.run(
                ["git", "diff", sha, "--"], cwd=ws, env=env, capture_output=True, check=True
            ).stdout
            tests = subprocess.run(TEST_ARGV, cwd=ws, env=agent_env, capture_output=True)
            return bool(diff) and tests.returncode == 0
        finally:
            shutil.rmtree(base, ignore_errors=True)

    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        ok = sum(pool.map(one, range(trials)))
    return time.perf_counter() - started, ok


def run_process(spec: Path, trials: int) -> tuple[float, int]:
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "evalsi", "run", "-f", str(spec), "--format", "json"],
        cwd=spec.parent,
        capture_output=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        return seconds, -1
    out = json.loads(proc.stdout)
    metric = next(m for m in out["metrics"] if m["metric"] == "task-success")
    return seconds, round(metric["mean"] * metric["n"])


def summary(rates: list[float]) -> dict[str, float]:
    return {"median": statistics.median(rates), "min": min(rates), "max": max(rates)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=48, help="trials per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per side")
    parser.add_argument("--concurrency", type=int, default=4, help="the run's maxConcurrency")
    parser.add_argument("--check", action="store_true", help="exit 1 when the target is missed")
    args = parser.parse_args()
    if shutil.which("bwrap") is None or os.geteuid() != 0:
        print("needs bubblewrap and root (the sandbox's uid pool)", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="evalsi-bench-cli-"))
    try:
        repo = make_repo(work)
        spec = write_spec(work, repo, args.trials, args.concurrency)
        (work / "warm").mkdir()
        warm = write_spec(work / "warm", repo, 4, args.concurrency)
        run_evalsi(warm, 4, work)  # the ladder's probe, the seccomp filter, the page cache
        ours: list[float] = []
        plain: list[float] = []
        process: list[float] = []
        wrong: list[str] = []
        for r in range(args.rounds):
            seconds, ok = run_evalsi(spec, args.trials, work)
            ours.append(args.trials / seconds)
            if ok != args.trials:
                wrong.append(f"evalsi round {r}: {ok}/{args.trials} resolved")
            seconds, ok = run_plain(repo, args.trials, args.concurrency)
            plain.append(args.trials / seconds)
            if ok != args.trials:
                wrong.append(f"plain round {r}: {ok}/{args.trials} resolved")
            seconds, ok = run_process(spec, args.trials)
            process.append(args.trials / seconds)
            if ok != args.trials:
                wrong.append(f"process round {r}: {ok}/{args.trials} resolved")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    a, b, p = summary(ours), summary(plain), summary(process)
    print(
        f"{args.trials} trials x {args.rounds} rounds a side, {args.concurrency} at once, "
        f"{os.cpu_count()} CPUs; trials/s median [min, max]"
    )
    print(f"evalsi   {a['median']:6.2f} [{a['min']:.2f}, {a['max']:.2f}]  (in process, bwrap)")
    print(f"plain    {b['median']:6.2f} [{b['min']:.2f}, {b['max']:.2f}]  (same work, no sandbox)")
    print(f"process  {p['median']:6.2f} [{p['min']:.2f}, {p['max']:.2f}]  (evalsi run -f, whole)")
    print(f"ratio    {a['median'] / b['median']:6.2f}  (evalsi / plain, medians)")
    failed = list(wrong)
    if a["median"] < TARGET_PER_S:
        failed.append(f"{a['median']:.2f} trials/s < {TARGET_PER_S}")
    print("MET   all targets" if not failed else "MISS  " + "; ".join(failed))
    OUT.mkdir(exist_ok=True)
    result: dict[str, Any] = {
        "trials_per_round": args.trials,
        "rounds": args.rounds,
        "concurrency": args.concurrency,
        "cpus": os.cpu_count(),
        "evalsi_per_s": a,
        "plain_per_s": b,
        "process_per_s": p,
        "ratio": a["median"] / b["median"],
        "target_per_s": TARGET_PER_S,
        "problems": failed,
    }
    (OUT / "cli_agent.json").write_text(json.dumps(result, indent=2))
    return 1 if failed and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
