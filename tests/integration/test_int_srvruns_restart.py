"""A server killed with SIGKILL mid-run resumes the run when it starts again on the same store:
exactly samples x trials tasks, the same metrics as an uninterrupted run, no task twice."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as pb
from evalsi._proto.evalsi.v1alpha1.run_service_connect import RunServiceClientSync
from evalsi.runs import execute_run, run_spec_from_dict
from evalsi.store import SqlStore
from evalsi.wire import run_from_proto
from tests.integration.run_support import write_qa
from tests.support.registry import BUILTINS
from tests.support.run_server_main import run_doc, run_message
from tests.support.server_state import free_port
from tests.support.stub_llm import OPENAI_PATH, StubLLM

REPO = Path(__file__).resolve().parents[2]
MAIN = "tests.support.run_server_main"
SAMPLES = 80
TRIALS = 2
TASKS = SAMPLES * TRIALS


def _start(store: str, datasets: Path, cwd: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    log = cwd / f"server-{port}.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", MAIN, store, str(datasets), str(port)],
            cwd=cwd,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=subprocess.PIPE,
            stderr=err,
        )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()  # blocks until the server listens (or dies)
    if line.strip() != b"LISTENING":
        _stop(proc, signal.SIGKILL)
        raise AssertionError("the server did not start:\n" + log.read_text()[-3000:])
    return proc, f"http://127.0.0.1:{port}"


def _stop(proc: subprocess.Popen[bytes], sig: int) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
    proc.wait(30)
    if proc.stdout is not None:
        proc.stdout.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_server_killed_mid_run_resumes_it_on_start(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    store = str(tmp_path / "srv.db") if backend == "sqlite" else request.getfixturevalue("pg_url")
    datasets = tmp_path / "datasets"
    datasets.mkdir()
    data = write_qa(datasets / "qa.jsonl", SAMPLES)
    answers = {f"q{i}": f"a{i}" for i in range(SAMPLES) if i % 3}
    with StubLLM(answers=answers, latency_ms=40) as stub:
        doc = run_doc(stub.openai_url, "qa.jsonl", trials=TRIALS, concurrency=4)
        proc, url = _start(store, datasets, tmp_path)
        try:
            client = RunServiceClientSync(url)
            run_id = client.create_run(pb.CreateRunRequest(run=run_message(doc))).run.id
            deadline = time.monotonic() + 30
            while client.get_run(pb.GetRunRequest(id=run_id)).run.progress.tasks_done < 40:
                assert time.monotonic() < deadline, "the run made no progress"
                time.sleep(0.02)
            client.close()
        finally:
            _stop(proc, signal.SIGKILL)
        db = SqlStore.open(store)
        killed = db.get_run(run_id)
        stored = sum(db.output_counts(run_id).values())
        db.close()
        assert killed.status == "interrupted"  # its process is gone
        assert 40 <= stored < TASKS, "killed half way"
        calls_before = stub.calls(OPENAI_PATH)

        proc, url = _start(store, datasets, tmp_path)
        try:
            client = RunServiceClientSync(url)
            final = list(client.watch_run(pb.WatchRunRequest(id=run_id)))[-1].run
            client.close()
        finally:
            _stop(proc, signal.SIGTERM)
        redone = stub.calls(OPENAI_PATH) - calls_before
        spec = run_spec_from_dict({**doc, "spec": {**doc["spec"], "dataset": {"path": str(data)}}})
        full = asyncio.run(execute_run(spec, store=tmp_path / "full.db", registry=BUILTINS))
        assert full.store is not None
        full.store.close()

    assert final.status == "done", final
    result = run_from_proto(final)
    assert result.tasks == {"ok": TASKS}
    assert result.metric("exact-match").n == TASKS
    assert [m.to_dict() for m in result.metrics] == [m.to_dict() for m in full.metrics]
    assert redone <= TASKS - stored + 4  # only what was not stored (plus those in flight)
