"""``evalsi.Client`` and ``evalsi.AsyncClient`` against the real server app on loopback
(hypercorn, every protocol), a stub OpenAI-compatible model as the run target, and the embedded
API as the reference: the same calls must give the same metrics, n and intervals."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format

import evalsi
from evalsi._proto.evalsi.v1alpha1 import evaluation_service_pb2 as ev_pb
from evalsi.core import NotFoundError, RunError, UserError
from evalsi.packs import builtin_registry
from evalsi.wire import summary_from_proto
from tests.support.server_state import server_state, serving
from tests.support.stub_llm import StubLLM

ROWS = [
    {"id": f"r{i}", "output": "Paris" if i % 3 else "Lyon", "reference": "paris", "topic": i % 4}
    for i in range(40)
]
PARAMS = {"exact-match": {"ignore_case": True}}


@pytest.fixture(scope="module")
def stub() -> Iterator[StubLLM]:
    with StubLLM(latency_ms=5) as s:
        yield s


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving(server_state(tmp_path_factory.mktemp("server"))) as s:
        yield s.url


def _stats(metrics: list[Any]) -> list[tuple[Any, ...]]:
    """What must agree between embedded and remote: metric, n, mean, interval."""
    return [(m.evaluator, m.metric, m.n, m.mean, m.ci.low, m.ci.high, m.ci.method) for m in metrics]


def write_spec(tmp: Path, base_url: str, n: int = 12, trials: int = 2) -> Path:
    with (tmp / "qa.jsonl").open("w") as f:
        for i in range(n):
            ref = f"q{i}" if i % 3 else "other"
            f.write(json.dumps({"id": f"s{i}", "input": f"q{i}", "reference": ref}) + "\n")
    spec = tmp / "run.yaml"
    spec.write_text(
        f"""apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: client-it}}
spec:
  target:
    model: {{connector: openai-compatible, baseUrl: "{base_url}", model: stub-echo}}
  dataset: {{path: qa.jsonl}}
  trials: {trials}
  maxConcurrency: 4
  evaluators:
    - ref: exact-match
      params: {{ignore_case: true}}
  gates: ["metric('exact-match').n >= 5"]
  seed: 7
