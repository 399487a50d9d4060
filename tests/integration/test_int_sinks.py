"""Results sinks against real services on loopback: an MLflow tracking server (full ``mlflow``
in ``.tools/mlflow``, as .ci/run installs it), a real S3 API (``moto`` in server mode), a webhook
receiver that fails before it accepts, and Weights & Biases offline. Each export is checked
against the store, and exported again to show it updates rather than duplicates."""

from __future__ import annotations

import hashlib
import hmac
import http.server
import io
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from evalsi.packs import builtin_registry
from evalsi.runs import execute_run, export_run
from evalsi.specs import SinkSpec, run_spec_from_dict
from evalsi.store import SqlStore
from tests.support.server_state import free_port

ROOT = Path(__file__).resolve().parents[2]
N = 30
TARGET = """
def answer(input):
    n = int(input.split("-")[1])
    return input.upper() if n % 3 else "?"
"""


@pytest.fixture
def stored_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[SqlStore, str]:
    """A finished Run of N samples (a third wrong), in ``tmp_path/s.db``."""
    (tmp_path / "sink_target.py").write_text(TARGET)
    monkeypatch.syspath_prepend(str(tmp_path))
    rows = [{"id": f"s{i}", "input": f"q-{i}", "reference": f"Q-{i}"} for i in range(N)]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = run_spec_from_dict(
        {
            "apiVersion": "evals.si/v1alpha1",
            "kind": "EvalRun",
            "metadata": {"name": "sinks"},
            "spec": {
                "target": {"python": "sink_target:answer"},
                "dataset": {"path": "rows.jsonl"},
                "evaluators": [{"ref": "exact-match"}, {"ref": "contains"}],
                "gates": ["metric('exact-match').mean >= 0.9"],
            },
        },
        base_dir=tmp_path,
    )
    db = SqlStore.open(str(tmp_path / "s.db"))
    import asyncio

    result = asyncio.run(execute_run(spec, store=db, registry=builtin_registry()))
    return db, result.run_id


def _stored_rows(db: SqlStore, run_id: str) -> dict[tuple[str, str], float]:
    out = {}
    for _, _, r in db.iter_results(run_id):
        for s in r.scores:
            out[(r.record_id, r.evaluator)] = float(s.passed) if s.passed is not None else s.number
    return out


def test_s3_gets_parquet_rows_and_the_summary_at_fixed_keys(
    stored_run: tuple[SqlStore, str], s3_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3
    import pyarrow.parquet as pq

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    db, run_id = stored_run
    s3 = boto3.client("s3", endpoint_url=s3_url, region_name="us-east-1")
    s3.create_bucket(Bucket="evals")
    sink = SinkSpec("s3", {"bucket": "evals", "prefix": "nightly", "endpointUrl": s3_url,
                           "region": "us-east-1"})  # fmt: skip
    first = export_run(db, run_id, [sink])[0]
    assert first.receipt is not None, first.error
    assert first.receipt["rows"] == 2 * N
    again = export_run(db, run_id, [sink])[0]
    assert again.receipt == first.receipt  # the same keys, the same summary
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="evals")["Contents"])
    assert keys == [f"nightly/{run_id}/results.parquet", f"nightly/{run_id}/summary.json"]
    body = s3.get_object(Bucket="evals", Key=keys[0])["Body"].read()
    table = pq.read_table(io.BytesIO(body)).to_pylist()
    got = {(r["record_id"], r["evaluator"]): r["value"] for r in table}
    assert got == _stored_rows(db, run_id)
    assert {r["run_id"] for r in table} == {run_id}
    summary = json.loads(s3.get_object(Bucket="evals", Key=keys[1])["Body"].read())
    assert summary["summary"]["metrics"] == db.get_run(run_id).summary["metrics"]
    assert summary["run"]["run_id"] == run_id


def test_mlflow_gets_one_run_with_metrics_intervals_gates_and_the_table(
    stored_run: tuple[SqlStore, str], mlflow_url: str, tmp_path: Path
) -> None:
    from mlflow.tracking import MlflowClient

    db, run_id = stored_run
    sink = SinkSpec("mlflow", {"trackingUri": mlflow_url, "experiment": "sinks-test"})
    first = export_run(db, run_id, [sink])[0]
    assert first.receipt is not None, first.error
    second = export_run(db, run_id, [sink])[0]
    assert second.receipt is not None
    assert second.receipt["remote"]["run_id"] == first.receipt["remote"]["run_id"]
    client = MlflowClient(tracking_uri=mlflow_url)
    experiment = client.get_experiment_by_name("sinks-test")
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 1  # exported twice: no duplicate
    run = runs[0]
    stored = {m["metric"]: m for m in db.get_run(run_id).summary["metrics"]}
    assert run.data.metrics["exact-match"] == pytest.approx(stored["exact-match"]["mean"])
    assert float(run.data.params["exact-match.ci_low"]) == pytest.approx(
        stored["exact-match"]["ci"][0]
    )
    assert run.data.params["exact-match.n"] == str(N)
    assert run.data.tags["evalsi.run_id"] == run_id
    assert run.data.tags["evalsi.gate.0"].startswith("failed: ")
    assert run.info.status == "FINISHED"
    path = client.download_artifacts(run.info.run_id, "evalsi/results.json", str(tmp_path))
    table = json.loads(Path(path).read_text())
    assert table["columns"][:3] == ["run_id", "record_id", "trial"]
    rows = {(r[1], r[3]): r[6] for r in table["data"]}
    assert rows == _stored_rows(db, run_id)


