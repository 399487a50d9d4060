"""CancelRun stops a run mid-way (its stored results are kept) and ResumeRun completes it with
no task counted twice; a finished run cannot be resumed, cancelling it changes nothing."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from connectrpc.code import Code
from connectrpc.errors import ConnectError

from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as pb
from evalsi._proto.evalsi.v1alpha1.run_service_connect import RunServiceClientSync
from evalsi.runs import execute_run, run_spec_from_dict
from evalsi.store import SqlStore
from evalsi.wire import run_from_proto
from tests.integration.run_support import write_qa
from tests.support.asgi_server import AsgiServer
from tests.support.registry import BUILTINS
from tests.support.run_server_main import run_app, run_doc, run_message, run_state
from tests.support.stub_llm import OPENAI_PATH, StubLLM

SAMPLES = 50
TRIALS = 2
TASKS = SAMPLES * TRIALS


def _wait_progress(client: RunServiceClientSync, run_id: str, at_least: int) -> pb.Run:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        run = client.get_run(pb.GetRunRequest(id=run_id)).run
        if run.progress.tasks_done >= at_least:
            return run
        assert run.status in ("queued", "running"), run
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} made no progress")


def test_cancel_then_resume_counts_every_task_once(tmp_path: Path) -> None:
    datasets = tmp_path / "datasets"
    datasets.mkdir()
    data = write_qa(datasets / "qa.jsonl", SAMPLES)
    answers = {f"q{i}": f"a{i}" for i in range(SAMPLES) if i % 4}
    db = str(tmp_path / "srv.db")
    with StubLLM(answers=answers, latency_ms=80) as stub:
        doc = run_doc(stub.openai_url, "qa.jsonl", trials=TRIALS, concurrency=2)
        state = run_state(db, datasets)
        with AsgiServer(run_app(state)) as server:
            client = RunServiceClientSync(server.url)
            run_id = client.create_run(pb.CreateRunRequest(run=run_message(doc))).run.id
            _wait_progress(client, run_id, 10)

            cancelled = client.cancel_run(pb.CancelRunRequest(id=run_id)).run
            calls_at_cancel = stub.calls(OPENAI_PATH)
            time.sleep(0.5)
            assert stub.calls(OPENAI_PATH) == calls_at_cancel, "no call after the cancel"
            stored = SqlStore.open(db)
            kept = stored.output_counts(run_id)
            stored.close()

            resumed = client.resume_run(pb.ResumeRunRequest(id=run_id)).run
            final = list(client.watch_run(pb.WatchRunRequest(id=run_id)))[-1].run
            with pytest.raises(ConnectError) as again:
                client.resume_run(pb.ResumeRunRequest(id=run_id))
            unchanged = client.cancel_run(pb.CancelRunRequest(id=run_id)).run
            client.close()
        state.store.close()
        calls = stub.calls(OPENAI_PATH)
        spec = run_spec_from_dict({**doc, "spec": {**doc["spec"], "dataset": {"path": str(data)}}})
        full = asyncio.run(execute_run(spec, store=tmp_path / "full.db", registry=BUILTINS))
        assert full.store is not None
        full.store.close()

    assert cancelled.status == "cancelled"
    assert cancelled.exit_code == 3
    assert cancelled.error == "cancelled on request"
    assert 10 <= kept.get("ok", 0) < TASKS, kept
    assert resumed.id == run_id
    assert resumed.status in ("queued", "running")
    assert final.status == "done"
    result = run_from_proto(final)
    assert result.tasks == {"ok": TASKS}
    assert result.metric("exact-match").n == TASKS
    assert [m.to_dict() for m in result.metrics] == [m.to_dict() for m in full.metrics]
    # Only what the cancel left undone was called again (plus the calls it cut off).
    assert calls <= TASKS + 2 + TASKS
    assert again.value.code == Code.INVALID_ARGUMENT
    assert "done" in again.value.message
    assert unchanged.status == "done"
    assert unchanged.metrics == final.metrics


def test_cancel_a_queued_run(tmp_path: Path) -> None:
    datasets = tmp_path / "datasets"
    datasets.mkdir()
    write_qa(datasets / "qa.jsonl", 20)
    with StubLLM(latency_ms=50) as stub:
        state = run_state(str(tmp_path / "srv.db"), datasets, max_concurrent_runs=1)
        with AsgiServer(run_app(state)) as server:
            client = RunServiceClientSync(server.url)
            message = run_message(run_doc(stub.openai_url, "qa.jsonl", concurrency=2))
            first = client.create_run(pb.CreateRunRequest(run=message)).run
            second = client.create_run(pb.CreateRunRequest(run=message)).run
            assert second.status == "queued"
            stopped = client.cancel_run(pb.CancelRunRequest(id=second.id)).run
            done = list(client.watch_run(pb.WatchRunRequest(id=first.id)))[-1].run
            resumed = client.resume_run(pb.ResumeRunRequest(id=second.id)).run
            end = list(client.watch_run(pb.WatchRunRequest(id=second.id)))[-1].run
            client.close()
        state.store.close()

    assert stopped.status == "cancelled"
    assert stopped.records == 0
    assert done.status == "done"
    assert resumed.status in ("queued", "running")
    assert end.status == "done"
    assert end.metrics[0].n == 20
