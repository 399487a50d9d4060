"""The cluster under failure, with real processes: `evalsi worker` processes on a nats-server of
the test's own and a PostgreSQL store, the run's owner in the test. Each scenario ends with
counts from the database: every task stored once, the figures those of an embedded run.

- kill -9 a worker again and again mid-run (it is restarted each time): nothing lost, nothing
  counted twice;
- nats-server restarted mid-run: nothing lost;
- the workers' PostgreSQL connections killed mid-run: they pause and resume;
- a poison task that kills its worker every time: dead-lettered after maxDeliver deliveries,
  reported as an infra error, the run completes.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalsi.cluster import ClusterConfig, ClusterDispatch, PoolConfig
from evalsi.runs import execute_run
from evalsi.specs import run_spec_from_dict
from evalsi.store import SqlStore, shard_counts
from tests.support.nats_server import NatsServer
from tests.support.registry import BUILTINS

EVALSI = Path(sys.executable).with_name("evalsi")

TARGET = """
import os, time

def answer(question):
    n = int(question.split("-")[1])
    if question == os.environ.get("POISON") and os.environ.get("EVALSI_IN_WORKER"):
        os._exit(9)  # the worker dies on this task, every time
    time.sleep(float(os.environ.get("TASK_SLEEP", "0")))
    return f"answer-{n}" if n % 3 else "wrong"