class _Hook(http.server.BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[dict[str, str], bytes]]] = []
    answers: ClassVar[list[int]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((dict(self.headers), body))
        code = self.answers.pop(0) if self.answers else 200
        self.send_response(code)
        if code == 302:
            self.send_header("Location", "http://169.254.169.254/latest/meta-data")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def hook() -> Iterator[tuple[str, type[_Hook]]]:
    _Hook.received, _Hook.answers = [], []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", _Hook
    finally:
        server.shutdown()
        server.server_close()


def test_the_webhook_is_signed_retried_and_keeps_its_delivery_id(
    stored_run: tuple[SqlStore, str], hook: tuple[str, type[_Hook]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalsi.sinks import _webhook

    monkeypatch.setattr(_webhook.time, "sleep", lambda s: None)
    monkeypatch.setenv("HOOK_SECRET", "s3cret")
    db, run_id = stored_run
    url, handler = hook
    handler.answers = [503, 429]
    sink = SinkSpec("webhook", {"url": url, "secretRef": "env:HOOK_SECRET"})
    first = export_run(db, run_id, [sink])[0]
    assert first.receipt is not None, first.error
    assert len(handler.received) == 3  # 503, 429, then accepted
    deliveries = {h["X-Evalsi-Delivery"] for h, _ in handler.received}
    assert len(deliveries) == 1
    headers, body = handler.received[-1]
    mac = hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert headers["X-Evalsi-Signature"] == f"sha256={mac}"
    assert _webhook.verify("s3cret", body, headers["X-Evalsi-Signature"])
    assert not _webhook.verify("s3cret", body + b" ", headers["X-Evalsi-Signature"])
    doc = json.loads(body)
    assert doc["event"] == "run.finished"
    assert doc["run"]["run_id"] == run_id
    assert doc["summary"]["metrics"] == db.get_run(run_id).summary["metrics"]
    export_run(db, run_id, [sink])
    assert handler.received[-1][0]["X-Evalsi-Delivery"] in deliveries  # a re-export: same id

    handler.received.clear()
    handler.answers = [400]
    refused = export_run(db, run_id, [sink])[0]
    assert refused.receipt is None
    assert "HTTP 400" in refused.error
    assert len(handler.received) == 1  # a client error is not retried
    handler.answers = [302]
    moved = export_run(db, run_id, [sink])[0]
    assert moved.receipt is None
    assert "HTTP 302" in moved.error


def test_wandb_offline_resumes_the_same_run(
    stored_run: tuple[SqlStore, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WANDB_SILENT", "true")
    db, run_id = stored_run
    sink = SinkSpec("wandb", {"project": "evalsi-test", "dir": str(tmp_path / "wb")})
    first = export_run(db, run_id, [sink])[0]
    assert first.receipt is not None, first.error
    assert first.receipt["rows"] == 2 * N
    second = export_run(db, run_id, [sink])[0]
    assert second.receipt is not None
    assert second.receipt["remote"]["run_id"] == first.receipt["remote"]["run_id"]
    runs = list((tmp_path / "wb" / "wandb").glob("offline-run-*"))
    assert runs
    assert all(first.receipt["remote"]["run_id"] in p.name for p in runs)


def test_a_failing_sink_is_reported_and_the_others_still_get_the_run(
    stored_run: tuple[SqlStore, str], hook: tuple[str, type[_Hook]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalsi.sinks import _webhook

    monkeypatch.setattr(_webhook.time, "sleep", lambda s: None)
    db, run_id = stored_run
    url, _handler = hook
    port = free_port()  # nothing listens there
    out = export_run(
        db,
        run_id,
        [
            SinkSpec("webhook", {"url": f"http://127.0.0.1:{port}/x"}),
            SinkSpec("webhook", {"url": url, "secretRef": "env:NOT_SET_ANYWHERE"}),
            SinkSpec("webhook", {"url": url}),
        ],
    )
    assert [e.receipt is not None for e in out] == [False, False, True]
    assert "gave up after" in out[0].error
    assert "NOT_SET_ANYWHERE" in out[1].error
    assert "Traceback" not in out[0].error + out[1].error


def test_a_run_with_sinks_sends_itself_at_its_end(
    tmp_path: Path, hook: tuple[str, type[_Hook]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, handler = hook
    (tmp_path / "sink_target.py").write_text(TARGET)
    rows = [{"id": f"s{i}", "input": f"q-{i}", "reference": f"Q-{i}"} for i in range(6)]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "run.yaml").write_text(
        "apiVersion: evals.si/v1alpha1\nkind: EvalRun\nmetadata: {name: s}\nspec:\n"
        "  target: {python: 'sink_target:answer'}\n  dataset: {path: rows.jsonl}\n"
        "  evaluators: [{ref: exact-match}]\n"
        f"  sinks: [{{webhook: {{url: '{url}'}}}}]\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("evalsi")), "run", "-f", "run.yaml",
         "--format", "json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["exports"][0]["ok"] is True
    assert json.loads(handler.received[0][1])["run"]["run_id"] == out["run_id"]
