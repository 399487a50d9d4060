"""Evidence over the server: a declared run created through the API registers its plan;
ExportBundle streams the bundle the embedded writer writes, byte for byte, over Connect, gRPC
and REST; the client writes it only inside its own directory; bad requests are named."""

from __future__ import annotations

import filecmp
import json
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

import evalsi
from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as rs
from evalsi._proto.evalsi.v1alpha1.run_service_connect import RunServiceASGIApplication
from evalsi.cli import main as cli_main
from evalsi.core import NotFoundError
from evalsi.evidence import gate_bundle, validate_bundle, write_bundle
from evalsi.store import SqlStore
from tests.integration.test_int_srvfw_fakes import FakeRuns
from tests.support.server_state import server_state, serving

DECLARATION = {
    "system": {"name": "echo", "version": "1"},
    "thresholds": [{"category": "a", "min": 0.5}],
}


def _spec(data: str) -> dict[str, Any]:
    return {
        "apiVersion": "evals.si/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "evidence"},
        "spec": {
            "target": {"python": "tests.integration.test_int_srv_evidence:echo"},
            "dataset": {"path": data},
            "evaluators": [{"ref": "exact-match"}],
            "trials": 2,
            "declaration": DECLARATION,
            "thresholds": [{"category": "b", "min": 0.5, "kind": "comparative"}],
        },
    }


def echo(question: str) -> str:
    return question


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Path]]:
    """A declared run created over the API and finished: (url, run id, tmp)."""
    tmp = tmp_path_factory.mktemp("srvevidence")
    (tmp / "qa.jsonl").write_bytes(
        b"".join(
            orjson.dumps(
                {
                    "id": f"s{i}",
                    "input": f"a{i}",
                    "reference": f"a{i}" if i % 3 else "no",
                    "metadata": {"category": "ab"[i % 2]},
                }
            )
            + b"\n"
            for i in range(8)
        )
    )
    with serving(server_state(tmp, allow_python_targets=True)) as server:
        with evalsi.Client(server.url) as client:
            run = client.create_run(_spec(str(tmp / "qa.jsonl")))  # uploaded by the client
        assert run.status == "done", run
        yield server.url, run.run_id, tmp


def test_the_run_registered_its_plan_before_its_first_task(served: tuple[str, str, Path]) -> None:
    url, run_id, _ = served
    with evalsi.Client(url) as client:
        info = client.run_info(run_id)
    plan = json.loads(info.spec["test_plan"]["text"])
    assert plan["declared"] is True
    assert plan["declaration"]["system"] == {"name": "echo", "version": "1"}
    assert [t["category"] for t in plan["thresholds"]] == ["b", "a"]
    assert len(plan["scenarios"]["selected"]) == 8


@pytest.mark.parametrize("protocol", ["connect", "grpc"])
def test_export_gives_the_bundle_the_embedded_writer_writes(
    served: tuple[str, str, Path], tmp_path: Path, protocol: str
) -> None:
    url, run_id, tmp = served
    with evalsi.Client(url, protocol=protocol) as client:
        written = client.export_bundle(run_id, tmp_path / "remote")
    assert written.run_id == run_id
    assert written.declared
    db = SqlStore.open(tmp / "s.db")
    try:
        write_bundle(db, run_id, tmp_path / "local")
    finally:
        db.close()
    names = sorted(p.name for p in (tmp_path / "local").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "remote").iterdir())
    _, mismatch, errors = filecmp.cmpfiles(
        tmp_path / "local", tmp_path / "remote", names, shallow=False
    )
    assert (mismatch, errors) == ([], [])
    assert validate_bundle(tmp_path / "remote").exit_code == 0
    assert gate_bundle(tmp_path / "remote").exit_code in (0, 1)


def test_rest_streams_the_files_as_json_lines(served: tuple[str, str, Path]) -> None:
    url, run_id, _ = served
    with urllib.request.urlopen(f"{url}/v1alpha1/runs/{run_id}:bundle", timeout=30) as response:
        lines = [json.loads(line) for line in response.read().splitlines() if line.strip()]
    paths = [m["result"]["path"] if "result" in m else m["path"] for m in lines]
    assert paths[-1] == "manifest.json"
    assert paths[0] == "metadata.json"


def test_an_unknown_run_is_404_and_a_bad_id_400(
    served: tuple[str, str, Path], tmp_path: Path
) -> None:
    url, _, _ = served
    for ref, code in (("no-such-run", 404), ("%20", 400)):
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"{url}/v1alpha1/runs/{ref}:bundle", timeout=30)
        assert e.value.code == code
        e.value.close()
    with evalsi.Client(url) as client, pytest.raises(NotFoundError):
        client.export_bundle("no-such-run", tmp_path / "b")
    assert not (tmp_path / "b").exists() or not any((tmp_path / "b").iterdir())


def test_the_cli_writes_a_servers_bundle(
    served: tuple[str, str, Path], tmp_path: Path, capsys: Any
) -> None:
    url, run_id, _ = served
    assert cli_main(["bundle", run_id, "-o", str(tmp_path / "cli"), "--server", url]) == 0
    assert "Bundle written to" in capsys.readouterr().out
    assert cli_main(["bundle", "validate", str(tmp_path / "cli")]) == 0


class HostileRuns(FakeRuns):
    """A server that tries to make the client write outside its directory."""

    def __init__(self, names: list[str]) -> None:
        self.names = names

    async def export_bundle(self, request: Any, ctx: Any, /) -> AsyncIterator[Any]:
        for name in self.names:
            yield rs.ExportBundleResponse(path=name, data=b"{}", size=2, run_id="r")


@pytest.mark.parametrize(
    "names",
    [
        ["../escaped.json"],
        ["/tmp/escaped.json"],
        ["metadata.json", "sub/records.jsonl"],
        ["metadata.json", "config.json", "metadata.json"],
        ["metadata.json"],  # a bundle cut short: it does not validate
    ],
)
def test_the_client_refuses_what_a_hostile_server_sends(tmp_path: Path, names: list[str]) -> None:
    state = server_state(tmp_path, runs=False)
    services = [(RunServiceASGIApplication, HostileRuns(names))]
    out = tmp_path / "out"
    with (
        serving(state, services) as server,
        evalsi.Client(server.url) as client,
        pytest.raises(evalsi.UserError),
    ):
        client.export_bundle("r", out)
    assert not out.exists()
    assert not (tmp_path / "escaped.json").exists()
    assert not Path("/tmp/escaped.json").exists()
