"""An online policy's scores sent to its sinks as traces are graded: a signed webhook receiver
on loopback (batches, retries, a dead receiver counted while grading goes on) and a real MLflow
tracking server, where the scores become assessments on the trace MLflow took in over OTLP from
the real OpenTelemetry SDK — sent again, they are updated, never duplicated."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from typing import Any

import pytest
from aiohttp import web

from evalsi.core import Content, Record, Span, SpanView, SpecError, Trace, UserError
from evalsi.policies import PolicyEngine, _deliver, policy_from_yaml
from tests.integration.test_int_policy_webhooks import Receiver, receiving
from tests.support.registry import BUILTINS

SECRET = "s3cret-for-tests"


def make(trace_id: str, output: str, span_id: str = "1" * 16) -> tuple[Trace, Record]:
    root = Span(trace_id=trace_id, span_id=span_id, end_time_unix_nano=1, view=SpanView("agent"))
    record = Record(
        id=trace_id,
        input=Content.of_text("question"),
        output=Content.of_text(output),
        metadata={"content_captured": True},
    )
    return Trace(trace_id, spans=[root]), record


def policy(sinks: str, name: str = "sunk") -> str:
    return f"""\
apiVersion: evals.si/v1alpha1
kind: OnlineEvalPolicy
metadata: {{name: {name}}}
spec:
  cascade:
    - {{ref: contains, params: {{values: [thanks]}}}}
    - {{ref: length}}
  sinks:
{sinks}"""


class SignedReceiver(Receiver):
    """Records each POST's body, headers and whether its signature checks out."""

    def __init__(self, fail: int = 0, status: int = 503) -> None:
        super().__init__(fail)
        self.status = status
        self.verified: list[bool] = []
        self.deliveries: list[str] = []

    async def hook(self, request: web.Request) -> web.Response:
        self.attempts += 1
        if self.attempts <= self.fail:
            return web.Response(status=self.status)
        body = await request.read()
        mac = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        self.verified.append(request.headers.get("X-Evalsi-Signature") == f"sha256={mac}")
        self.deliveries.append(request.headers.get("X-Evalsi-Delivery", ""))
        self.posts.append(json.loads(body))
        self.got.set()
        return web.Response(status=204)


def _grade(text: str, traces: list[tuple[Trace, Record]]) -> tuple[PolicyEngine, dict[str, Any]]:
    async def main() -> tuple[PolicyEngine, dict[str, Any]]:
        engine = PolicyEngine(registry=BUILTINS)
        await engine.apply(policy_from_yaml(text, registry=BUILTINS))
        for trace, record in traces:
            await engine.on_trace(trace, record)
        await engine.drain()
        stats = engine.stats("sunk").to_dict()
        await engine.close()
        return engine, stats

    return asyncio.run(main())


