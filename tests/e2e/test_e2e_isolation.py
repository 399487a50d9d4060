"""Sandbox isolation end to end: an installed third-party evaluator that reports how each
execution was isolated, graded by the ``evalsi`` CLI (``--format json``, a level gate and its
exit code, ``evalsi report``), and a Run created over a real loopback RunService whose Run
message carries the isolation summary; Evaluate's results carry each score's report."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format

from evalsi._proto.evalsi.v1alpha1 import evaluation_service_pb2 as epb
from evalsi._proto.evalsi.v1alpha1 import run_pb2
from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as pb
from evalsi._proto.evalsi.v1alpha1.evaluation_service_connect import (
    EvaluationServiceASGIApplication,
    EvaluationServiceClientSync,
)
from evalsi._proto.evalsi.v1alpha1.run_service_connect import RunServiceClientSync
from evalsi.core import IsolationReport
from evalsi.runs import record_isolation
from evalsi.server._evaluation import EvaluationHandler
from evalsi.wire import record_to_proto, result_from_proto, run_from_proto
from tests.support.asgi_server import AsgiServer
from tests.support.run_server_main import run_app
from tests.support.server_state import server_state, serving
from tests.unit.runs.test_isolation_records import (
    BWRAP,
    BWRAP_PARTIAL,
    FIRECRACKER,
    LANDLOCK,
    records,
    registry,
    row,
)

# The installed plugin: reports the isolation a sample's metadata names, as the code pack will.
PACKAGE = '''\
from evalsi import Score, evaluator


@evaluator(name="acme/iso-exec", version="1.0.0", output="passed")
def iso_exec(record):
    """Passes per metadata.ok and reports metadata.iso as its sandbox isolation."""
    iso = record.metadata.get("iso")
    meta = {"isolation": iso} if iso is not None else {}
    return Score(passed=bool(record.metadata.get("ok", True)), metadata=meta)
'''

ROWS = [
    row(0, BWRAP),
    row(1, LANDLOCK, ok=False),
    row(2, BWRAP_PARTIAL),
    row(3, FIRECRACKER),
]


def _install(site: Path) -> dict[str, str]:
    (site / "isopkg").mkdir(parents=True, exist_ok=True)
    (site / "isopkg" / "__init__.py").write_text(PACKAGE)
    info = site / "isopkg-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: isopkg\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[evalsi.evaluators]\niso-exec = isopkg:iso_exec\n")
    old = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": str(site) + (os.pathsep + old if old else "")}


@pytest.fixture
def plugin(tmp_path: Path, write_jsonl: Any) -> dict[str, str]:
    write_jsonl(tmp_path / "code.jsonl", ROWS)
    return _install(tmp_path / "site")


def test_cli_json_gate_and_report_carry_isolation(
    tmp_path: Path, cli: Any, plugin: dict[str, str]
) -> None:
    proc = cli(
        "eval", "--data", "code.jsonl", "--evaluators", "iso-exec",
        "--gate", "metric('iso-exec').isolation >= confined",
        "--gate", "metric('iso-exec').isolation >= namespaced",
        "--format", "json",
        env=plugin,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr  # a gate failed
    out = json.loads(proc.stdout)
    assert out["isolation"] == [
        {
            "evaluator": "iso-exec",
            "level": "confined",
            "driver": "landlock",
            "drivers": ["bwrap", "landlock", "firecracker"],
            "enforcement": "partial",
            "missing": ["cgroup-pids", "cgroup-memory"],
            "sandboxed": 4,
            "partial": 2,
            "unreported": 0,
        }
    ]
    assert [(g["verdict"], g["reason"]) for g in out["gates"]] == [
        (
            "passed",
            "iso-exec ran at confined (landlock), >= confined; "
            "enforcement partial: missing cgroup-pids, cgroup-memory",
        ),
        (
            "failed",
            "iso-exec ran at confined (landlock), below namespaced; "
            "enforcement partial: missing cgroup-pids, cgroup-memory",
        ),
    ]
    report = cli("report", out["run_id"], "--format", "md", "-o", "r.md", env=plugin)
    assert report.returncode == 0, report.stderr
    md = (tmp_path / "r.md").read_text()
    assert "## Sandbox isolation" in md
    assert "**partial**" in md
    assert "confined (landlock), enforcement partial: missing cgroup-pids" in md


def test_cli_refuses_an_unknown_level_naming_its_column(
    tmp_path: Path, cli: Any, plugin: dict[str, str]
) -> None:
    proc = cli(
        "eval", "--data", "code.jsonl", "--evaluators", "iso-exec",
        "--gate", "metric('iso-exec').isolation >= bogus",
        env=plugin,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "unknown name 'bogus'" in proc.stderr
    assert "at column 33" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_level_gate_without_isolation_is_undecided(
    tmp_path: Path, cli: Any, write_jsonl: Any
) -> None:
    write_jsonl(tmp_path / "plain.jsonl", [row(i) for i in range(3)])
    proc = cli(
        "eval", "--data", "plain.jsonl", "--evaluators", "exact-match",
        "--gate", "metric('exact-match').isolation >= none", "--format", "json",
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr  # undecided, never passed
    out = json.loads(proc.stdout)
    assert out["isolation"] == []
    assert out["gates"][0]["verdict"] == "inconclusive"
    assert "reported sandbox isolation" in out["gates"][0]["reason"]


# -- the server --------------------------------------------------------------------------------


def answer(question: str) -> str:
    return question


def test_run_service_over_loopback_returns_the_isolation_summary(tmp_path: Path) -> None:
    datasets = tmp_path / "datasets"
    datasets.mkdir()
    samples = [{"id": r["id"], "input": r["output"], "metadata": r["metadata"]} for r in ROWS]
    (datasets / "code.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    state = server_state(
        tmp_path, datasets_dir=datasets, registry=registry(), allow_python_targets=True
    )
    doc = {
        "apiVersion": "evals.si/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "iso"},
        "spec": {
            "target": {"python": f"{__name__}:answer"},
            "dataset": {"path": "code.jsonl"},
            "evaluators": [{"ref": "test/iso-exec"}],
            "gates": ["metric('iso-exec').isolation >= namespaced"],
        },
    }
    with AsgiServer(run_app(state)) as server:
        client = RunServiceClientSync(server.url)
        message = json_format.ParseDict(doc, run_pb2.EvalRun())
        created = client.create_run(pb.CreateRunRequest(run=message)).run
        final = list(client.watch_run(pb.WatchRunRequest(id=created.id)))[-1].run
        got = client.get_run(pb.GetRunRequest(id=created.id)).run
        client.close()
    assert final.status == "done", final.error
    result = run_from_proto(got)
    (summary,) = result.isolation
    assert (summary.level, summary.driver, summary.enforcement) == (
        "confined",
        "landlock",
        "partial",
    )
    assert (summary.sandboxed, summary.partial, summary.unreported) == (4, 2, 0)
    assert [g["verdict"] for g in result.gates] == ["failed"]
    assert result.gates[0]["reason"].startswith(
        "iso-exec ran at confined (landlock), below namespaced"
    )
    assert result.exit_code == 1
    state.store.close()


def test_evaluate_over_loopback_returns_each_scores_isolation(tmp_path: Path) -> None:
    state = server_state(tmp_path, registry=registry(), runs=False)
    request = epb.EvaluateRequest(
        records=[record_to_proto(r) for r in records(ROWS)],
        evaluators=[epb.EvaluatorSpec(ref="test/iso-exec")],
    )
    with serving(state, only=(EvaluationServiceASGIApplication, EvaluationHandler)) as server:
        client = EvaluationServiceClientSync(server.url)
        response = client.evaluate(request)
        client.close()
    by_record = {r.record_id: result_from_proto(r) for r in response.results}
    assert by_record["r1"].scores[0].metadata["isolation"] == LANDLOCK
    assert record_isolation([by_record["r1"]]) == IsolationReport(
        "confined", "landlock", {"enforcement": "partial", "missing": "cgroup-pids"}
    )
    assert record_isolation([by_record["r3"]]) == IsolationReport(
        "vm", "firecracker", {"enforcement": "full"}
    )


def test_server_evaluate_gates_on_isolation_and_the_client_sees_it(tmp_path: Path) -> None:
    """The server's Evaluate path judges isolation gates and stores the summary; the client's
    result carries the per-evaluator summary worked out from the results it fetched."""
    import evalsi

    state = server_state(tmp_path, registry=registry(), runs=False)
    with serving(state) as server, evalsi.Client(server.url) as client:
        result = client.evaluate(
            records(ROWS),
            ["test/iso-exec"],
            gates=["metric('iso-exec').isolation >= namespaced"],
        )
        stored = state.store.get_run(result.run_id).summary or {}
    (summary,) = result.isolation
    assert (summary.level, summary.driver, summary.sandboxed) == ("confined", "landlock", 4)
    assert [g["verdict"] for g in result.gates] == ["failed"]
    assert "ran at confined (landlock), below namespaced" in result.gates[0]["reason"]
    assert stored["isolation"][0]["level"] == "confined"
    state.store.close()
