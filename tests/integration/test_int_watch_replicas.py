"""Watch across `evalsi serve` replicas (decision 0019): two real replicas with `cluster:` on one
PostgreSQL store (and their own nats-server), spans sent with the OpenTelemetry SDK's OTLP/HTTP
exporter, a trace's spans split between the replicas. Each trace is stored once, completed once
with all its spans (the policy selects only whole traces), and graded once; a replica holding
the watch lease killed with SIGKILL has its pending traces completed by the other within the
lease TTL. Counts come from the database."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import sqlalchemy as sa
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from evalsi._proto.evalsi.v1alpha1 import policy_service_pb2 as pb
from evalsi._proto.evalsi.v1alpha1.policy_service_connect import PolicyServiceClientSync
from evalsi.store import SqlStore, claim_counts, lease_holder
from tests.support.nats_server import NatsServer
from tests.support.server_state import free_port

EVALSI = Path(sys.executable).with_name("evalsi")
SPANS = 4  # a root and three children per trace
TTL_S = 3.0

POLICY = """\
apiVersion: evals.si/v1alpha1
kind: OnlineEvalPolicy
metadata: {name: whole}
spec:
  selector: 'trace.span_count == 4'
  cascade:
    - {ref: contains, params: {values: [done]}}
"""


@pytest.fixture
def nats(tmp_path: Path) -> Iterator[NatsServer]:
    with NatsServer(tmp_path / "js") as server:
        yield server


class Replicas:
    """Two `evalsi serve` processes with `cluster:` on one store (A with an ingest worker
    process, B ingesting on its event loop: both ways of storing spans upsert claims)."""

    def __init__(self, tmp_path: Path, pg_url: str, nats: NatsServer, grace: str) -> None:
        self.tmp = tmp_path
        self.ports = [free_port(), free_port()]
        self.urls = [f"http://127.0.0.1:{p}" for p in self.ports]
        self.configs = []
        for i, port in enumerate(self.ports):
            path = tmp_path / f"replica{i}.yaml"
            path.write_text(
                f"server: {{port: {port}}}\n"
                f"storage: {{postgres: {{dsn: '{pg_url}'}}}}\n"
                f"dataDir: {tmp_path / f'data{i}'}\n"
                f"cluster: {{nats: '{nats.url}', leaseTtl: {int(TTL_S)}s}}\n"
                f"traces: {{gracePeriod: {grace}, ingestWorkers: {1 - i}}}\n"
            )
            self.configs.append(path)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.db = SqlStore.open(pg_url)

    def __enter__(self) -> Replicas:
        for config in self.configs:
            with (self.tmp / f"{config.stem}.log").open("ab") as log:
                self.procs.append(
                    subprocess.Popen(
                        [str(EVALSI), "serve", "--config", str(config)],
                        cwd=self.tmp,
                        stdout=log,
                        stderr=log,
                        env={**os.environ},
                    )
                )
        for url, proc in zip(self.urls, self.procs, strict=True):
            _healthy(url, proc)
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.db.close()

    def logs(self) -> str:
        return "\n".join(
            (self.tmp / f"{c.stem}.log").read_text(errors="replace")[-3000:] for c in self.configs
        )

    def apply(self) -> str:
        """The policy applied on replica B (the run id); every replica takes it from the
        store, the lease holder included."""
        with PolicyServiceClientSync(self.urls[1]) as client:
            run_id = client.apply_policy(pb.ApplyPolicyRequest(yaml=POLICY)).policy.run_id
        deadline = time.monotonic() + 20
        for url in self.urls:  # both have it (sync every 2 s)
            with PolicyServiceClientSync(url) as client:
                while True:
                    found = client.list_policies(pb.ListPoliciesRequest()).policies
                    if [p.name for p in found] == ["whole"]:
                        break
                    assert time.monotonic() < deadline, self.logs()
                    time.sleep(0.2)
        return run_id

    def holder(self) -> int:
        """The index of the replica holding the watch lease."""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            held = lease_holder(self.db, "watch")
            alive = [p.pid for p in self.procs if p.poll() is None]
            if held is not None and held.pid in alive:
                return [p.pid for p in self.procs].index(held.pid)
            time.sleep(0.1)
        raise AssertionError("no replica took the watch lease\n" + self.logs())

    def stats(self, replica: int) -> pb.PolicyStats:
        with PolicyServiceClientSync(self.urls[replica]) as client:
            request = pb.GetPolicyStatsRequest(name="whole")
            return client.get_policy_stats(request).stats


def _healthy(url: str, proc: subprocess.Popen[bytes]) -> None:
    for _ in range(300):
        assert proc.poll() is None, "the server exited"
        try:
            urllib.request.urlopen(f"{url}/healthz", timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"{url} never answered")


def make_traces(n: int, seed: int) -> list[list[ReadableSpan]]:
    """``n`` traces of SPANS spans each, made by the SDK (a root, three children)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("watch-replicas")
    random.seed(seed)
    for i in range(n):
        with tracer.start_as_current_span("invoke_agent") as root:
            root.set_attribute("gen_ai.agent.name", f"a{i}")
            for step in range(SPANS - 1):
                with tracer.start_as_current_span(f"step {step}"):
                    pass
    by_trace: dict[int, list[ReadableSpan]] = {}
    for span in memory.get_finished_spans():
        assert span.context is not None
        by_trace.setdefault(span.context.trace_id, []).append(span)
    provider.shutdown()
    assert all(len(s) == SPANS for s in by_trace.values())
    return list(by_trace.values())


