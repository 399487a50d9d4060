"""Evidence bundles: write, validate and rescore the bundle of an agent run, against raw hashing
and parsing of the same files.

    python bench/bundle.py                              # 10,000 tasks x 20 steps, 3 rounds
    python bench/bundle.py --tasks 2000 --rounds 5
    python bench/bundle.py --sizes 2500,5000,10000      # peak RSS as the bundle grows

Setup, timed apart and in a process of its own: a real Run in a temporary SQLite store. Its
target is a Python function (written to the temp dir) that returns, for each sample, a
``TargetOutput`` whose trajectory has ``--steps`` steps (an ``llm_call`` with usage, then a
``tool_call`` with arguments and a result, in turn), the environment's check and its end
state. Some tasks go wrong on purpose (calls out of order, a tool timing out, the order never
saved, a wrong answer), so every evaluator both passes and fails. Graded by ``exact-match``
and eight deterministic agent-pack evaluators (``evaluators()``): 9 results a task.

Each round, interleaved (the order after the write is reversed every other round, so load and
the page cache fall on all alike; the bundle is read back from the page cache by everyone):

- ``write_bundle`` of the run into a new directory: seconds, MB/s and tasks/s;
- ``validate_bundle`` of it: MB/s (every file of the bundle / seconds); exit code 0 asserted;
- ``rescore_bundle``: tasks/s; its outcome MATCH asserted. It validates the bundle first,
  so its time includes one validation;
- baselines on the same files: sha256 of every file (hashlib, 1 MiB chunks), the hashing
  bound; and orjson parsing every line of the JSONL files (``records.jsonl`` among them) and
  each JSON file, the parse bound. "hash + parse" is the bundle's bytes over the sum of both:
  what a validation doing only these two, one after the other, would reach;
- whole processes, start-up included: ``evalsi bundle RUN -o DIR --store DB``, ``evalsi
  bundle validate DIR`` and ``evalsi rescore DIR``, each with its peak RSS (``LAUNCHER``).

Medians and [min-max] ranges are reported, never a best-of. ``--sizes`` builds a run of each
size and runs the three commands as whole processes on it, one process each so no size
inherits another's peak RSS; memory is flat when the largest size's peak is within
``FLAT_SHARE`` of the smallest's.

Targets: validate >= 200 MB/s (hashing bound); rescore >= 2,000 tasks/s for deterministic
evaluators; peak RSS flat as the bundle grows. Results go to ``bench/out/bundle.json`` (or
``--json FILE``); ``--sizes`` to ``bench/out/bundle_sizes.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "out"
MB = 1_000_000
CHUNK = 1 << 20
MODULE = "bundle_bench_agent"
VALIDATE_MB_S = 200.0
RESCORE_TASKS_S = 2000.0
FLAT_SHARE = 0.10
"""Largest size's peak RSS over the smallest's, at most 1 + this, for memory to be flat."""

TARGET = '''
"""The bench's agent: a fixed trajectory per sample, some of them going wrong on purpose."""

from evalsi.connectors import TargetOutput
from evalsi.core import Check, Content, Step, ToolCall, Trajectory, Usage


