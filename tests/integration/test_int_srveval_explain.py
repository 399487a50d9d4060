"""What the server explains about a run, over a real loopback server: Evaluate names record ids
that repeat (in the answer and on the stored run), keeps the caller's own warnings ahead of its
own and refuses malformed ones naming the field; CreateRun refuses a dataset of its
datasets_dir that holds no record (400 / INVALID_ARGUMENT naming the path and why) instead of
accepting a run that can only fail."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from connectrpc.code import Code
from connectrpc.errors import ConnectError

from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as run_pb
from evalsi._proto.evalsi.v1alpha1.run_service_connect import RunServiceClientSync
from tests.support.run_server_main import run_doc, run_message
from tests.support.server_state import server_state, serving
from tests.support.stub_llm import StubLLM

EVALUATE = "/v1alpha1/evaluate"
EM = [{"ref": "exact-match"}]


def _record(rid: str, out: str = "x") -> dict[str, Any]:
    return {"id": rid, "output": {"text": out}, "reference": {"text": "x"}}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    tmp = tmp_path_factory.mktemp("explain")
    datasets = tmp / "datasets"
    datasets.mkdir()
    with serving(server_state(tmp, datasets_dir=datasets)) as s:
        yield s.url, datasets


def _call(url: str, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    data = None if body is None else json.dumps(body).encode()
    conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    payload = json.loads(response.read() or b"{}")
    conn.close()
    return response.status, payload


def test_repeated_ids_are_named_in_the_answer_and_on_the_run(server: Any) -> None:
    url, _ = server
    records = [_record("a"), _record("b", "y"), _record("a"), _record("a", "y")]
    status, answer = _call(url, "POST", EVALUATE, {"records": records, "evaluators": EM})
    assert status == 200, answer
    (warning,) = answer["warnings"]
    assert warning["kind"] == "duplicate_ids"
    assert int(warning["count"]) == 2  # int64 travels as a JSON string
    assert warning["examples"] == ["id 'a' at record 3", "id 'a' at record 4"]
    assert len(answer["results"]) == 4  # each still graded under its own position
    status, run = _call(url, "GET", f"/v1alpha1/runs/{answer['runId']}")
    assert status == 200, run
    assert run["run"]["warnings"] == answer["warnings"]

    # Distinct ids: no warning at all.
    status, clean = _call(url, "POST", EVALUATE, {"records": records[:2], "evaluators": EM})
    assert status == 200
    assert clean.get("warnings", []) == [], clean.get("warnings")


def test_the_callers_warnings_come_first_and_replace_the_same_kind(server: Any) -> None:
    url, _ = server
    given = [
        {"kind": "bad_records", "message": "skipped 1 bad record(s)", "count": "1",
         "examples": ["line 2: not JSON"]},
        {"kind": "duplicate_ids", "message": "1 record(s) repeat (first: id 'a' at line 3)",
         "count": "1", "examples": ["id 'a' at line 3"]},
    ]  # fmt: skip
    body = {"records": [_record("a"), _record("a")], "evaluators": EM, "warnings": given}
    status, answer = _call(url, "POST", EVALUATE, body)
    assert status == 200, answer
    assert answer["warnings"] == given  # the server's own "at record 2" gave way


@pytest.mark.parametrize(
    ("warning", "expected"),
    [
        ({"message": "m"}, "warnings[0].kind: empty"),
        ({"kind": "k", "examples": ["e"] * 17}, "warnings[0].examples: 17 given; at most 16"),
        ({"kind": "k", "message": "m" * 4097}, "warnings[0].message: over 4096 characters"),
    ],
)
def test_malformed_caller_warnings_are_refused_naming_the_field(
    server: Any, warning: dict[str, Any], expected: str
) -> None:
    url, _ = server
    body = {"records": [_record("a")], "evaluators": EM, "warnings": [warning]}
    status, answer = _call(url, "POST", EVALUATE, body)
    assert status == 400, answer
    assert expected in answer["message"]


def test_too_many_caller_warnings_are_refused(server: Any) -> None:
    url, _ = server
    body = {"records": [_record("a")], "evaluators": EM, "warnings": [{"kind": "k"}] * 17}
    status, answer = _call(url, "POST", EVALUATE, body)
    assert status == 400
    assert "warnings: 17 given; at most 16" in answer["message"]


@pytest.mark.parametrize(
    ("name", "content", "why"),
    [
        ("empty.jsonl", "", "no records (the file is empty)"),
        ("blank.jsonl", "\n\n", "no records (the file holds only blank lines)"),
        ("header.csv", "id,input\n", "no records (the file has a header row and no data rows)"),
        ("array.json", "[]", "no records (the file holds an empty array)"),
        ("bad.jsonl", "nope\n{\n", "all 2 record(s) were bad and skipped (first: line 1:"),
    ],
)
def test_a_run_over_a_dataset_with_no_record_is_refused(
    server: Any, name: str, content: str, why: str
) -> None:
    url, datasets = server
    (datasets / name).write_text(content)
    client = RunServiceClientSync(url)
    before = len(client.list_runs(run_pb.ListRunsRequest(page_size=1000)).runs)
    with StubLLM() as stub:
        doc = run_doc(stub.openai_url, name)
        for dry_run in (False, True):
            with pytest.raises(ConnectError) as e:
                client.create_run(run_pb.CreateRunRequest(run=run_message(doc), dry_run=dry_run))
            assert e.value.code == Code.INVALID_ARGUMENT
            assert f"spec.dataset.path: {name!r} has no record to run: {why}" in e.value.message
            assert str(datasets) not in e.value.message  # the server's own directory stays its own
        assert stub.calls() == 0
    assert len(client.list_runs(run_pb.ListRunsRequest(page_size=1000)).runs) == before
    client.close()


def test_a_dataset_with_one_good_row_among_bad_ones_is_accepted(server: Any) -> None:
    # Whether bad rows stop the run is the run's to say; CreateRun refuses only "no record".
    url, datasets = server
    (datasets / "one.jsonl").write_text('nope\n{"id": "s0", "input": "q0"}\n')
    client = RunServiceClientSync(url)
    with StubLLM() as stub:
        doc = run_doc(stub.openai_url, "one.jsonl")
        run = client.create_run(run_pb.CreateRunRequest(run=run_message(doc))).run
        last = list(client.watch_run(run_pb.WatchRunRequest(id=run.id)))[-1].run
    assert last.status == "failed"
    assert "one.jsonl:1" in last.error  # the bad row, named by the run
    assert last.exit_code == 2
    client.close()