"""


@pytest.fixture
def rig(tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
    monkeypatch.syspath_prepend(str(tmp_path))  # the run's owner builds its target too
    nats = NatsServer(tmp_path / "js").start()
    rig = Rig(tmp_path, pg_url, nats)
    try:
        yield rig
    finally:
        rig.stop_workers()
        nats.kill()


class Rig:
    def __init__(self, tmp: Path, pg_url: str, nats: NatsServer, max_deliver: int = 4) -> None:
        self.tmp = tmp
        self.pg_url = pg_url
        self.nats = nats
        (tmp / "cluster_target.py").write_text(TARGET)
        self.config_path = tmp / "evalsi.yaml"
        self.config_path.write_text(
            f"storage: {{postgres: {{dsn: '{pg_url}'}}}}\n"
            f"dataDir: {tmp / 'data'}\n"
            "cluster:\n"
            f"  nats: {nats.url}\n"
            "  shardSize: 50\n"
            f"  pools: {{default: {{concurrency: 2, ackWait: 2s, maxDeliver: {max_deliver}}}}}\n"
        )
        self.cluster = ClusterConfig(
            nats=nats.url,
            pools={"default": PoolConfig(concurrency=2, ack_wait_s=2, max_deliver=max_deliver)},
            shard_size=50,
        )
        self.workers: dict[int, subprocess.Popen[bytes]] = {}
        self.env = {**os.environ, "PYTHONPATH": str(tmp), "EVALSI_IN_WORKER": "1"}

    def data(self, n: int) -> Path:
        path = self.tmp / "qa.jsonl"
        rows = [{"id": f"q-{i}", "input": f"q-{i}", "reference": f"answer-{i}"} for i in range(n)]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return path

    def spec(self, n: int) -> dict[str, Any]:
        return {
            "apiVersion": "evals.si/v1alpha1",
            "kind": "EvalRun",
            "metadata": {"name": "failures"},
            "spec": {
                "target": {"python": "cluster_target:answer"},
                "dataset": {"path": str(self.data(n))},
                "evaluators": [{"ref": "exact-match"}],
                "maxConcurrency": 8,
            },
        }

    def start_worker(self, slot: int, **env: str) -> None:
        with (self.tmp / f"worker-{slot}.log").open("ab") as log:  # the child keeps its copy
            self.workers[slot] = subprocess.Popen(
                [str(EVALSI), "worker", "--config", str(self.config_path), "--name", f"w{slot}",
                 "--drain", "5"],
                cwd=self.tmp, env={**self.env, **env}, stdout=log, stderr=log,
            )  # fmt: skip

    def kill_worker(self, slot: int) -> None:
        proc = self.workers.pop(slot)
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def stop_workers(self) -> None:
        for proc in self.workers.values():
            proc.send_signal(signal.SIGTERM)
        for proc in self.workers.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.workers.clear()

    def run(self, doc: dict[str, Any], during: Any = None) -> tuple[Any, SqlStore]:
        """The run owned here, its tasks dispatched; ``during(rig, done)`` in a thread
        meanwhile (``done`` is set when the run ends)."""
        db = SqlStore.open(self.pg_url)
        done = threading.Event()
        helper = None
        if during is not None:
            helper = threading.Thread(target=during, args=(self, done), daemon=True)
            helper.start()
        try:
            result = asyncio.run(
                execute_run(
                    run_spec_from_dict(doc),
                    store=db,
                    registry=BUILTINS,
                    dispatch=ClusterDispatch(self.cluster, db),
                )
            )
        finally:
            done.set()
            if helper is not None:
                helper.join(timeout=60)
        return result, db


def embedded(rig: Rig, doc: dict[str, Any]) -> Any:
    return asyncio.run(
        execute_run(run_spec_from_dict(doc), store=rig.tmp / "e.db", registry=BUILTINS)
    )


def metrics(result: Any) -> list[dict[str, Any]]:
    return [{k: v for k, v in m.to_dict().items() if k != "run_id"} for m in result.metrics]


def assert_complete(result: Any, db: SqlStore, n: int, expected: Any) -> None:
    assert result.status == "done"
    assert result.tasks == {"ok": n}
    assert sum(1 for _ in db.iter_outputs(result.run_id)) == n  # each task stored once
    counts = shard_counts(db, result.run_id)
    assert set(counts) == {"done"}
    assert counts["done"][1] == n
    assert metrics(result) == metrics(expected)


def test_kill_9_a_worker_at_20_points_loses_and_doubles_nothing(rig: Rig) -> None:
    n = 10_000
    doc = rig.spec(n)
    rig.env["TASK_SLEEP"] = "0.002"
    rig.start_worker(0)
    rig.start_worker(1)
    kills = []

    def chaos(rig: Rig, done: threading.Event) -> None:
        rnd = random.Random(23)
        while len(kills) < 20 and not done.wait(rnd.uniform(0.2, 0.7)):
            slot = rnd.choice([0, 1])
            rig.kill_worker(slot)
            kills.append(time.monotonic())
            rig.start_worker(slot)

    result, db = rig.run(doc, chaos)
    try:
        assert len(kills) >= 10  # the run outlived at least half the planned kills
        assert_complete(result, db, n, embedded(rig, doc))
    finally:
        db.close()


def test_a_nats_restart_mid_run_loses_nothing(rig: Rig) -> None:
    n = 2_000
    doc = rig.spec(n)
    rig.env["TASK_SLEEP"] = "0.002"
    rig.start_worker(0)

    def restart(rig: Rig, done: threading.Event) -> None:
        if not done.wait(1.5):
            rig.nats.restart()

    result, db = rig.run(doc, restart)
    try:
        assert_complete(result, db, n, embedded(rig, doc))
    finally:
        db.close()


def test_postgres_connections_killed_mid_run_pause_and_resume_the_workers(rig: Rig) -> None:
    import psycopg

    n = 2_000
    doc = rig.spec(n)
    rig.env["TASK_SLEEP"] = "0.002"
    rig.start_worker(0)
    rig.start_worker(1)
    killed = []

    def cut(rig: Rig, done: threading.Event) -> None:
        schema = rig.pg_url.rsplit("application_name=", 1)[1]
        admin_dsn = rig.pg_url.split("?")[0].replace("postgresql+psycopg://", "postgresql://")
        for _ in range(3):
            if done.wait(1.0):
                return
            with psycopg.connect(admin_dsn, autocommit=True) as admin:
                rows = admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = %s AND pid <> pg_backend_pid() "
                    "AND backend_type = 'client backend'",
                    (schema,),
                ).fetchall()
                killed.append(len(rows))

    result, db = rig.run(doc, cut)
    try:
        assert sum(killed) > 0
        assert_complete(result, db, n, embedded(rig, doc))
        rig.stop_workers()
        logs = "".join(p.read_text() for p in rig.tmp.glob("worker-*.log"))
        assert "store unavailable" in logs  # they saw the outage and paused
        assert "the store is back; resuming" in logs
    finally:
        db.close()


def test_a_poison_task_is_dead_lettered_and_the_run_completes(rig: Rig) -> None:
    n = 200
    doc = rig.spec(n)
    for slot in (0, 1):
        rig.start_worker(slot, POISON="q-77")

    def revive(rig: Rig, done: threading.Event) -> None:
        while not done.wait(0.2):  # a dead worker is replaced, as a supervisor would
            for slot, proc in list(rig.workers.items()):
                if proc.poll() is not None:
                    rig.workers.pop(slot)
                    rig.start_worker(slot, POISON="q-77")

    result, db = rig.run(doc, revive)
    try:
        assert result.status == "done"
        assert result.tasks == {"ok": n - 50, "infra_error": 50}  # the poisoned shard's 50
        counts = shard_counts(db, result.run_id)
        assert counts["dead"] == (1, 50)
        assert counts["done"] == (3, n - 50)
        poisoned = [o for o in db.iter_outputs(result.run_id) if o.status == "infra_error"]
        assert {o.kind for o in poisoned} == {"poison"}
        assert next(m for m in result.metrics if m.evaluator == "exact-match").n == n - 50
    finally:
        db.close()
