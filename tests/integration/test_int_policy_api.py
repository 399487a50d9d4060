"""PolicyService over a real loopback server: apply (YAML, message, REST), list, get, stats,
delete, errors naming fields, policies surviving a restart, scores and Prometheus metrics from
traces fed to the server's engine, and the store on PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from prometheus_client import CollectorRegistry, generate_latest

from evalsi._proto.evalsi.v1alpha1 import policy_service_pb2 as pb
from evalsi._proto.evalsi.v1alpha1.policy_service_connect import (
    PolicyServiceASGIApplication,
    PolicyServiceClientSync,
)
from evalsi.core import Content, Outcome, Record, Span, SpanView, Trace
from evalsi.policies import PolicyEngine, policy_from_yaml, result_key
from evalsi.server._policies import PolicyHandler
from evalsi.server._policy_metrics import PolicyCollector
from evalsi.server._state import ServerState
from evalsi.store import SqlStore
from tests.support.asgi_server import AsgiServer
from tests.support.registry import BUILTINS
from tests.support.server_state import server_state, serving

POLICY = """\
apiVersion: evals.si/v1alpha1
kind: OnlineEvalPolicy
metadata:
  name: support
  labels: {evals.si/project: team-a}
spec:
  selector: 'resource["service.name"] == "support-agent"'
  cascade:
    - {ref: contains, params: {values: [thanks]}}
    - {ref: length, when: "scores.all(s, s.passed)"}
  window: 10m