def tools(steps):
    """The tool calls of a task that goes right: authenticate, search/lookup, save_order."""
    middle = [("search", "lookup")[k % 2] for k in range(steps // 2 - 2)]
    return ["authenticate", *middle, "save_order"]


def trajectory(i, steps):
    names = tools(steps)
    if i % 11 == 0:
        names[-1] = "cancel_order"
    if i % 7 == 0:
        names[1], names[2] = names[2], names[1]
    t0 = 1_760_000_000_000_000_000 + i * 1_000_000_000
    ms = 1_000_000
    out = []
    for k, name in enumerate(names):
        usage = Usage(input_tokens=150 + 10 * k, output_tokens=25)
        out.append(
            Step("llm_call", "stub-model", output=f"next: {name}", usage=usage,
                 start_time_unix_nano=t0 + 2 * k * ms, end_time_unix_nano=t0 + (2 * k + 1) * ms)
        )
        args = {"user": f"u{i % 100}"} if k == 0 else {"q": f"item {i}-{k}", "page": k}
        error = "timed out after 5 s" if i % 13 == 0 and k == 3 else ""
        result = None if error else [
            {"id": f"{i}-{k}-{j}", "score": round(1 - j / 10, 2)} for j in range(3)
        ]
        out.append(
            Step("tool_call", name, input=args, output=result,
                 tool_call=ToolCall(name, args, f"call-{k}"), error=error,
                 start_time_unix_nano=t0 + (2 * k + 1) * ms,
                 end_time_unix_nano=t0 + (2 * k + 2) * ms)
        )
    saved = i % 11 != 0
    return Trajectory(
        out,
        stop_reason="final_answer",
        checks=[Check("order saved", saved, "" if saved else "no order in the store")],
        end_state={"order": i, "saved": saved},
    )


async def answer(task):
    i, steps = task["order"], task["steps"]
    text = f"done: order {i}" if i % 10 else f"order {i} failed"
    usage = Usage(input_tokens=2000, output_tokens=250)
    return TargetOutput(output=Content.of_text(text), usage=usage,
                        trajectory=trajectory(i, steps))
'''


def evaluators(steps: int) -> list[tuple[str, dict[str, Any]]]:
    """``exact-match`` and eight deterministic agent-pack evaluators (no judge)."""
    names = ["authenticate", *(("search", "lookup")[k % 2] for k in range(steps // 2 - 2))]
    names.append("save_order")
    return [
        ("exact-match", {}),
        ("tool-call-accuracy", {"expected": names}),
        ("trajectory-match", {"expected": names}),
        ("tool-called", {"tool": "save_order"}),
        ("no-tool-error", {}),
        ("within-budget", {"max_steps": steps, "max_tokens": 5000}),
        ("final-answer", {"regex": r"^done: order \d+$"}),
        ("agent-efficiency", {"max_steps": steps}),
        ("task-success", {}),
    ]


def build_run(work: Path, tasks: int, steps: int) -> tuple[Path, str, float]:
    """A finished Run of ``tasks`` samples in a new store under ``work``: (store, run id, s)."""
    import evalsi
    from evalsi.specs import DatasetSpec, EvaluatorEntry, RunSpec, TargetSpec

    if not (work / f"{MODULE}.py").exists():
        (work / f"{MODULE}.py").write_text(TARGET)
    if str(work) not in sys.path:
        sys.path.insert(0, str(work))
    data = work / f"tasks-{tasks}.jsonl"
    categories = ("billing", "shipping", "returns")
    with data.open("wb") as f:
        for i in range(tasks):
            row = {
                "id": f"t{i}",
                "input": {"order": i, "steps": steps},
                "reference": f"done: order {i}",
                "metadata": {"category": categories[i % 3]},
            }
            f.write(orjson.dumps(row) + b"\n")
    spec = RunSpec(
        name="bundle-bench",
        target=TargetSpec(kind="python", python=f"{MODULE}:answer"),
        dataset=DatasetSpec(source=str(data)),
        evaluators=tuple(EvaluatorEntry(ref, params) for ref, params in evaluators(steps)),
        max_concurrency=64,
    )
    store = work / f"run-{tasks}.db"
    started = time.perf_counter()
    result = evalsi.run(spec, store=store)
    seconds = time.perf_counter() - started
    assert result.status == "done", result.status
    assert result.tasks == {"ok": tasks}, result.tasks
    return store, result.run_id, seconds


def build_in_child(work: Path, tasks: int, steps: int) -> tuple[Path, str, float]:
    """``build_run`` in a process of its own: the process that measures never held a run (its
    garbage collector would walk those objects at every collection)."""
    cmd = [sys.executable, __file__, "--build-into", str(work)]
    cmd += ["--tasks", str(tasks), "--steps", str(steps)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"building the run failed:\n{proc.stderr[-3000:]}")
    built = json.loads(proc.stdout.strip().splitlines()[-1])
    return Path(built["store"]), built["run_id"], built["seconds"]


def bundle_bytes(directory: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in sorted(directory.iterdir())}


def sha256_files(directory: Path) -> float:
    """Seconds to sha256 every file of the bundle, 1 MiB at a time."""
    started = time.perf_counter()
    for path in sorted(directory.iterdir()):
        h = hashlib.sha256()
        with path.open("rb", buffering=0) as f:
            while chunk := f.read(CHUNK):
                h.update(chunk)
        h.hexdigest()
    return time.perf_counter() - started


def parse_files(directory: Path) -> tuple[float, int]:
    """(seconds, bytes) to parse every line of the JSONL files and each JSON file."""
    size = 0
    started = time.perf_counter()
    for path in sorted(directory.iterdir()):
        if path.suffix == ".jsonl":
            with path.open("rb") as f:
                for line in f:
                    orjson.loads(line)
                    size += len(line)
        elif path.suffix == ".json":
            data = path.read_bytes()
            orjson.loads(data)
            size += len(data)
    return time.perf_counter() - started, size


LAUNCHER = r"""
import os, sys, time
report, argv = sys.argv[1], sys.argv[2:]
started = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.execv(argv[0], argv)
_, status, usage = os.wait4(pid, 0)
seconds = time.perf_counter() - started
with open(report, "w") as f:
    f.write(f"{seconds} {usage.ru_maxrss} {os.waitstatus_to_exitcode(status)}")
"""
"""Runs a command and records its wall time and peak RSS. A child's ``ru_maxrss`` keeps the
high-water mark of the image it was forked from (exec does not reset it), so the command is
forked from this small interpreter, not from the bench, whose heap holds a whole run."""


def whole_process(args: list[str]) -> tuple[float, float]:
    """``python -m evalsi ARGS`` from spawn to exit: (seconds, peak RSS in MB); a non-zero
    exit stops the bench."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report"
        cmd = [sys.executable, "-c", LAUNCHER, str(report), sys.executable, "-m", "evalsi", *args]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise SystemExit(f"the launcher failed:\n{proc.stderr[-2000:]}")
        seconds, maxrss_kb, code = report.read_text().split()
    if code != "0":
        raise SystemExit(f"evalsi {' '.join(args)} exited {code}:\n{proc.stderr[-2000:]}")
    return float(seconds), int(maxrss_kb) / 1024


def spread(values: list[float]) -> dict[str, Any]:
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "rounds": values,
    }


def loadavg() -> list[str]:
    with open("/proc/loadavg") as f:
        return f.read().split()[:3]


@dataclass(slots=True)
class Round:
    """What one round's measures share: the bundle just written and where figures go."""

    args: argparse.Namespace
    store: Path
    run_id: str
    bundle: Path
    total: int
    figures: dict[str, list[float]]

    def add(self, key: str, value: float) -> None:
        self.figures.setdefault(key, []).append(value)


def validate(r: Round) -> None:
    from evalsi.evidence import validate_bundle

    started = time.perf_counter()
    v = validate_bundle(r.bundle)
    seconds = time.perf_counter() - started
    assert v.exit_code == 0, (v.status, v.unreadable, v.findings[:5])
    assert not v.warnings, v.warnings
    assert v.tasks == r.args.tasks, v.tasks
    r.add("validate_mb_s", r.total / MB / seconds)


def rescore(r: Round) -> None:
    from evalsi.evidence import rescore_bundle

    started = time.perf_counter()
    out = rescore_bundle(r.bundle)
    seconds = time.perf_counter() - started
    assert out.outcome == "MATCH", (out.outcome, out.reason, out.differences[:3])
    assert out.compared == r.args.tasks * len(evaluators(r.args.steps)), out.compared
    r.add("rescore_tasks_s", r.args.tasks / seconds)


def hashing(r: Round) -> None:
    r.add("sha256_s", sha256_files(r.bundle))
    r.add("sha256_mb_s", r.total / MB / r.figures["sha256_s"][-1])


def parsing(r: Round) -> None:
    seconds, size = parse_files(r.bundle)
    r.add("parse_s", seconds)
    r.add("parse_mb_s", size / MB / seconds)


def process_write(r: Round) -> None:
    again = r.bundle.with_name(r.bundle.name + "-process")
    seconds, rss = whole_process(["bundle", r.run_id, "-o", str(again), "--store", str(r.store)])
    shutil.rmtree(again)
    r.add("process_write_s", seconds)
    r.add("process_write_rss_mb", rss)


def process_validate(r: Round) -> None:
    seconds, rss = whole_process(["bundle", "validate", str(r.bundle)])
    r.add("process_validate_mb_s", r.total / MB / seconds)
    r.add("process_validate_rss_mb", rss)


def process_rescore(r: Round) -> None:
    seconds, rss = whole_process(["rescore", str(r.bundle)])
    r.add("process_rescore_tasks_s", r.args.tasks / seconds)
    r.add("process_rescore_rss_mb", rss)


MEASURES: tuple[Callable[[Round], None], ...] = (
    hashing,
    validate,
    parsing,
    rescore,
    process_validate,
    process_rescore,
    process_write,
)
"""What each round measures after the write, in this order and then in reverse."""


def rounds(args: argparse.Namespace) -> int:
    from evalsi.evidence import write_bundle
    from evalsi.store import SqlStore

    load_start = loadavg()
    figures: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        print(f"setup: a run of {args.tasks:,} tasks x {args.steps} steps...", file=sys.stderr)
        store_path, run_id, build_s = build_in_child(work, args.tasks, args.steps)
        store = SqlStore.open(store_path)
        files: dict[str, int] = {}
        try:
            for n in range(args.rounds):
                bundle = work / f"bundle-{n}"
                started = time.perf_counter()
                written = write_bundle(store, run_id, bundle)
                write_s = time.perf_counter() - started
                assert written.tasks == args.tasks, written
                files = bundle_bytes(bundle)
                r = Round(args, store_path, run_id, bundle, sum(files.values()), figures)
                r.add("write_s", write_s)
                r.add("write_mb_s", r.total / MB / write_s)
                r.add("write_tasks_s", args.tasks / write_s)
                for measure in MEASURES if n % 2 == 0 else reversed(MEASURES):
                    measure(r)
                both = figures["sha256_s"][-1] + figures["parse_s"][-1]
                r.add("hash_parse_mb_s", r.total / MB / both)
                shutil.rmtree(bundle)
                print(
                    f"round {n + 1}: write {write_s:.2f} s, "
                    f"validate {figures['validate_mb_s'][-1]:.1f} MB/s "
                    f"(sha256 {figures['sha256_mb_s'][-1]:.0f} MB/s), "
                    f"rescore {figures['rescore_tasks_s'][-1]:,.0f} tasks/s",
                    file=sys.stderr,
                )
        finally:
            store.close()
    total = sum(files.values())
    report: dict[str, Any] = {
        "tasks": args.tasks,
        "steps": args.steps,
        "evaluators": [ref for ref, _ in evaluators(args.steps)],
        "rounds": args.rounds,
        "setup_s": build_s,
        "bundle_mb": total / MB,
        "files_mb": {name: size / MB for name, size in files.items()},
        "loadavg": {"start": load_start, "end": loadavg()},
        "cpus": os.cpu_count(),
        **{k: spread(v) for k, v in figures.items() if k not in ("sha256_s", "parse_s")},
    }
    report["validate_over_sha256"] = spread(
        [a / b for a, b in zip(figures["validate_mb_s"], figures["sha256_mb_s"], strict=True)]
    )
    checks = [
        (
            f"validate >= {VALIDATE_MB_S:.0f} MB/s",
            report["validate_mb_s"]["median"] >= VALIDATE_MB_S,
        ),
        (
            f"rescore >= {RESCORE_TASKS_S:,.0f} tasks/s",
            report["rescore_tasks_s"]["median"] >= RESCORE_TASKS_S,
        ),
    ]
    report["checks"] = [{"check": name, "met": ok} for name, ok in checks]
    write_report(args.json or OUT / "bundle.json", report)
    print_rounds(report, checks)
    return 0 if all(ok for _, ok in checks) else 1


def print_rounds(report: dict[str, Any], checks: list[tuple[str, bool]]) -> None:
    def row(label: str, key: str, unit: str, digits: int = 1, target: str = "") -> None:
        s = report[key]
        median, low, high = (f"{s[k]:,.{digits}f}" for k in ("median", "min", "max"))
        print(f"  {label:<34} {median:>10} {unit:<8} [{low}-{high}]  {target}")

    met = dict(checks)
    largest = sorted(report["files_mb"].items(), key=lambda kv: -kv[1])[:3]
    print(
        f"\nbundle of {report['tasks']:,} tasks x {report['steps']} steps, "
        f"{len(report['evaluators'])} evaluators: {report['bundle_mb']:.1f} MB in "
        f"{len(report['files_mb'])} files ("
        + ", ".join(f"{name} {mb:.1f}" for name, mb in largest)
        + f"); setup (the run) {report['setup_s']:.1f} s"
    )
    print(f"medians of {report['rounds']} rounds [min-max]:")
    row("write_bundle", "write_s", "s", 2)
    row("  bundle MB / seconds", "write_mb_s", "MB/s")
    row("  tasks / seconds", "write_tasks_s", "tasks/s", 0)
    validate = f"validate >= {VALIDATE_MB_S:.0f} MB/s"
    verdict = "MET" if met[validate] else "MISSED"
    row("validate_bundle", "validate_mb_s", "MB/s", 1, f">= {VALIDATE_MB_S:.0f}  {verdict}")
    row("  sha256 of every file (hashlib)", "sha256_mb_s", "MB/s")
    row("  orjson parse of JSONL + JSON", "parse_mb_s", "MB/s")
    row("  hash + parse, one after the other", "hash_parse_mb_s", "MB/s")
    row("  validate / sha256", "validate_over_sha256", "", 3)
    rescore = f"rescore >= {RESCORE_TASKS_S:,.0f} tasks/s"
    verdict = "MET" if met[rescore] else "MISSED"
    row("rescore_bundle", "rescore_tasks_s", "tasks/s", 0, f">= {RESCORE_TASKS_S:,.0f}  {verdict}")
    print("whole process, start-up included:")
    row("evalsi bundle RUN -o DIR", "process_write_s", "s", 2)
    row("  peak RSS", "process_write_rss_mb", "MB", 0)
    row("evalsi bundle validate DIR", "process_validate_mb_s", "MB/s")
    row("  peak RSS", "process_validate_rss_mb", "MB", 0)
    row("evalsi rescore DIR", "process_rescore_tasks_s", "tasks/s", 0)
    row("  peak RSS", "process_rescore_rss_mb", "MB", 0)
    load = report["loadavg"]
    print(
        f"load average: {' '.join(load['start'])} at the start, {' '.join(load['end'])} at the "
        f"end ({report['cpus']} CPUs)"
    )


def sizes(args: argparse.Namespace) -> int:
    """Peak RSS and time of the three commands at each size, one process each."""
    load_start = loadavg()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for tasks in args.sizes:
            print(f"setup: a run of {tasks:,} tasks x {args.steps} steps...", file=sys.stderr)
            store, run_id, build_s = build_in_child(work, tasks, args.steps)
            bundle = work / f"bundle-{tasks}"
            row: dict[str, Any] = {"tasks": tasks, "setup_s": build_s}
            commands = {
                "write": ["bundle", run_id, "-o", str(bundle), "--store", str(store)],
                "validate": ["bundle", "validate", str(bundle)],
                "rescore": ["rescore", str(bundle)],
            }
            for name, cmd in commands.items():
                seconds, rss = whole_process(cmd)
                row[name] = {"seconds": seconds, "rss_mb": rss}
                if name == "write":
                    row["bundle_mb"] = sum(bundle_bytes(bundle).values()) / MB
            shutil.rmtree(bundle)
            rows.append(row)
            print(
                f"{tasks:>8,} tasks  {row['bundle_mb']:7.1f} MB  "
                + "  ".join(
                    f"{name} {row[name]['seconds']:6.2f} s {row[name]['rss_mb']:5.0f} MB"
                    for name in commands
                ),
                flush=True,
            )
    small, large = rows[0], rows[-1]
    checks = []
    for name in ("write", "validate", "rescore"):
        a, b = small[name]["rss_mb"], large[name]["rss_mb"]
        per_1000 = (b - a) * 1000 / max(1, large["tasks"] - small["tasks"])
        ok = b <= (1 + FLAT_SHARE) * a
        checks.append(
            {
                "check": f"{name}: peak RSS flat ({large['tasks']:,} vs {small['tasks']:,} tasks, "
                f"within {FLAT_SHARE:.0%})",
                "met": ok,
                "value": f"{b:.0f} vs {a:.0f} MB, {per_1000:+.2f} MB per 1,000 tasks",
            }
        )
    report = {
        "steps": args.steps,
        "sizes": rows,
        "checks": checks,
        "loadavg": {"start": load_start, "end": loadavg()},
        "cpus": os.cpu_count(),
    }
    write_report(args.json or OUT / "bundle_sizes.json", report)
    for check in checks:
        print(f"{'MET   ' if check['met'] else 'MISSED'}  {check['check']}: {check['value']}")
    load = report["loadavg"]
    print(
        f"load average: {' '.join(load['start'])} at the start, {' '.join(load['end'])} at the end"
    )
    return 0 if all(c["met"] for c in checks) else 1


def write_report(path: Path, report: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=20, help="steps per trajectory (even, >= 6)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--sizes",
        type=lambda s: sorted(int(n) for n in s.split(",")),
        metavar="N,N,...",
        help="only: peak RSS of write, validate and rescore at each size (whole processes)",
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the figures to FILE")
    parser.add_argument("--build-into", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.steps < 6 or args.steps % 2:
        parser.error("--steps: an even number, at least 6 (a model call, then a tool call)")
    sys.path.insert(0, str(ROOT / "src"))
    if args.build_into:
        store, run_id, seconds = build_run(args.build_into, args.tasks, args.steps)
        print(json.dumps({"store": str(store), "run_id": run_id, "seconds": seconds}))
        return 0
    if args.sizes:
        return sizes(args)
    return rounds(args)


if __name__ == "__main__":
    sys.exit(main())