def export(url: str, spans: Sequence[ReadableSpan]) -> None:
    exporter = OTLPSpanExporter(endpoint=f"{url}/v1/traces", timeout=30)
    try:
        assert exporter.export(spans) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()


def split(traces: list[list[ReadableSpan]], rng: random.Random) -> tuple[list[ReadableSpan], ...]:
    """Each trace's spans shared out between the two replicas, each getting some."""
    a: list[ReadableSpan] = []
    b: list[ReadableSpan] = []
    for spans in traces:
        shuffled = list(spans)
        rng.shuffle(shuffled)
        cut = rng.randint(1, len(shuffled) - 1)
        a += shuffled[:cut]
        b += shuffled[cut:]
    return a, b


def counts(db: SqlStore, run_id: str) -> dict[str, int]:
    with db.engine.connect() as conn:
        one = conn.execute(
            sa.text(
                "SELECT (SELECT COUNT(*) FROM spans), (SELECT COUNT(*) FROM traces), "
                "(SELECT COUNT(*) FROM traces WHERE span_count = :n), "
                "(SELECT COUNT(*) FROM results r JOIN runs u ON r.run = u.pk WHERE u.id = :run), "
                "(SELECT COUNT(DISTINCT (r.seq, r.trial)) FROM results r JOIN runs u "
                "ON r.run = u.pk WHERE u.id = :run)"
            ),
            {"n": SPANS, "run": run_id},
        ).one()
    return dict(zip(("spans", "traces", "whole", "results", "graded"), map(int, one), strict=True))


def wait_graded(db: SqlStore, run_id: str, n: int, within_s: float, replicas: Replicas) -> float:
    start = time.monotonic()
    while time.monotonic() - start < within_s:
        if counts(db, run_id)["results"] >= n and claim_counts(db)["done"] >= n:
            return time.monotonic() - start
        time.sleep(0.1)
    raise AssertionError(f"{counts(db, run_id)} {claim_counts(db)}\n{replicas.logs()}")


def test_a_trace_split_between_replicas_is_stored_once_and_graded_once_whole(
    tmp_path: Path, pg_url: str, nats: NatsServer
) -> None:
    with Replicas(tmp_path, pg_url, nats, grace="1s") as replicas:
        run_id = replicas.apply()
        [spans] = make_traces(1, seed=1)
        root = next(s for s in spans if s.parent is None)
        export(replicas.urls[0], [root, spans[0] if spans[0] is not root else spans[1]])
        export(replicas.urls[1], [s for s in spans if s is not root][1:])
        wait_graded(replicas.db, run_id, 1, 30, replicas)
        time.sleep(1.5)  # a second grading, if there were one, would have come by now
        assert counts(replicas.db, run_id) == {
            "spans": SPANS, "traces": 1, "whole": 1, "results": 1, "graded": 1,
        }  # fmt: skip
        assert claim_counts(replicas.db) == {"open": 0, "claimed": 0, "done": 1}
        stats = replicas.stats(replicas.holder())
        assert (stats.selected, stats.evaluated) == (1, 1)
        assert dict(stats.skipped).get("not_selected", 0) == 0  # never seen partial


