"""A run submitted to `evalsi serve` with `cluster:` configured: the server plans it and queues
its tasks, two `evalsi worker` processes call the model (a loopback stub) and grade, and the
run the server reports has the figures of the same spec run embedded. The stub answers each
task exactly once: the server itself never called the target."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as pb
from evalsi._proto.evalsi.v1alpha1.run_service_connect import RunServiceClientSync
from evalsi.cluster import ClusterConfig, PoolConfig
from evalsi.runs import execute_run
from evalsi.specs import run_spec_from_dict
from evalsi.store import SqlStore, shard_counts
from tests.integration.run_support import write_qa
from tests.support.asgi_server import AsgiServer
from tests.support.nats_server import NatsServer
from tests.support.registry import BUILTINS
from tests.support.run_server_main import run_doc, run_message
from tests.support.server_state import server_state
from tests.support.stub_llm import StubLLM

EVALSI = Path(sys.executable).with_name("evalsi")
N = 300


@pytest.fixture
def nats(tmp_path: Path) -> Iterator[NatsServer]:
    with NatsServer(tmp_path / "js") as server:
        yield server


def test_a_served_run_is_executed_by_workers_with_the_embedded_figures(
    tmp_path: Path, pg_url: str, nats: NatsServer
) -> None:
    datasets = tmp_path / "datasets"
    datasets.mkdir()
    write_qa(datasets / "qa.jsonl", N)
    answers = {f"q{i}": (f"a{i}" if i % 4 else "nope") for i in range(N)}
    cluster = ClusterConfig(
        nats=nats.url, pools={"default": PoolConfig(concurrency=2)}, shard_size=40
    )
    config = tmp_path / "evalsi.yaml"
    config.write_text(
        f"storage: {{postgres: {{dsn: '{pg_url}'}}}}\n"
        f"dataDir: {tmp_path}\n"
        f"datasetsDir: {datasets}\n"
        f"cluster: {{nats: '{nats.url}', shardSize: 40, pools: {{default: {{concurrency: 2}}}}}}\n"
    )
    with StubLLM(answers=answers) as stub:
        doc = run_doc(stub.openai_url, "qa.jsonl", concurrency=8)
        command = [str(EVALSI), "worker", "--config", str(config)]
        workers = [
            subprocess.Popen(
                [*command, "--name", f"w{i}"],
                cwd=tmp_path,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={**os.environ},
            )
            for i in range(2)
        ]
        state = server_state(tmp_path, store=pg_url, datasets_dir=datasets, cluster=cluster)
        from evalsi.server._app import build_app

        try:
            with AsgiServer(build_app(state)) as server:
                client = RunServiceClientSync(server.url)
                run_id = client.create_run(pb.CreateRunRequest(run=run_message(doc))).run.id
                final = list(client.watch_run(pb.WatchRunRequest(id=run_id)))[-1].run
                client.close()
                scraped = _scrape_until(
                    server.url, lambda text: sum(_worker_tasks(text).values()) == N
                )
            served_calls = stub.calls("/v1/chat/completions")
            status = subprocess.run(
                [str(EVALSI), "cluster", "status", "--config", str(config), "--format", "json"],
                cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
            )  # fmt: skip
        finally:
            for w in workers:
                w.send_signal(signal.SIGTERM)
            for w in workers:
                assert w.wait(timeout=60) == 0  # drained and stopped cleanly
            state.store.close()
        assert final.status == "done"
        assert served_calls == N  # every task called once, by a worker
        # the cluster on /metrics: the pool drained, each worker's own figures
        assert "evalsi_cluster_up 1.0" in scraped
        assert 'evalsi_cluster_pool_pending{pool="default"} 0.0' in scraped
        assert 'evalsi_cluster_pool_concurrency{pool="default"} 2.0' in scraped
        assert 'evalsi_cluster_workers{pool="default"} 2.0' in scraped
        worker_tasks = _worker_tasks(scraped)
        assert sorted(worker_tasks) == ["w0", "w1"]
        assert sum(worker_tasks.values()) == N
        absolute = {**doc, "spec": {**doc["spec"], "dataset": {"path": str(datasets / "qa.jsonl")}}}
        embedded = asyncio.run(
            execute_run(run_spec_from_dict(absolute), store=tmp_path / "e.db", registry=BUILTINS)
        )
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)
    [pool] = report["pools"]
    assert (pool["name"], pool["pending"], pool["in_flight"]) == ("default", 0, 0)
    assert sorted(w["name"] for w in report["workers"]) == ["w0", "w1"]
    assert report["runs"] == []  # none in progress any more
    assert report["dead"] == 0
    served = {(m.evaluator, m.metric): (m.n, m.mean) for m in final.metrics}
    local = {(m.evaluator, m.metric): (m.n, m.mean) for m in embedded.metrics}
    assert served == local
    assert local[("exact-match", "exact-match")] == (N, 0.75)
    db = SqlStore.open(pg_url)
    try:
        counts = shard_counts(db, run_id)
        assert counts == {"done": (8, N)}  # 300 tasks in shards of 40
    finally:
        db.close()


def _scrape_until(url: str, done: Any, timeout_s: float = 40.0) -> str:
    """``/metrics`` once ``done(text)`` holds (the cluster's status is read every 5 s, the
    workers report every few seconds), or as it is at the deadline."""
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while True:
        with urllib.request.urlopen(f"{url}/metrics", timeout=5) as response:
            text = response.read().decode()
        if done(text) or time.monotonic() > deadline:
            return text
        time.sleep(0.5)


def _worker_tasks(scraped: str) -> dict[str, float]:
    return {
        line.split('worker="')[1].split('"')[0]: float(line.rsplit(" ", 1)[1])
        for line in scraped.splitlines()
        if line.startswith("evalsi_cluster_worker_tasks{")
    }


def _serve(config: Path, cwd: Path) -> subprocess.Popen[bytes]:
    with (cwd / f"{config.stem}.log").open("ab") as log:  # the child keeps its own copy
        return subprocess.Popen(
            [str(EVALSI), "serve", "--config", str(config)], cwd=cwd, stdout=log, stderr=log
        )


def _healthy(url: str, proc: subprocess.Popen[bytes]) -> None:
    import urllib.request

    for _ in range(300):
        assert proc.poll() is None, "the server exited"
        try:
            urllib.request.urlopen(f"{url}/healthz", timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"{url} never answered")


def test_a_replica_killed_mid_run_has_its_run_adopted_by_another(
    tmp_path: Path, pg_url: str, nats: NatsServer
) -> None:
    """Two `evalsi serve` replicas on one store and one queue; the one that took the run is
    killed with SIGKILL mid-run; the other adopts the run within the lease and finishes it:
    every task stored once."""
    from tests.support.server_state import free_port

    n = 400
    datasets = tmp_path / "datasets"
    datasets.mkdir()
    write_qa(datasets / "qa.jsonl", n)
    ports = [free_port(), free_port()]
    configs = []
    for i, port in enumerate(ports):
        path = tmp_path / f"replica{i}.yaml"
        path.write_text(
            f"server: {{port: {port}}}\n"
            f"storage: {{postgres: {{dsn: '{pg_url}'}}}}\n"
            f"dataDir: {tmp_path / f'data{i}'}\n"
            f"datasetsDir: {datasets}\n"
            f"cluster: {{nats: '{nats.url}', shardSize: 20, leaseTtl: 3s,"
            " pools: {default: {concurrency: 2}}}\n"
        )
        configs.append(path)
    answers = {f"q{i}": f"a{i}" for i in range(n)}
    with StubLLM(answers=answers, latency_ms=100) as stub:
        replicas = [_serve(c, tmp_path) for c in configs]
        workers = [
            subprocess.Popen(
                [str(EVALSI), "worker", "--config", str(configs[1]), "--name", f"w{i}"],
                cwd=tmp_path,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for i in range(2)
        ]
        urls = [f"http://127.0.0.1:{p}" for p in ports]
        try:
            for url, proc in zip(urls, replicas, strict=True):
                _healthy(url, proc)
            doc = run_doc(stub.openai_url, "qa.jsonl", concurrency=4)
            first = RunServiceClientSync(urls[0])
            run_id = first.create_run(pb.CreateRunRequest(run=run_message(doc))).run.id
            first.close()
            db = SqlStore.open(pg_url)
            while sum(1 for _ in db.iter_outputs(run_id)) < n // 5:
                time.sleep(0.1)
            replicas[0].send_signal(signal.SIGKILL)  # the run's owner is gone mid-run
            replicas[0].wait()
            killed_at = time.monotonic()
            second = RunServiceClientSync(urls[1])
            final = None
            while time.monotonic() - killed_at < 60:
                final = second.get_run(pb.GetRunRequest(id=run_id)).run
                if final.status in ("done", "failed", "cancelled"):
                    break
                time.sleep(0.2)
            second.close()
            assert final is not None
            assert final.status == "done"
            info = db.get_run(run_id)
            assert sum(1 for _ in db.iter_outputs(run_id)) == n  # every task stored once
            assert info.summary is not None
            [metric] = [m for m in info.summary["metrics"] if m["evaluator"] == "exact-match"]
            assert (metric["n"], metric["mean"]) == (n, 1.0)
            counts = shard_counts(db, run_id)
            assert counts.get("queued") is None  # nothing left behind
            assert counts["cancelled"][0] > 0  # the lost owner's queued shards were skipped
            db.close()
            log = (tmp_path / "replica1.log").read_text()
            assert f"adopted run {run_id}" in log
        finally:
            for proc in [*replicas, *workers]:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            for proc in [*replicas, *workers]:
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
