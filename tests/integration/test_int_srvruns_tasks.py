"""ListRunTasks: a run's tasks over REST, gRPC and the client are the tasks the store gives
(``iter_tasks``), page after page, and ``evalsi runs show RUN --tasks --server URL`` prints the
JSON the embedded command prints. Bad input is named: an unknown run is NOT_FOUND / 404, a bad
page size or token INVALID_ARGUMENT / 400 with the field."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import orjson
import pytest
from google.protobuf import json_format

import evalsi
from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as pb
from evalsi.cli import main as cli_main
from evalsi.connectors import TargetOutput
from evalsi.core import Content, Step, ToolCall, Trajectory, Usage
from evalsi.runs import iter_tasks
from evalsi.runs._execute import execute_run
from evalsi.specs import DatasetSpec, EvaluatorEntry, RunSpec, TargetSpec
from evalsi.store import SqlStore
from evalsi.wire import task_from_proto
from tests.support.registry import BUILTINS
from tests.support.server_state import server_state, serving

SAMPLES = 13
TRIALS = 2
LIST_TASKS = "/evalsi.v1alpha1.RunService/ListRunTasks"


def agent(question: str) -> TargetOutput:
    """A small agent: a model call, a tool call with nested arguments; sample 5 fails."""
    i = int(question.removeprefix("q"))
    if i == 5:
        raise RuntimeError("the agent fell over")
    steps = [
        Step("llm_call", "stub", input=[{"role": "user", "content": question}], usage=Usage(3, 1)),
        Step(
            "tool_call",
            "lookup",
            tool_call=ToolCall("lookup", {"q": question, "opts": {"z": 1.0, "a": [i]}}, f"c{i}"),
            output={"found": i % 2 == 0, "score": 0.5},
        ),
    ]
    answer = f"a{i}" if i % 3 else "wrong"
    return TargetOutput(
        output=Content.of_text(answer),
        usage=Usage(input_tokens=3, output_tokens=1),
        trajectory=Trajectory(steps, stop_reason="final_answer"),
    )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Path]]:
    """An agent run (13 samples x 2 trials) stored embedded, then served: (url, run id, store)."""
    tmp = tmp_path_factory.mktemp("srvtasks")
    data = tmp / "qa.jsonl"
    data.write_bytes(
        b"".join(
            orjson.dumps(
                {
                    "id": f"s{i}",
                    "input": f"q{i}",
                    "reference": f"a{i}",
                    "metadata": {"category": "abc"[i % 3]},
                }
            )
            + b"\n"
            for i in range(SAMPLES)
        )
    )
    spec = RunSpec(
        name="tasks",
        target=TargetSpec(kind="python", python=f"{__name__}:agent"),
        dataset=DatasetSpec(source=str(data)),
        evaluators=(EvaluatorEntry(ref="exact-match"), EvaluatorEntry(ref="tool-call-accuracy")),
        trials=TRIALS,
    )
    store = tmp / "s.db"
    db = SqlStore.open(store)
    run_id = asyncio.run(execute_run(spec, store=db, registry=BUILTINS)).run_id
    db.close()
    with serving(server_state(tmp, store=str(store))) as server:
        yield server.url, run_id, store


def _stored(store: Path, run_id: str) -> list[dict[str, Any]]:
    db = SqlStore.open(store)
    try:
        return list(iter_tasks(db, run_id, 1000))
    finally:
        db.close()


def _rest(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        with e:
            return e.code, json.loads(e.read())


def test_the_run_has_what_the_tests_below_need(served: tuple[str, str, Path]) -> None:
    _, run_id, store = served
    tasks = _stored(store, run_id)
    assert len(tasks) == SAMPLES * TRIALS
    assert {t["status"] for t in tasks} == {"ok", "target_error"}
    assert any(t.get("trajectory") for t in tasks)


def test_rest_pages_give_the_stored_tasks(served: tuple[str, str, Path]) -> None:
    url, run_id, store = served
    got: list[dict[str, Any]] = []
    token, pages = "", 0
    while True:
        status, body = _rest(f"{url}/v1alpha1/runs/{run_id}/tasks?pageSize=7&pageToken={token}")
        assert status == 200, body
        page = json_format.ParseDict(body, pb.ListRunTasksResponse())
        assert len(page.tasks) <= 7
        got.extend(task_from_proto(t) for t in page.tasks)
        pages += 1
        token = page.next_page_token
        if not token:
            break
    assert pages == 4  # 26 tasks, 7 a page: no empty last page
    assert got == _stored(store, run_id)
    assert body["tasks"][0]["sampleId"].startswith("s")  # proto3 JSON names on REST


def test_grpc_and_the_client_give_the_stored_tasks(served: tuple[str, str, Path]) -> None:
    url, run_id, store = served
    with grpc.insecure_channel(url.removeprefix("http://")) as channel:
        call = channel.unary_unary(
            LIST_TASKS,
            request_serializer=pb.ListRunTasksRequest.SerializeToString,
            response_deserializer=pb.ListRunTasksResponse.FromString,
        )
        answer = call(pb.ListRunTasksRequest(id=run_id, page_size=1000), timeout=30)
    assert answer.next_page_token == ""
    assert [task_from_proto(t) for t in answer.tasks] == _stored(store, run_id)
    with evalsi.Client(url, protocol="grpc") as client:
        pages = list(client.list_run_tasks(run_id, page_size=10))
    assert [len(p) for p in pages] == [10, 10, 6]
    assert [t for p in pages for t in p] == _stored(store, run_id)


@pytest.mark.parametrize("limit", ["5", "20", "100"])
def test_runs_show_tasks_prints_the_same_json_with_server(
    served: tuple[str, str, Path],
    limit: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, run_id, store = served
    monkeypatch.setattr("evalsi.cli._runs.MAX_TASKS_PAGE", 8)  # several pages, read to the limit
    args = ["runs", "show", run_id, "--tasks", "--limit", limit, "--format", "json"]
    assert cli_main([*args, "--store", str(store)]) == 0
    embedded = capsys.readouterr().out
    assert cli_main([*args, "--server", url]) == 0
    remote = capsys.readouterr().out
    tasks = json.loads(remote)["tasks"]
    assert tasks == json.loads(embedded)["tasks"]
    assert len(tasks) == min(int(limit), SAMPLES * TRIALS)
    # As printed: key order (json keeps it), 1.0 apart from 1, everything.
    assert orjson.dumps(tasks) == orjson.dumps(json.loads(embedded)["tasks"])
    # The table view too.
    table = ["runs", "show", run_id, "--tasks", "--limit", limit]
    assert cli_main([*table, "--store", str(store)]) == 0
    embedded = capsys.readouterr().out
    assert cli_main([*table, "--server", url]) == 0
    assert capsys.readouterr().out == embedded


def test_an_unknown_run_is_not_found(served: tuple[str, str, Path]) -> None:
    url, _, _ = served
    status, body = _rest(f"{url}/v1alpha1/runs/nope/tasks")
    assert (status, body["code"]) == (404, "not_found")
    assert "nope" in body["message"]
    with grpc.insecure_channel(url.removeprefix("http://")) as channel:
        call = channel.unary_unary(
            LIST_TASKS,
            request_serializer=pb.ListRunTasksRequest.SerializeToString,
            response_deserializer=pb.ListRunTasksResponse.FromString,
        )
        with pytest.raises(grpc.RpcError) as e:
            call(pb.ListRunTasksRequest(id="nope"), timeout=30)
        assert e.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.RpcError) as e:
            call(pb.ListRunTasksRequest(id="latest", page_size=1001), timeout=30)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "page_size" in str(e.value.details())


@pytest.mark.parametrize(
    ("query", "field"),
    [("pageSize=1001", "page_size"), ("pageSize=-1", "page_size"), ("pageToken=x", "page_token")],
)
def test_a_bad_page_is_400_naming_the_field(
    served: tuple[str, str, Path], query: str, field: str
) -> None:
    url, run_id, _ = served
    status, body = _rest(f"{url}/v1alpha1/runs/{run_id}/tasks?{query}")
    assert (status, body["code"]) == (400, "invalid_argument")
    assert field in body["message"]


def test_categories_over_the_api_are_the_embedded_ones(
    served: tuple[str, str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """GetRunCategories (REST, the client, `runs show --by --server`) gives what the store
    gives locally: the same metrics, intervals and pass^k per category."""
    url, run_id, store = served
    args = ["runs", "show", run_id, "--by", "category", "--format", "json"]
    assert cli_main([*args, "--store", str(store)]) == 0
    embedded = json.loads(capsys.readouterr().out)["categories"]
    assert cli_main([*args, "--server", url]) == 0
    remote = json.loads(capsys.readouterr().out)["categories"]
    assert [c["value"] for c in embedded] == ["a", "b", "c"]
    assert remote == embedded
    em = next(m for m in embedded[0]["metrics"] if m["evaluator"] == "exact-match")
    assert set(em["pass_hat_k"]) == {"1", "2"}
    with evalsi.Client(url) as client:
        listed = client.run_categories(run_id)
    assert [c.to_dict() for c in listed] == embedded
    status, body = _rest(f"{url}/v1alpha1/runs/{run_id}/categories?key=category")
    assert status == 200, body
    assert [c["value"] for c in body["categories"]] == ["a", "b", "c"]
    status, body = _rest(f"{url}/v1alpha1/runs/{run_id}/categories?key=topic")
    assert (status, body.get("categories", [])) == (200, [])  # no sample has it: nothing
    status, body = _rest(f"{url}/v1alpha1/runs/nope/categories")
    assert (status, body["code"]) == (404, "not_found")