"""


def make(i: int, output: str, service: str = "support-agent") -> tuple[Trace, Record]:
    tid = f"{i:032x}"
    root = Span(
        trace_id=tid,
        span_id="1" * 16,
        name="agent",
        end_time_unix_nano=5_000_000,
        resource={"service.name": service},
        view=SpanView(type="agent"),
    )
    record = Record(id=tid, input=Content.of_text("hi"), output=Content.of_text(output))
    return Trace(tid, project="team-a", spans=[root]), record


class Served:
    def __init__(self, state: ServerState, server: AsgiServer, handler: PolicyHandler) -> None:
        self.state, self.server, self.handler = state, server, handler

    def on_server_loop(self, coro: Any) -> Any:
        """Run a coroutine on the server's event loop (where the engine lives), as the OTLP
        ingest will."""
        loop = self.server._loop
        assert loop is not None
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout=30)


def serve(state: ServerState) -> Any:
    handler = PolicyHandler(state)
    return handler, serving(state, [(PolicyServiceASGIApplication, handler)])


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[PolicyServiceClientSync, Served]]:
    state = server_state(tmp_path, runs=False)
    handler, ctx = serve(state)
    with ctx as server, PolicyServiceClientSync(server.url) as client:
        yield client, Served(state, server, handler)


def test_apply_list_get_stats_delete(served: tuple[PolicyServiceClientSync, Served]) -> None:
    client, srv = served
    applied = client.apply_policy(pb.ApplyPolicyRequest(yaml=POLICY))
    assert applied.changed
    policy = applied.policy
    assert (policy.name, policy.project_id) == ("support", "team-a")
    assert policy.run_id.startswith("watch-")
    assert policy.spec_hash.startswith("sha256:")
    assert policy.spec.spec.cascade[1].when == "scores.all(s, s.passed)"
    again = client.apply_policy(pb.ApplyPolicyRequest(yaml=POLICY))
    assert not again.changed
    assert again.policy.run_id == policy.run_id

    for i, text in enumerate(["thanks a lot", "no", "thanks", "x"]):
        srv.on_server_loop(srv.handler.engine.on_trace(*make(i, text)))
    srv.on_server_loop(srv.handler.engine.on_trace(*make(9, "thanks", service="other")))

    listed = client.list_policies(pb.ListPoliciesRequest(project_id="team-a")).policies
    assert [p.name for p in listed] == ["support"]
    assert client.list_policies(pb.ListPoliciesRequest(project_id="else")).policies == []
    got = client.get_policy(pb.GetPolicyRequest(name="support", project_id="team-a")).policy
    assert got.run_id == policy.run_id
    stats = client.get_policy_stats(
        pb.GetPolicyStatsRequest(name="support", project_id="team-a")
    ).stats
    assert (stats.selected, stats.sampled, stats.evaluated) == (4, 4, 4)
    assert dict(stats.skipped) == {"not_selected": 1}
    window = {m.evaluator: m for m in stats.window}
    assert (window["contains"].n, window["contains"].mean) == (4, 0.5)
    assert (window["length"].n, window["length"].skipped) == (2, 2)
    assert window["contains"].ci.method == "wilson"
    assert stats.window_seconds == 600
    # the scores are in the store, under the trace ids
    rows = list(srv.state.store.iter_results(policy.run_id))
    assert len(rows) == 8
    first = next(r for seq, _, r in rows if seq == result_key(f"{0:032x}")[0])
    assert first.record_id == f"{0:032x}"
    assert first.outcome is Outcome.SCORED

    client.delete_policy(pb.DeletePolicyRequest(name="support", project_id="team-a"))
    assert client.list_policies(pb.ListPoliciesRequest()).policies == []
    with pytest.raises(ConnectError) as err:
        client.get_policy_stats(pb.GetPolicyStatsRequest(name="support", project_id="team-a"))
    assert err.value.code == Code.NOT_FOUND


def test_bad_policies_are_invalid_arguments_naming_the_field(
    served: tuple[PolicyServiceClientSync, Served],
) -> None:
    client, _ = served
    cases = {
        POLICY.replace("window: 10m", "window: 10m\n  colour: red"): "policy:12: spec.colour",
        POLICY.replace("ref: length", "ref: no-such"): "policy:10: spec.cascade[1].ref",
        POLICY.replace("s.passed", "s.passed &&"): "policy:10: spec.cascade[1].when: not valid",
        POLICY.replace("window: 10m", "sampling: {rate: 2}"): "spec.sampling.rate: expected",
    }
    for text, expected in cases.items():
        with pytest.raises(ConnectError) as err:
            client.apply_policy(pb.ApplyPolicyRequest(yaml=text))
        assert err.value.code == Code.INVALID_ARGUMENT
        assert expected in err.value.message
    with pytest.raises(ConnectError) as err:
        client.apply_policy(pb.ApplyPolicyRequest())
    assert "set exactly one of policy" in err.value.message
    secret = POLICY + (
        "  judges:\n    default: {connector: openai-compatible, baseUrl: 'http://127.0.0.1:1/v1',"
        " model: m, secretRef: 'file:/etc/passwd'}\n"
    )
    with pytest.raises(ConnectError) as err:
        client.apply_policy(pb.ApplyPolicyRequest(yaml=secret))
    assert "spec.judges.default.secretRef: file: secret references are refused" in (
        err.value.message
    )


def _rest(url: str, method: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def test_the_rest_routes_take_the_message_or_yaml(
    served: tuple[PolicyServiceClientSync, Served],
) -> None:
    _, srv = served
    base = srv.server.url + "/v1alpha1/policies"
    doc = policy_from_yaml(POLICY, registry=BUILTINS).raw
    status, body = _rest(base, "POST", {"policy": doc, "projectId": "ignored-by-label"})
    assert status == 200, body
    assert body["policy"]["projectId"] == "team-a"
    assert body["policy"]["spec"]["spec"]["selector"].startswith("resource[")
    status, body = _rest(base + "/support?projectId=team-a", "GET")
    assert (status, body["policy"]["name"]) == (200, "support")
    status, body = _rest(base + "/support/stats?projectId=team-a", "GET")
    assert status == 200
    assert body["stats"]["name"] == "support"
    status, body = _rest(base, "POST", {"yaml": POLICY.replace("ref: length", "ref: nope")})
    assert status == 400
    assert "spec.cascade[1].ref" in json.dumps(body)
    status, body = _rest(base, "POST", {"policy": {**doc, "extra": 1}})
    assert status == 400
    status, _ = _rest(base + "/support?projectId=team-a", "DELETE")
    assert status == 200
    status, _ = _rest(base + "/support?projectId=team-a", "GET")
    assert status == 404


def test_policies_are_applied_again_after_a_restart(tmp_path: Path) -> None:
    state = server_state(tmp_path, runs=False)
    _, ctx = serve(state)
    with ctx as server, PolicyServiceClientSync(server.url) as client:
        run_id = client.apply_policy(pb.ApplyPolicyRequest(yaml=POLICY)).policy.run_id
    again = server_state(tmp_path, runs=False)
    _, ctx = serve(again)
    with ctx as server, PolicyServiceClientSync(server.url) as client:
        listed = client.list_policies(pb.ListPoliciesRequest()).policies
        assert [(p.name, p.run_id) for p in listed] == [("support", run_id)]
        assert again.store.get_run(run_id).status == "running"


def test_a_restart_does_not_restore_a_secret_the_server_no_longer_allows(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    judged = POLICY + (
        "  judges:\n    default: {connector: openai-compatible, baseUrl: 'http://127.0.0.1:1/v1',"
        " model: m, secretRef: 'env:JUDGE_KEY'}\n"
    )
    state = server_state(tmp_path, runs=False, allowed_env_secrets=("JUDGE_KEY",))
    _, ctx = serve(state)
    with ctx as server, PolicyServiceClientSync(server.url) as client:
        client.apply_policy(pb.ApplyPolicyRequest(yaml=judged))
    narrowed = server_state(tmp_path, runs=False, allowed_env_secrets=())
    _, ctx = serve(narrowed)
    with ctx as server, PolicyServiceClientSync(server.url) as client:
        assert list(client.list_policies(pb.ListPoliciesRequest()).policies) == []
    assert "policy team-a/support not restored: spec.judges.default.secretRef" in caplog.text


def test_prometheus_families_per_policy(tmp_path: Path) -> None:
    async def main() -> bytes:
        engine = PolicyEngine(store=SqlStore.open(tmp_path / "s.db"), registry=BUILTINS)
        await engine.apply(policy_from_yaml(POLICY, registry=BUILTINS))
        for i, text in enumerate(["thanks", "no"]):
            await engine.on_trace(*make(i, text))
        registry = CollectorRegistry()
        registry.register(PolicyCollector(engine))
        return generate_latest(registry)

    text = asyncio.run(main()).decode()
    assert 'evalsi_policy_evaluated_total{policy="support",project="team-a"} 2.0' in text
    assert (
        'evalsi_policy_window_mean{evaluator="contains",metric="contains",policy="support",'
        'project="team-a"} 0.5' in text
    )
    assert 'evalsi_policy_window_n{evaluator="length",metric="length"' in text


def test_results_on_postgres(pg_url: str) -> None:
    async def main() -> tuple[str, SqlStore]:
        store = SqlStore.open(pg_url)
        engine = PolicyEngine(store=store, registry=BUILTINS)
        applied = await engine.apply(policy_from_yaml(POLICY, registry=BUILTINS))
        for i in range(20):
            await engine.on_trace(*make(10**30 + i, "thanks"))  # keys use all 62 bits
        return applied.run_id, store

    run_id, store = asyncio.run(main())
    try:
        assert store.count_results(run_id) == 40
        assert {r.record_id for _, _, r in store.iter_results(run_id)} == {
            f"{10**30 + i:032x}" for i in range(20)
        }
    finally:
        store.close()


def test_the_python_client_calls(served: tuple[PolicyServiceClientSync, Served]) -> None:
    from evalsi.client import AsyncClient
    from evalsi.core import NotFoundError, UserError

    _, srv = served
    doc = policy_from_yaml(POLICY, registry=BUILTINS).raw

    async def main() -> None:
        async with AsyncClient(srv.server.url) as client:
            applied = await client.apply_policy(doc)
            assert (applied.name, applied.project_id, applied.changed) == (
                "support",
                "team-a",
                True,
            )
            assert applied.spec["spec"]["window"] == "10m"
            assert (await client.apply_policy(POLICY)).changed is False  # YAML text, same spec
            [listed] = await client.list_policies(project_id="team-a")
            assert listed.run_id == applied.run_id
            await srv.handler.engine.on_trace(*make(1, "thanks"))
            stats = await client.policy_stats("support", project_id="team-a")
            assert stats.evaluated == 1
            assert [(m.evaluator, m.n) for m in stats.window] == [("contains", 1), ("length", 1)]
            with pytest.raises(UserError, match=r"spec\.cascade\[1\]\.ref"):
                await client.apply_policy(POLICY.replace("ref: length", "ref: nope"))
            await client.delete_policy("support", project_id="team-a")
            with pytest.raises(NotFoundError, match="no policy 'support'"):
                await client.get_policy("support", project_id="team-a")

    srv.on_server_loop(main())