def test_two_hundred_traces_across_two_replicas_each_graded_exactly_once(
    tmp_path: Path, pg_url: str, nats: NatsServer
) -> None:
    n = 200
    with Replicas(tmp_path, pg_url, nats, grace="1s") as replicas:
        run_id = replicas.apply()
        traces = make_traces(n, seed=2)
        a, b = split(traces, random.Random(2))
        for start in range(0, max(len(a), len(b)), 100):  # interleaved, as live traffic comes
            if a[start : start + 100]:
                export(replicas.urls[0], a[start : start + 100])
            if b[start : start + 100]:
                export(replicas.urls[1], b[start : start + 100])
        took = wait_graded(replicas.db, run_id, n, 60, replicas)
        time.sleep(1.5)
        assert counts(replicas.db, run_id) == {
            "spans": n * SPANS, "traces": n, "whole": n, "results": n, "graded": n,
        }  # fmt: skip
        holder = replicas.holder()
        stats = replicas.stats(holder)
        assert (stats.selected, stats.evaluated) == (n, n), took
        assert dict(stats.skipped).get("not_selected", 0) == 0


def test_the_lease_holder_killed_with_traces_pending_the_other_grades_them_once(
    tmp_path: Path, pg_url: str, nats: NatsServer
) -> None:
    n = 60
    with Replicas(tmp_path, pg_url, nats, grace="2s") as replicas:
        run_id = replicas.apply()
        holder = replicas.holder()
        other = 1 - holder
        traces = make_traces(n, seed=3)
        a, b = split(traces, random.Random(3))
        export(replicas.urls[0], a)
        export(replicas.urls[1], b)
        # every span stored, none of the traces due yet (2 s grace): the holder dies
        assert claim_counts(replicas.db)["done"] == 0
        replicas.procs[holder].send_signal(signal.SIGKILL)
        replicas.procs[holder].wait()
        killed = time.monotonic()
        took = wait_graded(replicas.db, run_id, n, TTL_S + 20, replicas)
        # the lease lapses TTL_S after the last heartbeat; the traces are then due at once
        assert took < TTL_S + 5, took
        assert replicas.holder() == other
        time.sleep(1.5)
        assert counts(replicas.db, run_id) == {
            "spans": n * SPANS, "traces": n, "whole": n, "results": n, "graded": n,
        }  # fmt: skip
        assert claim_counts(replicas.db) == {"open": 0, "claimed": 0, "done": n}
        stats = replicas.stats(other)
        # the survivor graded every one, each once (the killed one graded none: not due)
        assert (stats.selected, stats.evaluated) == (n, n)
        assert time.monotonic() - killed < 60


def test_the_lease_holder_killed_mid_batch_leaves_no_trace_ungraded_or_scored_twice(
    tmp_path: Path, pg_url: str, nats: NatsServer
) -> None:
    """Killed while it holds claims (traces read, being graded, not yet done): the next holder
    gives them back and completes them; every trace ends with one set of results."""
    n = 800
    with Replicas(tmp_path, pg_url, nats, grace="1s") as replicas:
        run_id = replicas.apply()
        holder = replicas.holder()
        a, b = split(make_traces(n, seed=4), random.Random(4))
        for start in range(0, max(len(a), len(b)), 400):
            export(replicas.urls[0], a[start : start + 400])
            export(replicas.urls[1], b[start : start + 400])
        while claim_counts(replicas.db)["done"] < 40:
            time.sleep(0.01)
        replicas.procs[holder].send_signal(signal.SIGKILL)
        replicas.procs[holder].wait()
        left = claim_counts(replicas.db)
        assert left["claimed"] > 0, left  # died holding claims
        assert left["done"] < n, left
        took = wait_graded(replicas.db, run_id, n, TTL_S + 60, replicas)
        time.sleep(1.5)
        assert counts(replicas.db, run_id) == {
            "spans": n * SPANS, "traces": n, "whole": n, "results": n, "graded": n,
        }, took  # fmt: skip
        assert claim_counts(replicas.db) == {"open": 0, "claimed": 0, "done": n}
