"""RunService requests: bad input gets INVALID_ARGUMENT / NOT_FOUND naming the field, never a
500; listing, result pages and comparisons read back what the store holds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from connectrpc.code import Code
from connectrpc.errors import ConnectError

from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as pb
from evalsi._proto.evalsi.v1alpha1.run_service_connect import RunServiceClientSync
from evalsi.runs import compare_runs
from evalsi.store import SqlStore
from evalsi.wire import comparison_from_proto, result_from_proto, run_from_proto
from tests.integration.run_support import write_qa
from tests.support.asgi_server import AsgiServer
from tests.support.run_server_main import run_app, run_doc, run_message, run_state
from tests.support.stub_llm import StubLLM


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, str, Path]]:
    """One server (SQLite) with two finished runs of 30 samples: A answers 2/3, B all."""
    tmp = tmp_path_factory.mktemp("srvruns")
    datasets = tmp / "datasets"
    datasets.mkdir()
    write_qa(datasets / "qa.jsonl", 30)
    (tmp / "secret.txt").write_text("outside")
    with (
        StubLLM(answers={f"q{i}": f"a{i}" for i in range(30)}) as good,
        StubLLM(answers={f"q{i}": f"a{i}" for i in range(30) if i % 3}) as bad,
    ):
        state = run_state(str(tmp / "srv.db"), datasets)
        with AsgiServer(run_app(state)) as server:
            client = RunServiceClientSync(server.url)
            for stub in (bad, good):
                doc = run_doc(stub.openai_url, "qa.jsonl", name="cmp")
                run_id = client.create_run(pb.CreateRunRequest(run=run_message(doc))).run.id
                list(client.watch_run(pb.WatchRunRequest(id=run_id)))
            yield client, good.openai_url, tmp
            client.close()
        state.store.close()


def _code(call: Any) -> tuple[Code, str]:
    with pytest.raises(ConnectError) as e:
        call()
    return e.value.code, e.value.message


def _create(client: Any, doc: dict[str, Any], **extra: Any) -> Any:
    return client.create_run(pb.CreateRunRequest(run=run_message(doc), **extra))


def test_unknown_run_is_not_found(served: Any) -> None:
    client = served[0]
    for call in (
        lambda: client.get_run(pb.GetRunRequest(id="nope")),
        lambda: list(client.watch_run(pb.WatchRunRequest(id="nope"))),
        lambda: client.cancel_run(pb.CancelRunRequest(id="nope")),
        lambda: client.resume_run(pb.ResumeRunRequest(id="nope")),
        lambda: client.list_run_results(pb.ListRunResultsRequest(id="nope")),
        lambda: client.compare_runs(pb.CompareRunsRequest(baseline="nope", candidate="latest")),
    ):
        code, message = _code(call)
        assert code == Code.NOT_FOUND
        assert "nope" in message


def test_malformed_spec_names_the_field(served: Any) -> None:
    client, url, _ = served
    doc = run_doc(url, "qa.jsonl", name="Not_A_Name")
    code, message = _code(lambda: _create(client, doc))
    assert code == Code.INVALID_ARGUMENT
    assert "metadata.name" in message
    doc = run_doc(url, "qa.jsonl")
    doc["spec"]["evaluators"] = [{"ref": "no-such-evaluator"}]
    code, message = _code(lambda: _create(client, doc))
    assert code == Code.INVALID_ARGUMENT
    assert "no-such-evaluator" in message
    code, message = _code(lambda: client.create_run(pb.CreateRunRequest()))
    assert code == Code.INVALID_ARGUMENT
    assert message.startswith("run:")
    code, message = _code(lambda: client.get_run(pb.GetRunRequest()))
    assert code == Code.INVALID_ARGUMENT
    assert message.startswith("id:")


@pytest.mark.parametrize(
    "path", ["../secret.txt", "/etc/passwd", "hf://owner/name", "missing.jsonl", "."]
)
def test_dataset_path_outside_datasets_dir_is_refused(served: Any, path: str) -> None:
    client, url, _ = served
    code, message = _code(lambda: _create(client, run_doc(url, path)))
    assert code == Code.INVALID_ARGUMENT
    assert "spec.dataset.path" in message


def test_python_target_and_file_secrets_are_refused(served: Any) -> None:
    client, url, _ = served
    doc = run_doc(url, "qa.jsonl")
    doc["spec"]["target"] = {"python": "os:getcwd"}
    code, message = _code(lambda: _create(client, doc))
    assert code == Code.INVALID_ARGUMENT
    assert "Python targets are refused" in message
    assert "target.http" in message
    doc = run_doc(url, "qa.jsonl")
    doc["spec"]["target"]["model"]["secretRef"] = "file:/etc/passwd"
    code, message = _code(lambda: _create(client, doc))
    assert code == Code.INVALID_ARGUMENT
    assert "spec.target.model.secretRef" in message


def test_dry_run_returns_the_plan_and_stores_nothing(served: Any) -> None:
    client, url, _ = served
    before = client.list_runs(pb.ListRunsRequest()).runs
    planned = _create(client, run_doc(url, "qa.jsonl", trials=3), dry_run=True).run
    assert planned.status == "planned"
    assert planned.id == ""
    plan = run_from_proto(planned).plan
    assert plan is not None
    assert plan["tasks"] == 90
    assert plan["samples"] == 30
    assert client.list_runs(pb.ListRunsRequest()).runs == before


def test_list_runs_pages_newest_first(served: Any) -> None:
    client = served[0]
    every = client.list_runs(pb.ListRunsRequest(kind="run")).runs
    assert len(every) == 2
    assert every[0].create_time.ToNanoseconds() >= every[1].create_time.ToNanoseconds()
    assert [r.project_id for r in every] == ["default", "default"]
    first = client.list_runs(pb.ListRunsRequest(page_size=1))
    assert first.next_page_token == every[0].id  # a cursor: the last run of the page
    second = client.list_runs(pb.ListRunsRequest(page_size=1, page_token=first.next_page_token))
    assert [first.runs[0].id, second.runs[0].id] == [r.id for r in every]
    assert second.next_page_token == ""  # no empty page after the last run
    assert client.list_runs(pb.ListRunsRequest(page_size=2)).next_page_token == ""
    assert client.list_runs(pb.ListRunsRequest(status="cancelled")).runs == []
    assert client.list_runs(pb.ListRunsRequest(kind="score")).runs == []
    done = client.list_runs(pb.ListRunsRequest(status="done", kind="run", page_size=1))
    assert [r.id for r in done.runs] == [every[0].id]
    for token in ("xyz", "latest", every[0].id[:4]):  # not a run; not an exact id
        code, message = _code(lambda t=token: client.list_runs(pb.ListRunsRequest(page_token=t)))
        assert code == Code.INVALID_ARGUMENT
        assert message.startswith("page_token:"), message
    code, message = _code(lambda: client.list_runs(pb.ListRunsRequest(status="finished")))
    assert code == Code.INVALID_ARGUMENT
    assert message.startswith("status:"), message


def test_results_pages_hold_every_result_once(served: Any) -> None:
    client, _, tmp = served
    run_id = client.list_runs(pb.ListRunsRequest()).runs[0].id
    got, token = [], ""
    while True:
        page = client.list_run_results(
            pb.ListRunResultsRequest(id=run_id, page_size=7, page_token=token)
        )
        got += [result_from_proto(r) for r in page.results]
        token = page.next_page_token
        if not token:
            break
    store = SqlStore.open(tmp / "srv.db")
    expected = [r for _, _, r in store.iter_results(run_id)]
    store.close()
    assert len(got) == 30
    assert [r.record_id for r in got] == [r.record_id for r in expected]
    assert [r.scores for r in got] == [r.scores for r in expected]


def test_compare_runs_matches_the_embedded_comparison(served: Any) -> None:
    client, _, tmp = served
    new, old = [r.id for r in client.list_runs(pb.ListRunsRequest()).runs]
    answer = client.compare_runs(pb.CompareRunsRequest(baseline=old, candidate=new, seed=3))
    store = SqlStore.open(tmp / "srv.db")
    local = compare_runs(store, old, new, seed=3)
    store.close()
    remote = comparison_from_proto(answer)
    assert remote.run_a == old
    assert remote.run_b == new
    assert remote.level == 0.95
    assert remote.metrics[0].verdict == local.metrics[0].verdict == "improved"
    mine, theirs = remote.metrics[0].to_dict(), local.metrics[0].to_dict()
    assert theirs["mcnemar"] is not None
    assert mine["mcnemar"]["p_value"] == theirs["mcnemar"]["p_value"]
    mine.pop("mcnemar"), theirs.pop("mcnemar")
    assert mine == theirs
    code, message = _code(
        lambda: client.compare_runs(pb.CompareRunsRequest(baseline=old, candidate=new, level=2))
    )
    assert code == Code.INVALID_ARGUMENT
    assert "level" in message


@pytest.mark.parametrize("wanted", [["exact-match"], ["exact-match/exact-match"]])
def test_compare_runs_selects_metrics_as_evalsi_compare_does(
    served: Any, wanted: list[str]
) -> None:
    client = served[0]
    new, old = [r.id for r in client.list_runs(pb.ListRunsRequest()).runs]
    answer = client.compare_runs(pb.CompareRunsRequest(baseline=old, candidate=new, metrics=wanted))
    assert [m.metric for m in answer.metrics] == ["exact-match"]
    for bad, expected in (([""], "metrics:"), (["nope"], "no metric matches 'nope'")):
        request = pb.CompareRunsRequest(baseline=old, candidate=new, metrics=bad)
        code, message = _code(lambda r=request: client.compare_runs(r))
        assert code == Code.INVALID_ARGUMENT
        assert message.startswith(expected), message
