"""The issue's acceptance check, literally: `curl`, a grpcio client whose stub is generated from
our proto at test time (grpc_tools.protoc --grpc_python_out), and `evalsi.Client` get the same
answer for the same Evaluate call on a real server."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc
import pytest
from google.protobuf import json_format

import evalsi
from evalsi._proto.evalsi.v1alpha1 import evaluation_service_pb2 as ev_pb
from evalsi.wire import summary_from_proto
from tests.support.server_state import server_state, serving

ROOT = Path(__file__).resolve().parents[2]
ROWS = [
    {"id": f"r{i}", "output": ["Paris", "Lyon", "paris"][i % 3], "reference": "Paris"}
    for i in range(30)
]
REQUEST = {
    "records": [
        {"id": r["id"], "output": {"text": r["output"]}, "reference": {"text": r["reference"]}}
        for r in ROWS
    ],
    "evaluators": [{"ref": "exact-match"}, {"ref": "contains", "params": {"values": ["a"]}}],
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving(server_state(tmp_path_factory.mktemp("stub-server"), runs=False)) as s:
        yield s.url


def _generated_stub_module(tmp: Path) -> ModuleType:
    """``evaluation_service_pb2_grpc`` generated from proto/, importing our message modules."""
    from gen_proto import googleapis_include  # scripts/ is on sys.path below

    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{ROOT / 'proto'}",
            f"-I{googleapis_include()}",
            f"--grpc_python_out={tmp}",
            "evalsi/v1alpha1/evaluation_service.proto",
        ],
        check=True,
        cwd=ROOT / "proto",
    )
    path = tmp / "evalsi" / "v1alpha1" / "evaluation_service_pb2_grpc.py"
    text = re.sub(
        r"^from evalsi\.v1alpha1 import", "from evalsi._proto.evalsi.v1alpha1 import",
        path.read_text(), flags=re.MULTILINE,
    )  # fmt: skip
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("generated_evaluation_grpc", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _stats(metrics: list[Any]) -> list[tuple[Any, ...]]:
    return [(m.evaluator, m.metric, m.n, m.mean, m.ci.low, m.ci.high, m.ci.method) for m in metrics]


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_a_generated_grpcio_stub_and_the_client_agree(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    stubs = _generated_stub_module(tmp_path)

    url = server + "/v1alpha1/evaluate"
    curl = subprocess.run(
        ["curl", "-sS", "--fail-with-body", url, "-H", "Content-Type: application/json",
         "-d", json.dumps(REQUEST)],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    by_curl = json_format.Parse(curl.stdout, ev_pb.EvaluateResponse())

    with grpc.insecure_channel(server.removeprefix("http://")) as channel:
        stub = stubs.EvaluationServiceStub(channel)
        by_grpc = stub.Evaluate(json_format.ParseDict(REQUEST, ev_pb.EvaluateRequest()), timeout=30)

    with evalsi.Client(server) as client:
        by_client = client.evaluate(
            ROWS, ["exact-match", "contains"], params={"contains": {"values": ["a"]}}
        )

    expected = _stats(by_client.metrics)
    assert [m[:2] for m in expected] == [("exact-match", "exact-match"), ("contains", "contains")]
    assert expected[0][2:4] == (30, pytest.approx(10 / 30))  # only 'Paris' matches exactly
    for name, answer in (("curl", by_curl), ("grpcio stub", by_grpc)):
        assert _stats([summary_from_proto(m) for m in answer.metrics]) == expected, name
        assert len(answer.results) == 60, name
    # The same records hash to the same version whichever protocol carried them. (The client
    # reports the hash of the rows it read locally, so it is not compared here.)
    assert by_curl.dataset_version == by_grpc.dataset_version