"""
    )
    return spec


@pytest.mark.parametrize("protocol", ["connect", "grpc", "grpc-web"])
def test_evaluate_equals_the_embedded_api(server: str, protocol: Any) -> None:
    embedded = evalsi.evaluate(ROWS, ["exact-match"], params=PARAMS, store=":memory:")
    with evalsi.Client(server, protocol=protocol) as client:
        remote = client.evaluate(ROWS, ["exact-match"], params=PARAMS)
    assert _stats(remote.metrics) == _stats(embedded.metrics)
    assert remote.metrics[0].n == 40
    assert remote.records == 40
    # Results need no local store, come back in record order, and match the embedded ones.
    assert [(r.record_id, r.outcome, r.scores) for r in remote.results] == [
        (r.record_id, r.outcome, r.scores) for r in embedded.results
    ]
    assert remote.evaluators[0]["ref"] == "builtin/exact-match@1.0.0"
    assert remote.to_dict()["metrics"] == embedded.to_dict()["metrics"]


def test_clustered_and_bootstrap_intervals_match(server: str) -> None:
    with evalsi.Client(server) as client:
        for options in ({"cluster_by": "topic"}, {"bootstrap": "bca", "seed": 3}):
            embedded = evalsi.evaluate(ROWS, ["exact-match"], store=":memory:", **options)
            remote = client.evaluate(ROWS, ["exact-match"], **options)
            assert _stats(remote.metrics) == _stats(embedded.metrics), options


def test_curl_grpcio_and_client_get_the_same_answer(server: str) -> None:
    request = ev_pb.EvaluateRequest(
        records=[
            {"id": r["id"], "output": {"text": r["output"]}, "reference": {"text": r["reference"]}}
            for r in ROWS
        ],
        evaluators=[{"ref": "exact-match", "params": {"ignore_case": True}}],
    )
    body = json_format.MessageToJson(request).encode()
    answers: dict[str, ev_pb.EvaluateResponse] = {}
    for name, path in (
        ("connect-json", "/evalsi.v1alpha1.EvaluationService/Evaluate"),
        ("rest", "/v1alpha1/evaluate"),
    ):
        http = urllib.request.Request(
            server + path, data=body, headers={"content-type": "application/json"}, method="POST"
        )
        with urllib.request.urlopen(http, timeout=30) as response:
            assert response.status == 200
            answers[name] = json_format.Parse(response.read(), ev_pb.EvaluateResponse())
    with grpc.insecure_channel(server.removeprefix("http://")) as channel:
        call = channel.unary_unary(
            "/evalsi.v1alpha1.EvaluationService/Evaluate",
            request_serializer=ev_pb.EvaluateRequest.SerializeToString,
            response_deserializer=ev_pb.EvaluateResponse.FromString,
        )
        answers["grpcio"] = call(request, timeout=30)
    with evalsi.Client(server) as client:
        mine = client.evaluate(ROWS, ["exact-match"], params=PARAMS)
    expected = _stats(mine.metrics)
    for name, answer in answers.items():
        assert _stats([summary_from_proto(m) for m in answer.metrics]) == expected, name
        assert len(answer.results) == 40, name


def test_a_large_evaluate_is_streamed_under_the_body_cap(server: str) -> None:
    embedded = evalsi.evaluate(ROWS, ["exact-match"], params=PARAMS, store=":memory:")
    with evalsi.Client(server, max_request_bytes=600) as client:
        remote = client.evaluate(ROWS, ["exact-match"], params=PARAMS)
    (m,), (e,) = remote.metrics, embedded.metrics
    assert (m.n, m.mean, m.ci.low, m.ci.high) == (e.n, e.mean, e.ci.low, e.ci.high)
    assert len(remote.results) == 40


def test_evaluate_stream_yields_results_then_metrics(server: str) -> None:
    with evalsi.Client(server) as client:
        updates = list(client.evaluate_stream(iter(ROWS), ["exact-match"], batch_size=7))
    assert sum(len(u.results) for u in updates) == 40
    assert updates[-1].metrics[0].n == 40
    assert len({u.run_id for u in updates}) == 1


def test_gates_are_checked_before_data_and_on_the_metrics(server: str) -> None:
    with evalsi.Client(server) as client:
        r = client.evaluate(
            ROWS, ["exact-match"], params=PARAMS, gates="metric('exact-match').mean >= 0.9"
        )
        assert r.gates[0]["verdict"] == "failed"
        assert r.exit_code == 1
        with pytest.raises(UserError, match="nope"):
            client.evaluate(ROWS, ["exact-match"], gates="metric('nope').mean > 0")
        with pytest.raises(UserError, match="judges= cannot be used with a server"):
            client.evaluate(ROWS, ["exact-match"], judges={"default": {}})


def test_the_server_names_the_run_decides_the_gates_and_selects_compared_metrics(
    server: str, tmp_path: Path
) -> None:
    gates = ["metric('exact-match').mean >= 0.9", "metric('contains').n >= 10"]
    evaluators = ["exact-match", "contains"]
    embedded = evalsi.evaluate(
        ROWS, evaluators, params=PARAMS, gates=gates, name="named", store=str(tmp_path / "l.db")
    )
    with (
        evalsi.Client(server) as client,
        evalsi.Client(server, max_request_bytes=2000) as small,  # sent as a stream
    ):
        remote = client.evaluate(ROWS, evaluators, params=PARAMS, gates=gates, name="named")
        streamed = small.evaluate(ROWS, evaluators, params=PARAMS, gates=gates, name="named")
        info = client.run_info(remote.run_id)
        compared = client.compare_runs(remote.run_id, streamed.run_id, metrics=["contains"])
        with pytest.raises(UserError, match="no metric matches 'nope'"):
            client.compare_runs(remote.run_id, streamed.run_id, metrics=["nope"])
    assert [g["verdict"] for g in embedded.gates] == ["failed", "passed"]
    assert remote.gates == embedded.gates
    assert streamed.gates == embedded.gates
    assert remote.exit_code == streamed.exit_code == embedded.exit_code == 1
    assert (info.name, info.project_id) == ("named", "default")
    assert [(m.evaluator, m.n_paired) for m in compared.metrics] == [("contains", 40)]


def test_run_over_the_api_equals_the_embedded_run(
    server: str, stub: StubLLM, tmp_path: Path
) -> None:
    spec = write_spec(tmp_path, stub.openai_url)
    embedded = evalsi.run(spec, store=str(tmp_path / "local.db"))
    seen: list[tuple[int, int]] = []
    with evalsi.Client(server) as client:
        remote = client.create_run(spec, progress=lambda done, bad: seen.append((done, bad)))
        assert remote.status == "done"
        assert _stats(remote.metrics) == _stats(embedded.metrics)
        assert remote.metric("exact-match").n == 24
        assert remote.trials == 2
        assert remote.tasks == embedded.tasks
        assert remote.gates == embedded.gates
        assert remote.exit_code == embedded.exit_code == 0
        assert len(remote.results) == 24  # read back with ListRunResults
        pages = list(client.list_run_results(remote.run_id, page_size=10))
        assert [len(p) for p in pages[:3]] == [10, 10, 4]
        assert seen
        # Listing, reading, and comparing the run with itself.
        assert client.list_runs(limit=50)[0].id == remote.run_id
        info = client.run_info(remote.run_id[:-2])
        assert (info.id, info.kind, info.status, info.name) == (
            remote.run_id,
            "run",
            "done",
            "client-it",
        )
        assert client.get_run("latest").run_id == remote.run_id
        same = client.compare_runs(remote.run_id, remote.run_id, metrics=["exact-match"])
        assert same.metrics[0].delta == 0.0
        assert same.metrics[0].n_paired == 24
        plan = client.create_run(spec, dry_run=True)
        assert plan.plan is not None
        assert plan.plan["tasks"] == 24


def test_watch_cancel_and_resume(server: str, tmp_path: Path) -> None:
    with StubLLM(latency_ms=300) as slow, evalsi.Client(server) as client:
        spec = write_spec(tmp_path, slow.openai_url, n=40, trials=1)
        started = client.create_run(spec, wait=False)
        assert started.status in ("queued", "running")
        watch = client.watch_run(started.run_id)
        first = next(watch)
        assert first.run_id == started.run_id
        cancelled = client.cancel_run(started.run_id)
        assert cancelled.run_id == started.run_id
        final = list(watch)
        assert (final[-1] if final else first).status in ("cancelled", "running", "queued")
        assert client.get_run(started.run_id).status == "cancelled"
        resumed = client.resume_run(started.run_id, wait=True)
        assert resumed.status == "done"
        assert resumed.metric("exact-match").n == 40


def test_catalog_calls(server: str) -> None:
    local = {ev.manifest.ref.name for ev in builtin_registry()}
    with evalsi.Client(server) as client:
        manifests = client.list_evaluators()
        assert {m.ref.name for m in manifests} == local
        assert {m.pack for m in client.list_evaluators(pack="core")} == {"core"}
        exact = client.get_evaluator("exact-match")
        assert str(exact.ref) == "builtin/exact-match@1.0.0"
        assert exact == builtin_registry().resolve("exact-match").manifest
        packs = client.list_packs()
        assert "exact-match" in next(p for p in packs if p.name == "core").evaluators
        assert "openai-compatible" in {c.name for c in client.list_connectors()}
        with pytest.raises(NotFoundError):
            client.get_evaluator("no-such-evaluator")


def test_dataset_calls_chunk_under_the_body_cap(server: str) -> None:
    rows = [{"id": f"d{i}", "input": "x" * 200, "n": i} for i in range(30)]
    with evalsi.Client(server, max_request_bytes=2000) as client:
        created = client.create_dataset("client-ds", rows)
        assert created.rows == 30
        assert created.version.startswith("sha256:")
        more = client.append_rows("client-ds", [{"id": "d30", "input": "y", "n": 30}])
        assert more.rows == 31
        assert more.version != created.version
        page = client.get_dataset("client-ds", version=created.version, page_size=5)
        assert page.rows == rows[:5]
        assert page.dataset.version == created.version
        versions = client.list_dataset_versions("client-ds")
        assert versions[0].version == more.version
        assert "client-ds" in {d.name for d in client.list_datasets()}
        # The same rows give the same version, however they were chunked.
        with evalsi.Client(server) as one_shot:
            assert one_shot.create_dataset("client-ds", rows).version == created.version


def test_async_client(server: str, stub: StubLLM, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, stub.openai_url, n=6, trials=1)

    async def main() -> tuple[Any, Any, list[str], list[Any]]:
        async with evalsi.AsyncClient(server, protocol="grpc") as client:
            scored = await client.evaluate(ROWS, ["exact-match"], params=PARAMS)
            run = await client.create_run(spec, wait=False)
            statuses = [r.status async for r in client.watch_run(run.run_id)]
            final = await client.get_run(run.run_id)
            manifests = await client.list_evaluators()
            return scored, final, statuses, manifests

    scored, final, statuses, manifests = asyncio.run(main())
    embedded = evalsi.evaluate(ROWS, ["exact-match"], params=PARAMS, store=":memory:")
    assert _stats(scored.metrics) == _stats(embedded.metrics)
    assert len(scored.results) == 40
    assert statuses[-1] == "done"
    assert final.metric("exact-match").n == 6
    assert len(final.results) == 6  # pages read with a sync client
    assert manifests


def test_errors_name_the_cause(server: str, tmp_path: Path) -> None:
    with evalsi.Client(server) as client:
        with pytest.raises(UserError, match=r"unknown evaluator 'nope'") as bad:
            client.evaluate(ROWS, ["nope"])
        assert bad.value.exit_code == 2
        with pytest.raises(NotFoundError):
            client.get_run("no-such-run")
    with evalsi.Client("http://127.0.0.1:9") as down:
        with pytest.raises(RunError, match=r"cannot reach the evalsi server at http://127.0.0.1:9"):
            down.list_evaluators()
        with pytest.raises(RunError, match="cannot reach"):
            list(down.watch_run("x"))


def test_a_run_of_another_project_is_waited_for_read_and_paged_in_that_project(
    server: str, stub: StubLLM, tmp_path: Path
) -> None:
    """Runs are found by id only within their project: the client reads its own run of
    project ``alpha`` (wait, get, results, compare) in ``alpha``, and the default project
    does not see it."""
    spec = write_spec(tmp_path, stub.openai_url, n=6, trials=1)
    with evalsi.Client(server) as client:
        run = client.create_run(spec, project_id="alpha")  # waits: watch + get in alpha
        assert run.status == "done"
        assert len(list(run.results)) == 6  # pages through ListRunResults in alpha
        assert client.get_run(run.run_id, project_id="alpha").run_id == run.run_id
        pages = [
            r for page in client.list_run_results(run.run_id, project_id="alpha") for r in page
        ]
        assert len(pages) == 6
        assert client.compare_runs(run.run_id, run.run_id, project_id="alpha").metrics
        with pytest.raises(NotFoundError):
            client.get_run(run.run_id)


def test_a_file_scored_over_the_server_keeps_its_embedded_dataset_version(
    server: str, tmp_path: Path
) -> None:
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    embedded = evalsi.evaluate(data, ["exact-match"], store=":memory:")
    with evalsi.Client(server) as client:
        remote = client.evaluate(data, ["exact-match"])
        stored = client.get_run(remote.run_id)
    assert embedded.dataset_version is not None
    assert remote.dataset_version == embedded.dataset_version
    assert stored.dataset_version == embedded.dataset_version
