"""Cluster throughput and memory: the same spec on one embedded process and on 2 `evalsi worker`
processes (NATS JetStream + PostgreSQL), rounds interleaved (A B A B ...).

    python bench/cluster.py                                  # both series, 20,000 tasks, 3 rounds
    python bench/cluster.py --series stored --tasks 1000000 --rounds 1     # the 1M-task figure
    python bench/cluster.py --series stub --tasks 20000 --latency-ms 50

Series:

- ``stored`` (CPU-bound): a Python target that returns the sample's stored answer, graded by
  ``exact-match``: what a worker costs per task when the target costs nothing.
- ``stub`` (I/O-bound): the stub LLM server (its own process, ``--latency-ms`` per call); the
  embedded run at ``maxConcurrency`` 64, each worker at 64 too (4 shards at once x 16).

The cluster side: a nats-server of the bench's own (JetStream, temp store), a fresh PostgreSQL
schema on 127.0.0.1:5432 per round, two ``evalsi worker`` processes started once per series,
the run's owner (``execute_run`` with ``ClusterDispatch``) in this process. The embedded side:
``execute_run`` in this process on a SQLite store, as ``evalsi run`` does. Each round checks
every task was stored once (outputs rows = tasks) and the figures equal the embedded ones.

Reported per series: tasks/s (median and range), the ratio cluster/embedded of the medians,
the RSS of this process and of each worker sampled every second (max, and at 25/50/75/100 % of
the run: flat means bounded), and CPU seconds per task of each party — the workers, the owner,
nats-server, PostgreSQL's backends — from which ``extrapolate`` projects 8, 32 and 128 workers
and names the first bottleneck. (No whole-process figure yet: the owner runs in this process.)

Targets (issue 23): the stub series >= 1.6x embedded with 2 workers; 1M tasks complete with
every task stored once and worker and server RSS < 500 MB, flat. Results go to
``bench/out/cluster.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from connector_throughput import start_stub  # noqa: E402

from evalsi.cluster import ClusterConfig, ClusterDispatch, PoolConfig  # noqa: E402
from evalsi.packs import builtin_registry  # noqa: E402
from evalsi.runs import Dispatched, execute_run  # noqa: E402
from evalsi.specs import BudgetSpec, run_spec_from_dict  # noqa: E402
from evalsi.store import SqlStore  # noqa: E402

OUT = HERE / "out"
EVALSI = Path(sys.executable).with_name("evalsi")
PG = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
TARGET = "def answer(question):\n    return 'a' + question[1:]\n"


def clock_ticks() -> int:
    return os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process (and its reaped children)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / clock_ticks()


STUB_PID = 0  # the stub LLM server's process, whose CPU is reported beside the others'


def machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of every core, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def pids_named(name: str) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == name:
                    out.append(int(entry.name))
            except OSError:
                continue
    return out


class Sampler:
    """RSS of some processes every second, and the run's progress (rows stored) beside it."""

    def __init__(self, pids: dict[str, int], progress: Any) -> None:
        self.pids = pids
        self.progress = progress
        self.samples: list[tuple[float, dict[str, float]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self.samples.append((self.progress(), {k: rss_mb(p) for k, p in self.pids.items()}))

    def profile(self, total: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in self.pids:
            series = [(done, rss[name]) for done, rss in self.samples]
            if not series:
                continue
            at = {}
            for q in (0.25, 0.5, 0.75, 1.0):
                reached = [r for done, r in series if done >= q * total] or [series[-1][1]]
                at[f"{int(q * 100)}%"] = round(reached[0], 1)
            out[name] = {"max_mb": round(max(r for _, r in series), 1), "at": at}
        return out


def write_data(path: Path, n: int) -> None:
    with path.open("w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"s{i}", "input": f"q{i}", "reference": f"a{i}"}) + "\n")


def spec_doc(series: str, data: Path, url: str, concurrency: int) -> dict[str, Any]:
    target: dict[str, Any]
    if series == "stored":
        target = {"python": "bench_cluster_target:answer"}
    else:
        target = {"model": {"connector": "openai-compatible", "baseUrl": f"{url}/v1",
                            "model": "stub", "params": {"max_tokens": 8}}}  # fmt: skip
    return {
        "apiVersion": "evals.si/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": f"bench-{series}"},
        "spec": {
            "target": target,
            "dataset": {"path": str(data)},
            "evaluators": [{"ref": "exact-match"}],
            "maxConcurrency": concurrency,
        },
    }


def fresh_schema() -> tuple[str, str]:
    import psycopg

    schema = "evalsi_bench_" + uuid.uuid4().hex[:10]
    with psycopg.connect(PG.replace("+psycopg", ""), autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    return schema, f"{PG}?options=-csearch_path%3D{schema}"


def drop_schema(schema: str) -> None:
    import psycopg

    with psycopg.connect(PG.replace("+psycopg", ""), autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE %s "
            "AND pid <> pg_backend_pid()", (f"%{schema}%",),
        )  # fmt: skip
        admin.execute(f"DROP SCHEMA {schema} CASCADE")


class Cluster:
    """nats-server and two workers; ``switch`` points the workers at a new schema."""

    def __init__(self, tmp: Path, workers: int, pool_concurrency: int) -> None:
        self.tmp = tmp
        self.n = workers
        self.pool_concurrency = pool_concurrency
        nats_bin = shutil.which("nats-server") or "/usr/sbin/nats-server"
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.nats_url = f"nats://127.0.0.1:{port}"
        self.nats = subprocess.Popen(
            [nats_bin, "-js", "-a", "127.0.0.1", "-p", str(port), "-sd", str(tmp / "js")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        time.sleep(0.5)
        self.workers: list[subprocess.Popen[bytes]] = []
        self.config = ClusterConfig(
            nats=self.nats_url,
            pools={"default": PoolConfig(concurrency=pool_concurrency, max_pending=64)},
            shard_size=100,
        )

    def start_workers(self, dsn: str) -> None:
        self.stop_workers()
        cfg = self.tmp / "evalsi.yaml"
        cfg.write_text(
            f"storage: {{postgres: {{dsn: '{dsn}'}}}}\ndataDir: {self.tmp / 'data'}\n"
            f"cluster: {{nats: '{self.nats_url}', shardSize: 100, "
            f"pools: {{default: {{concurrency: {self.pool_concurrency}, maxPending: 64}}}}}}\n"
        )
        env = {**os.environ, "PYTHONPATH": str(self.tmp)}
        self.workers = [
            subprocess.Popen(
                [str(EVALSI), "worker", "--config", str(cfg), "--name", f"bench-{i}"],
                cwd=self.tmp,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for i in range(self.n)
        ]
        time.sleep(1.5)  # connected and pulling

    def stop_workers(self) -> None:
        for w in self.workers:
            w.send_signal(signal.SIGTERM)
        for w in self.workers:
            w.wait(timeout=60)
        self.workers = []

    def close(self) -> None:
        self.stop_workers()
        self.nats.kill()
        self.nats.wait()


def run_embedded(doc: dict[str, Any], tmp: Path) -> tuple[float, Any, float]:
    store = tmp / f"embedded-{uuid.uuid4().hex[:6]}.db"
    cpu0 = time.process_time()
    began = time.perf_counter()
    result = asyncio.run(
        execute_run(run_spec_from_dict(doc), store=store, registry=builtin_registry())
    )
    seconds = time.perf_counter() - began
    cpu = time.process_time() - cpu0
    store.unlink(missing_ok=True)
    return seconds, result, cpu


def run_cluster(
    doc: dict[str, Any], cluster: Cluster, total: int
) -> tuple[float, Any, dict[str, Any], dict[str, float]]:
    schema, dsn = fresh_schema()
    try:
        cluster.start_workers(dsn)
        db = SqlStore.open(dsn)
        counted = {"rows": 0}

        def count(done: int, _infra: int) -> None:
            counted["rows"] = done

        class Counting(ClusterDispatch):
            async def __call__(
                self, run_id: str, tasks: Any, progress: Any, budget: BudgetSpec | None = None
            ) -> Dispatched:
                return await super().__call__(run_id, tasks, count, budget)

        pids = {f"worker-{i}": w.pid for i, w in enumerate(cluster.workers)}
        pids["owner"] = os.getpid()
        watched = {**pids, "nats": cluster.nats.pid, **({"stub": STUB_PID} if STUB_PID else {})}
        busy_before = machine_busy()
        pg_before = sum(cpu_seconds(p) for p in pids_named("postgres"))
        cpu_before = {name: cpu_seconds(pid) for name, pid in watched.items()}
        began = time.perf_counter()
        with Sampler(pids, lambda: counted["rows"]) as sampler:
            result = asyncio.run(
                execute_run(
                    run_spec_from_dict(doc),
                    store=db,
                    registry=builtin_registry(),
                    dispatch=Counting(cluster.config, db),
                )
            )
        seconds = time.perf_counter() - began
        cpu = {name: cpu_seconds(pid) - cpu_before[name] for name, pid in watched.items()}
        cpu["postgres"] = sum(cpu_seconds(p) for p in pids_named("postgres")) - pg_before
        busy_after = machine_busy()
        busy = (busy_after[0] - busy_before[0]) / max(1, busy_after[1] - busy_before[1])
        rows = sum(1 for _ in db.iter_outputs(result.run_id))
        assert rows == total, f"{rows} outputs stored for {total} tasks"
        db.close()
        cluster.stop_workers()
        profile = sampler.profile(total)
        profile["machine_cpu_busy"] = round(busy, 3)  # every core's busy share, whole run
        return seconds, result, profile, cpu
    finally:
        drop_schema(schema)


def figures(result: Any) -> list[tuple[Any, ...]]:
    return [(m.evaluator, m.metric, m.n, m.mean) for m in result.metrics]


def extrapolate(per_task: dict[str, float], workers_now: int) -> dict[str, Any]:
    """Tasks/s with W workers, each on a core of its own, if nothing but CPU limits: the
    workers share the work, the owner, nats-server and PostgreSQL each see every task."""
    worker = sum(v for k, v in per_task.items() if k.startswith("worker"))  # all of them
    limits = {
        "owner (one process)": 1 / per_task["owner"] if per_task["owner"] else float("inf"),
        "nats-server (one core)": 1 / per_task["nats"] if per_task["nats"] else float("inf"),
        "postgres (per core)": 1 / per_task["postgres"] if per_task["postgres"] else float("inf"),
    }
    out = {}
    for w in (2, 8, 32, 128):
        rate = w / worker if worker else float("inf")
        bound = min([("workers", rate), *limits.items()], key=lambda kv: kv[1])
        out[str(w)] = {"tasks_per_s": round(bound[1]), "bound_by": bound[0]}
    # the stub (a stand-in for the model provider) is shown, not projected: it is not ours
    return {"cpu_s_per_task": {k: round(v * 1e6, 1) for k, v in per_task.items()},
            "cpu_unit": "microseconds", "projection": out}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", choices=("stored", "stub", "both"), default="both")
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--skip-embedded", action="store_true", help="the cluster side only")
    parser.add_argument(
        "--shards-at-once", type=int, default=8,
        help="a worker's pool concurrency; the run's maxConcurrency (64) is split among them",
    )  # fmt: skip
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    report: dict[str, Any] = {"tasks": args.tasks, "rounds": args.rounds, "series": {}}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "bench_cluster_target.py").write_text(TARGET)
        sys.path.insert(0, str(tmp))
        data = tmp / "data.jsonl"
        write_data(data, args.tasks)
        stub, url = start_stub(args.latency_ms)
        global STUB_PID
        STUB_PID = stub.pid
        try:
            for series in ("stored", "stub") if args.series == "both" else (args.series,):
                # the same spec both sides: on a worker, the shards it runs at once share its
                # maxConcurrency, so each process has 64 calls out at most
                doc = spec_doc(series, data, url, 64)
                cluster = Cluster(tmp, 2, args.shards_at_once)
                rounds: dict[str, list[float]] = {"embedded": [], "cluster": []}
                extra: dict[str, Any] = {}
                try:
                    for r in range(args.rounds):
                        if not args.skip_embedded:
                            secs, local, _ = run_embedded(doc, tmp)
                            rounds["embedded"].append(args.tasks / secs)
                            print(f"{series} round {r + 1}: embedded {args.tasks / secs:,.0f}/s",
                                  flush=True)  # fmt: skip
                        secs, clustered, memory, cpu = run_cluster(doc, cluster, args.tasks)
                        rounds["cluster"].append(args.tasks / secs)
                        print(f"{series} round {r + 1}: cluster {args.tasks / secs:,.0f}/s",
                              flush=True)  # fmt: skip
                        if not args.skip_embedded:
                            assert figures(clustered) == figures(local), "figures differ"
                        extra = {"memory": memory,
                                 "extrapolation": extrapolate(
                                     {k: v / args.tasks for k, v in cpu.items()}, 2)}  # fmt: skip
                finally:
                    cluster.close()
                entry: dict[str, Any] = {}
                for side, values in rounds.items():
                    if values:
                        low, high = round(min(values)), round(max(values))
                        entry[side] = {"median": round(statistics.median(values)),
                                       "range": [low, high]}  # fmt: skip
                if rounds["embedded"]:
                    entry["ratio"] = round(
                        statistics.median(rounds["cluster"])
                        / statistics.median(rounds["embedded"]),
                        2,
                    )
                entry.update(extra)
                report["series"][series] = entry
                print(json.dumps({series: entry}, indent=2), flush=True)
        finally:
            stub.kill()
    (OUT / "cluster.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
