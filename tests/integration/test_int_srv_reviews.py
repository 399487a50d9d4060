"""Review files over the server (ReviewService) on a real server on loopback: the file
ExportReview streams is the one the embedded ``export_review`` writes (over Connect and
gRPC, and as JSON lines on REST); filled in and imported over the server, its reviews are
stored and listed; an item whose evidence changed in the server's store is refused with its
reason next to accepted ones; a file that is not a review file is 400, an unknown run or a run
of another project 404. The CLI does the same with --server."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]
import orjson
import pytest
import sqlalchemy as sa

import evalsi
from evalsi._proto.evalsi.v1alpha1 import review_service_pb2 as pb
from evalsi.cli import main as cli_main
from evalsi.core import NotFoundError, UserError
from evalsi.evidence import export_review, list_reviews
from evalsi.server._app import build_app
from evalsi.server._state import ServerState
from evalsi.store import SqlStore
from tests.integration.test_int_srvgrpc_ports import BothPorts
from tests.support.registry import BUILTINS
from tests.support.server_state import server_state, serving

ROWS = [
    {"id": "q1", "input": "capital of France?", "output": "Paris", "reference": "Paris"},
    {"id": "q2", "input": "capital of Japan?", "output": "Tokyo.", "reference": "Tokyo"},
    {"id": "q3", "input": "2 + 2?", "output": "4", "reference": "4"},
    {"id": "q4", "input": "largest ocean?", "output": "Pacific", "reference": "Atlantic"},
]

Served = tuple[str, str, ServerState]


def _score_run(tmp_path: Path) -> str:
    """A Score run (two evaluators, four records of a dataset file the server can read again)
    stored in ``tmp/s.db``, the store ``server_state(tmp)`` opens."""
    data = tmp_path / "qa.jsonl"
    data.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in ROWS))
    store = SqlStore.open(tmp_path / "s.db")
    try:
        run = evalsi.evaluate(
            str(data),
            ["exact-match", "contains"],
            params={"contains": {"values": ["a"]}},
            store=store,
            registry=BUILTINS,
        )
    finally:
        store.close()
    return run.run_id


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """A server over a store holding a Score run: (url, run id, the server's state)."""
    run_id = _score_run(tmp_path)
    state = server_state(tmp_path)
    with serving(state) as server:
        yield server.url, run_id, state


def _read(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    header, *items = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    return header, items


def _write(path: Path, header: dict[str, Any], items: list[dict[str, Any]]) -> None:
    path.write_bytes(b"".join(orjson.dumps(v) + b"\n" for v in [header, *items]))


def _fill(item: dict[str, Any], approval: str = "approved", verdict: Any = None) -> None:
    item["review"] = {
        "approval": approval,
        "verdict": verdict,
        "rationale": "checked against the source",
        "reviewer": "ann",
    }


def _rest(method: str, url: str, body: Any = None) -> tuple[int, bytes]:
    request = urllib.request.Request(
        url,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json"} if body is not None else {},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as e:
        with e:
            return e.code, e.read()


@pytest.mark.parametrize("protocol", ["connect", "grpc"])
def test_export_is_the_file_the_embedded_export_writes(
    served: Served, tmp_path: Path, protocol: str
) -> None:
    url, run_id, state = served
    remote, local = tmp_path / "remote.jsonl", tmp_path / "local.jsonl"
    with evalsi.Client(url, protocol=protocol) as client:
        count = client.export_review(run_id, remote, evaluators=["exact-match"], only_failing=True)
        assert client.export_review(run_id, tmp_path / "all.jsonl") == 8
        with pytest.raises(UserError, match="never overwritten"):
            client.export_review(run_id, remote)
    assert export_review(state.store, run_id, local, evaluators=["exact-match"], only_failing=True)
    header, items = _read(remote)
    local_header, local_items = _read(local)
    assert count == header["items"] == len(items) == 2  # Tokyo. and Pacific fail exact-match
    assert items == local_items
    del header["created_at"], local_header["created_at"]
    assert header == local_header
    assert [i["record_id"] for i in items] == ["q2", "q4"]


def test_the_native_grpc_port_serves_the_review_service(tmp_path: Path) -> None:
    run_id = _score_run(tmp_path)
    state = server_state(tmp_path)
    with BothPorts(build_app(state), state) as servers, servers.channel(True) as channel:
        export = channel.unary_stream(
            "/evalsi.v1alpha1.ReviewService/ExportReview",
            request_serializer=pb.ExportReviewRequest.SerializeToString,
            response_deserializer=pb.ExportReviewResponse.FromString,
        )
        data = b"".join(m.data for m in export(pb.ExportReviewRequest(id=run_id), timeout=30))
        listing = channel.unary_unary(
            "/evalsi.v1alpha1.ReviewService/ListReviews",
            request_serializer=pb.ListReviewsRequest.SerializeToString,
            response_deserializer=pb.ListReviewsResponse.FromString,
        )
        assert listing(pb.ListReviewsRequest(id=run_id), timeout=30).run_id == run_id
        with pytest.raises(grpc.RpcError) as e:
            listing(pb.ListReviewsRequest(id="no-such-run"), timeout=30)
        assert e.value.code() == grpc.StatusCode.NOT_FOUND
    state.store.close()
    header, *items = [orjson.loads(line) for line in data.splitlines()]
    assert header["run_id"] == run_id
    assert header["items"] == len(items) == 8


def test_a_review_file_round_trips_through_the_server(served: Served, tmp_path: Path) -> None:
    url, run_id, state = served
    out = tmp_path / "review.jsonl"
    with evalsi.Client(url) as client:
        assert client.export_review(run_id, out, evaluators=["exact-match"]) == 4
        header, items = _read(out)
        _fill(items[0])
        _fill(items[1], "rejected", verdict={"passed": True, "note": "a trailing dot is fine"})
        _write(out, header, items)
        result = client.import_review(out)
        listed = client.list_reviews(run_id)
    assert (result.run_id, result.path, result.skipped, result.refused) == (run_id, out, 2, ())
    assert result.exit_code == 0
    assert [(r.record_id, r.approval) for r in result.accepted] == [
        ("q1", "approved"),
        ("q2", "rejected"),
    ]
    stored = list_reviews(state.store, run_id)
    assert listed == stored  # every field, the verdict and the import time included
    assert listed[1].verdict == {"passed": True, "note": "a trailing dot is fine"}
    assert listed[0].verdict is None


def test_an_item_whose_evidence_changed_is_refused_beside_accepted_ones(
    served: Served, tmp_path: Path
) -> None:
    url, run_id, state = served
    out = tmp_path / "review.jsonl"
    with evalsi.Client(url) as client:
        client.export_review(run_id, out, evaluators=["exact-match"])
        header, items = _read(out)
        for item in items:
            _fill(item)
        _write(out, header, items)
        with state.store.engine.begin() as conn:  # q4's verdict flipped to a pass on the server
            conn.execute(
                sa.text(
                    "UPDATE results SET value = 1.0 WHERE seq = 3 AND evaluator = 0 "
                    "AND run = (SELECT pk FROM runs WHERE id = :r)"
                ),
                {"r": run_id},
            )
        result = client.import_review(out)
    assert result.exit_code == 1
    assert [(r.line, r.item, r.reason) for r in result.refused] == [
        (
            5,
            f"{run_id}:3:0:exact-match",
            "the evidence changed since export (automatic): review it again from a new export",
        )
    ]
    assert len(result.accepted) == 3
    assert len(list_reviews(state.store, run_id)) == 3


def test_a_file_that_is_not_a_review_file_is_refused_naming_the_field(
    served: Served, tmp_path: Path
) -> None:
    url, run_id, state = served
    out = tmp_path / "review.jsonl"
    with evalsi.Client(url) as client:
        client.export_review(run_id, out)
        header, items = _read(out)
        _fill(items[0])
        _write(out, header, items)
        out.write_bytes(out.read_bytes().replace(b"\n", b"\nnot json\n", 2))  # lines 2 and 4
        with pytest.raises(UserError, match=r"^file:2: ") as e:
            client.import_review(out)
    assert "evalsi-review-" not in str(e.value)  # the server's temporary path is not shown
    assert list_reviews(state.store, run_id) == []  # nothing of a damaged file is stored
    status, body = _rest(
        "POST",
        f"{url}/v1alpha1/reviews:import",
        {"file": base64.b64encode(b'{"format": "something else"}\n').decode()},
    )
    assert status == 400
    assert json.loads(body)["message"].startswith("file:1: not an evalsi review file")


def test_unknown_runs_and_runs_of_another_project_are_not_found(
    served: Served, tmp_path: Path
) -> None:
    url, run_id, _ = served
    out = tmp_path / "review.jsonl"
    with evalsi.Client(url) as client:
        with pytest.raises(NotFoundError):
            client.export_review("no-such-run", tmp_path / "none.jsonl")
        with pytest.raises(NotFoundError):
            client.export_review(run_id, tmp_path / "none.jsonl", project_id="team-b")
        with pytest.raises(NotFoundError):
            client.list_reviews(run_id, project_id="team-b")
        client.export_review(run_id, out)
        header, items = _read(out)
        _fill(items[0])
        _write(out, header, items)
        with pytest.raises(NotFoundError):
            client.import_review(out, project_id="team-b")
        assert client.list_reviews(run_id) == []
        with pytest.raises(UserError, match="has no evaluator 'no-such'"):
            client.export_review(run_id, tmp_path / "x.jsonl", evaluators=["no-such"])
        graded = client.evaluate(ROWS, ["exact-match"])  # rows sent: no file to read again
        with pytest.raises(UserError, match="no such file"):
            client.export_review(graded.run_id, tmp_path / "x.jsonl")
    assert not (tmp_path / "none.jsonl").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp left
    for path in ("runs/no-such-run/review", "runs/no-such-run/reviews"):
        assert _rest("GET", f"{url}/v1alpha1/{path}")[0] == 404
    assert _rest("GET", f"{url}/v1alpha1/runs/{run_id}/review?limit=-1")[0] == 400


def test_the_rest_routes_answer(served: Served) -> None:
    url, run_id, _ = served
    status, body = _rest("GET", f"{url}/v1alpha1/runs/{run_id}/review?limit=1")
    assert status == 200
    lines = [json.loads(line) for line in body.splitlines() if line.strip()]
    data = b"".join(base64.b64decode(m["data"]) for m in lines)
    header, *items = [orjson.loads(line) for line in data.splitlines()]
    assert header["items"] == len(items) == 1
    _fill(items[0])
    file = b"".join(orjson.dumps(v) + b"\n" for v in [header, *items])
    status, body = _rest(
        "POST", f"{url}/v1alpha1/reviews:import", {"file": base64.b64encode(file).decode()}
    )
    assert status == 200, body
    assert len(json.loads(body)["accepted"]) == 1
    status, body = _rest("GET", f"{url}/v1alpha1/runs/{run_id}/reviews")
    assert status == 200
    listed = json.loads(body)
    assert listed["runId"] == run_id
    assert [r["approval"] for r in listed["reviews"]] == ["approved"]


def test_the_cli_works_against_a_server(
    served: Served, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, run_id, _ = served
    out = tmp_path / "review.jsonl"
    assert cli_main(["review", "export", run_id, "-o", str(out), "--server", url]) == 0
    assert f"Run ID: {run_id}" in capsys.readouterr().out
    header, items = _read(out)
    _fill(items[0])
    _write(out, header, items)
    assert cli_main(["review", "import", str(out), "--server", url, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["accepted"][0]["reviewer"] == "ann"
    assert cli_main(["review", "list", "latest", "--server", url, "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["run_id"] == run_id
    assert [r["record_id"] for r in listed["reviews"]] == ["q1"]
    assert cli_main(["review", "list", run_id, "--server", url, "--store", "x.db"]) == 2
    assert "--store cannot be combined with --server" in capsys.readouterr().err