def test_scores_reach_a_signed_webhook_in_batches_with_stable_ids(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HOOK_SECRET", SECRET)
    monkeypatch.setattr(_deliver, "LINGER_S", 0.2)
    outputs = ["thanks!", "no", "thanks a lot"]
    traces = [make(f"{i + 1:032x}", text) for i, text in enumerate(outputs)]

    async def main() -> tuple[SignedReceiver, dict[str, Any]]:
        receiver = SignedReceiver(fail=1)  # the first POST gets a 503: retried
        async with receiving(receiver) as url:
            sinks = f"    - webhook: {{url: '{url}', secretRef: 'env:HOOK_SECRET'}}\n"
            engine = PolicyEngine(registry=BUILTINS)
            await engine.apply(policy_from_yaml(policy(sinks), registry=BUILTINS))
            for trace, record in traces:
                await engine.on_trace(trace, record)
            await engine.drain()
            stats = engine.stats("sunk").to_dict()
            await engine.close()
        return receiver, stats

    receiver, stats = asyncio.run(main())
    scores = [s for post in receiver.posts for s in post["scores"]]
    assert all(receiver.verified)
    assert receiver.posts
    assert {p["event"] for p in receiver.posts} == {"policy.scores"}
    assert [p["delivery"] for p in receiver.posts] == receiver.deliveries
    by = {(s["trace_id"], s["evaluator"]): s for s in scores}
    assert len(by) == len(scores) == 6  # two evaluators on three traces, each once
    for i, text in enumerate(outputs):
        trace_id = f"{i + 1:032x}"
        contains = by[(trace_id, "contains")]
        assert contains["passed"] is ("thanks" in text)
        assert contains["value"] == (1.0 if "thanks" in text else 0.0)
        assert by[(trace_id, "length")]["value"] == len(text)
        assert contains["span_id"] == "1" * 16
        assert contains["policy"] == "sunk"
        assert contains["outcome"] == "scored"
        assert contains["score_id"] == _deliver.score_id(
            contains["run_id"], trace_id, 0, "contains", "contains"
        )
    assert stats["sink_sent"] == 6
    assert stats["sink_failures"] == 0
    assert stats["evaluated"] == 3


def test_a_dead_sink_is_counted_and_grading_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_deliver, "LINGER_S", 0.05)
    monkeypatch.setattr(_deliver, "BACKOFF_S", 0.01)
    traces = [make(f"{i + 1:032x}", "thanks") for i in range(4)]

    async def main() -> tuple[SignedReceiver, dict[str, Any]]:
        receiver = SignedReceiver(fail=10_000, status=400)  # refused, not retried by the sink
        async with receiving(receiver) as url:
            engine = PolicyEngine(registry=BUILTINS)
            sinks = f"    - webhook: {{url: '{url}'}}\n"
            await engine.apply(policy_from_yaml(policy(sinks), registry=BUILTINS))
            for trace, record in traces:
                await engine.on_trace(trace, record)
            await engine.drain()
            stats = engine.stats("sunk").to_dict()
            await engine.close()
        return receiver, stats

    receiver, stats = asyncio.run(main())
    assert stats["evaluated"] == 4  # grading did not wait for, or stop on, the sink
    assert stats["sink_sent"] == 0
    assert stats["sink_failures"] == 8  # two scores per trace, given up after every try
    assert receiver.attempts == _deliver.ATTEMPTS * (receiver.attempts // _deliver.ATTEMPTS)
    assert receiver.attempts >= _deliver.ATTEMPTS


def test_a_full_queue_counts_what_it_drops(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_deliver, "MAX_QUEUED", 3)

    class Slow:
        kind, target = "webhook", "slow"

        def send(self, scores: Any) -> Any:
            raise RuntimeError("never takes anything")

        def close(self) -> None:
            pass

    async def main() -> tuple[int, int]:
        from evalsi.policies._live import Counts

        counts = Counts()
        delivery = _deliver.ScoreDelivery("p", [Slow()], counts, sleep=asyncio.sleep)
        delivery.queue = asyncio.Queue(3)
        engine_rows = _rows(5)
        delivery.offer(project="p", run_id="r", trace_id="t" * 32, span_id="", rows=engine_rows)
        dropped = counts.sink_failures
        await delivery.close(timeout_s=0.05)
        return dropped, counts.sink_failures

    dropped, after = asyncio.run(main())
    assert dropped == 2  # five scores, room for three
    assert after == 5  # and the three queued were not delivered before close


def _rows(n: int) -> list[Any]:
    """One step's batch of ``n`` scored records, as the engine hands it over."""
    from evalsi.core import ResultBatch, Score

    batch = ResultBatch("length", "length", "length", [f"r{i}" for i in range(n)])
    for i in range(n):
        batch.set_scores(i, [Score(number=float(i))])
    return [(0, 0, batch)]


def test_a_policy_refuses_sinks_that_keep_runs_not_traces() -> None:
    with pytest.raises(SpecError) as e:
        policy_from_yaml(policy("    - s3: {bucket: my-bucket}\n"), registry=BUILTINS)
    assert "spec.sinks[0].s3" in str(e.value)
    assert "evalsi export RUN --to" in str(e.value)


def test_a_missing_secret_fails_the_apply_naming_the_sink(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_SECRET", raising=False)
    text = policy("    - webhook: {url: 'http://127.0.0.1:9/h', secretRef: 'env:NO_SUCH_SECRET'}\n")

    async def main() -> list[Any]:
        engine = PolicyEngine(registry=BUILTINS)
        with pytest.raises(UserError) as e:
            await engine.apply(policy_from_yaml(text, registry=BUILTINS))
        assert "spec.sinks[0] (webhook http://127.0.0.1:9/h)" in e.value.message
        assert "NO_SUCH_SECRET" in e.value.message
        policies = engine.policies()
        await engine.close()
        return policies

    assert asyncio.run(main()) == []  # nothing applied


def test_a_webhook_host_pointing_inward_is_refused_where_it_resolves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server off loopback: a sink URL naming a host that resolves to loopback passes the
    static check when applied (a name), and is refused at each send (where it points)."""
    import socket

    from evalsi.connectors import EgressPolicy

    host = socket.gethostname()
    try:
        inward = socket.gethostbyname(host).startswith("127.")
    except OSError:
        inward = False
    if not inward:
        pytest.skip(f"this machine's name {host!r} does not resolve to loopback")
    monkeypatch.setattr(_deliver, "LINGER_S", 0.05)
    monkeypatch.setattr(_deliver, "BACKOFF_S", 0.01)
    egress = EgressPolicy().serving("0.0.0.0")

    async def main() -> tuple[SignedReceiver, dict[str, Any]]:
        receiver = SignedReceiver()
        async with receiving(receiver) as url:
            url = url.replace("127.0.0.1", host)
            egress.check_url(url, where="spec.sinks[0].webhook.url")  # a name: passes
            engine = PolicyEngine(registry=BUILTINS, egress=egress)
            sinks = f"    - webhook: {{url: '{url}'}}\n"
            await engine.apply(policy_from_yaml(policy(sinks), registry=BUILTINS))
            trace, record = make("a" * 32, "thanks")
            await engine.on_trace(trace, record)
            await engine.drain()
            stats = engine.stats("sunk").to_dict()
            await engine.close()
        return receiver, stats

    receiver, stats = asyncio.run(main())
    assert receiver.attempts == 0  # nothing reached the loopback service
    assert stats["sink_sent"] == 0
    assert stats["sink_failures"] == 2


def test_closing_with_a_slow_sink_waits_a_bounded_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server shutting down while a sink hangs: the engine closes within its sinks' grace
    (``SINK_CLOSE_S``), counting what was not delivered, rather than waiting out every retry
    of every queued batch."""
    import threading
    import time

    import evalsi.sinks
    from evalsi.policies import _engine

    monkeypatch.setattr(_deliver, "LINGER_S", 0.01)
    monkeypatch.setattr(_engine, "SINK_CLOSE_S", 0.5)
    release = threading.Event()

    class Hanging:
        kind, target = "webhook", "hanging"

        def send(self, scores: Any) -> Any:
            release.wait(3.0)  # a receiver that accepts and never answers, up to its timeout
            raise TimeoutError("timed out")

        def close(self) -> None:
            pass

    monkeypatch.setattr(evalsi.sinks, "open_trace_sink", lambda *a, **k: Hanging())
    traces = [make(f"{i + 1:032x}", "thanks") for i in range(3)]

    async def main() -> tuple[float, dict[str, Any]]:
        engine = PolicyEngine(registry=BUILTINS)
        sinks = "    - webhook: {url: 'http://127.0.0.1:9/hook'}\n"
        await engine.apply(policy_from_yaml(policy(sinks), registry=BUILTINS))
        for trace, record in traces:
            await engine.on_trace(trace, record)
        began = time.monotonic()
        try:
            await asyncio.wait_for(engine.close(), 20)
        finally:
            release.set()
        return time.monotonic() - began, engine.stats("sunk").to_dict()

    took, stats = asyncio.run(main())
    assert took < 5  # was: every try of every batch (5 tries, backoff, 3 s each)
    assert stats["evaluated"] == 3
    assert stats["sink_sent"] == 0
    assert stats["sink_failures"] == 6  # two scores on each of three traces, none delivered


# -- MLflow: assessments on the trace MLflow took in over OTLP ------------------------------------
def _send_to_mlflow(mlflow_url: str, experiment_id: str) -> tuple[str, str]:
    """One trace through the real OpenTelemetry SDK to MLflow's OTLP endpoint; its ids."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    exporter = OTLPSpanExporter(
        endpoint=f"{mlflow_url}/v1/traces",
        headers={"x-mlflow-experiment-id": experiment_id},
    )
    provider = TracerProvider(resource=Resource.create({"service.name": "support-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("test").start_as_current_span("agent") as span:
        span.set_attribute("gen_ai.operation.name", "invoke_agent")
        context = span.get_span_context()
    provider.shutdown()
    return f"{context.trace_id:032x}", f"{context.span_id:016x}"


def test_mlflow_gets_assessments_on_its_own_trace_and_a_resend_updates(
    mlflow_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow.tracing.client import TracingClient
    from mlflow.tracking import MlflowClient

    monkeypatch.setattr(_deliver, "LINGER_S", 0.05)
    experiment_id = MlflowClient(mlflow_url).create_experiment("policy-sinks")
    trace_id, span_id = _send_to_mlflow(mlflow_url, experiment_id)
    client = TracingClient(mlflow_url)

    sinks = f"    - mlflow: {{trackingUri: '{mlflow_url}'}}\n"
    _, stats = _grade(policy(sinks), [make(trace_id, "thanks, done", span_id)])
    assert stats["sink_sent"] == 2
    assert stats["sink_failures"] == 0

    def assessments() -> dict[str, Any]:
        info = client.get_trace_info(f"tr-{trace_id}")
        return {a.name: a for a in info.assessments}

    got = assessments()
    assert set(got) == {"contains", "length"}
    assert got["contains"].feedback.value is True  # pass/fail as a boolean
    assert got["length"].feedback.value == len("thanks, done")
    assert got["contains"].span_id == span_id
    assert got["contains"].source.source_id == "evalsi/sunk"
    assert got["contains"].metadata["evalsi.score_id"]

    # the same policy grading the same trace again (a redelivery): nothing new in MLflow
    _grade(policy(sinks), [make(trace_id, "thanks, done", span_id)])
    assert len(client.get_trace_info(f"tr-{trace_id}").assessments) == 2
    # a changed output (same trace, same steps): the scores are updated in place
    _grade(policy(sinks), [make(trace_id, "no", span_id)])
    again = assessments()
    assert len(client.get_trace_info(f"tr-{trace_id}").assessments) == 2
    assert again["contains"].feedback.value is False
    assert again["length"].feedback.value == 2


def test_mlflow_without_the_trace_counts_a_failure(
    mlflow_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_deliver, "LINGER_S", 0.05)
    monkeypatch.setattr(_deliver, "BACKOFF_S", 0.01)
    sinks = f"    - mlflow: {{trackingUri: '{mlflow_url}'}}\n"
    _, stats = _grade(policy(sinks), [make("ab" * 16, "thanks")])
    assert stats["evaluated"] == 1
    assert stats["sink_sent"] == 0
    assert stats["sink_failures"] == 2
