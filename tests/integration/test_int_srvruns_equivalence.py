"""A run created over the API gives the same metrics, n and CI as the same spec run embedded,
on SQLite and on PostgreSQL; WatchRun streams its progress and ends with the final state."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml

import evalsi
from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as pb
from evalsi._proto.evalsi.v1alpha1.run_service_connect import RunServiceClientSync
from evalsi.wire import run_from_proto
from tests.integration.run_support import write_qa
from tests.support.asgi_server import AsgiServer
from tests.support.run_server_main import run_app, run_doc, run_message, run_state
from tests.support.stub_llm import OPENAI_PATH, StubLLM

SAMPLES = 30
TRIALS = 2


def _metrics(result: Any) -> list[dict[str, Any]]:
    return [m.to_dict() for m in result.metrics]


def _last(client: RunServiceClientSync, run_id: str) -> pb.Run:
    return list(client.watch_run(pb.WatchRunRequest(id=run_id)))[-1].run


def _same_as_embedded(tmp_path: Path, store: str) -> None:
    datasets = tmp_path / "datasets"
    datasets.mkdir()
    write_qa(datasets / "qa.jsonl", SAMPLES)
    answers = {f"q{i}": f"a{i}" for i in range(SAMPLES) if i % 3}
    with StubLLM(answers=answers, latency_ms=5) as stub:
        doc = run_doc(
            stub.openai_url,
            "qa.jsonl",
            trials=TRIALS,
            gates=("metric('exact-match').mean >= 0.5",),
        )
        spec_file = datasets / "run.yaml"
        spec_file.write_text(yaml.safe_dump(doc))
        embedded = evalsi.run(spec_file, store=store)
        assert embedded.store is not None
        embedded.store.close()

        state = run_state(store, datasets)
        with AsgiServer(run_app(state)) as server:
            client = RunServiceClientSync(server.url)
            created = client.create_run(pb.CreateRunRequest(run=run_message(doc))).run
            assert created.id
            assert created.status in ("queued", "running")
            watched = list(client.watch_run(pb.WatchRunRequest(id=created.id)))
            got = client.get_run(pb.GetRunRequest(id=created.id)).run
            client.close()
        state.store.close()
        assert stub.calls(OPENAI_PATH) == 2 * SAMPLES * TRIALS  # embedded + server

    final = watched[-1].run
    assert final.status == "done"
    assert final == got
    assert all(w.run.status in ("queued", "running") for w in watched[:-1])
    remote = run_from_proto(got)
    assert remote.status == "done"
    assert remote.tasks == embedded.tasks == {"ok": SAMPLES * TRIALS}
    assert remote.metric("exact-match").n == embedded.metric("exact-match").n == 60
    assert _metrics(remote) == _metrics(embedded)
    assert remote.gates == embedded.gates
    assert remote.exit_code == embedded.exit_code == 0
    assert remote.to_dict()["metrics"] == embedded.to_dict()["metrics"]  # pass@k included
    assert remote.dataset_version == embedded.dataset_version


def test_api_run_matches_embedded_on_sqlite(tmp_path: Path) -> None:
    _same_as_embedded(tmp_path, str(tmp_path / "srv.db"))


def test_api_run_matches_embedded_on_postgres(tmp_path: Path, pg_url: str) -> None:
    _same_as_embedded(tmp_path, pg_url)


def test_watch_streams_progress_then_the_final_state(tmp_path: Path) -> None:
    datasets = tmp_path / "datasets"
    datasets.mkdir()
    write_qa(datasets / "qa.jsonl", 60)
    with StubLLM(answers={f"q{i}": f"a{i}" for i in range(60)}, latency_ms=100) as stub:
        state = run_state(str(tmp_path / "srv.db"), datasets)
        with AsgiServer(run_app(state)) as server:
            client = RunServiceClientSync(server.url)
            doc = run_doc(stub.openai_url, "qa.jsonl", concurrency=2)  # ~3 s
            run_id = client.create_run(pb.CreateRunRequest(run=run_message(doc))).run.id
            watched = [w.run for w in client.watch_run(pb.WatchRunRequest(id=run_id))]
            again = [w.run for w in client.watch_run(pb.WatchRunRequest(id=run_id))]
            client.close()
        state.store.close()

    progress = [r.progress.tasks_done for r in watched[:-1]]
    assert len(progress) >= 5, "a 3 s run streams its progress several times"
    assert progress == sorted(progress)
    assert progress[-1] > progress[0]
    assert all(r.progress.tasks_total == 60 for r in watched[:-1] if r.status == "running")
    partial = [m.n for r in watched[:-1] for m in r.metrics]
    assert any(0 < n < 60 for n in partial), f"partial metrics while running: {partial}"
    assert len(set(partial)) <= 3, "partial metrics are recomputed at most every ~2 s"
    final = watched[-1]
    assert final.status == "done"
    assert final.metrics[0].n == 60
    assert final.metrics[0].mean == 1.0
    # A finished run's watch sends its final state once and ends.
    assert len(again) == 1
    assert again[0].status == "done"
    assert again[0].metrics == final.metrics


@pytest.mark.parametrize("limit", [1])
def test_runs_over_the_limit_queue_then_run(tmp_path: Path, limit: int) -> None:
    datasets = tmp_path / "datasets"
    datasets.mkdir()
    write_qa(datasets / "qa.jsonl", 12)
    with StubLLM(latency_ms=60) as stub:
        state = run_state(str(tmp_path / "srv.db"), datasets, max_concurrent_runs=limit)
        with AsgiServer(run_app(state)) as server:
            client = RunServiceClientSync(server.url)
            message = run_message(run_doc(stub.openai_url, "qa.jsonl", concurrency=2))
            first = client.create_run(pb.CreateRunRequest(run=message)).run
            second = client.create_run(pb.CreateRunRequest(run=message)).run
            assert second.status == "queued"
            assert state.store.get_run(second.id).status == "queued"  # stored, not only shown
            queued = client.list_runs(pb.ListRunsRequest(status="queued")).runs
            assert [r.id for r in queued] == [second.id]
            ends = [_last(client, first.id)]
            seen = [state.store.get_run(second.id).status]
            while seen[-1] not in ("done", "failed"):
                time.sleep(0.01)
                seen.append(state.store.get_run(second.id).status)
            ends.append(_last(client, second.id))
            stats = state.runs.stats()
            counts = state.store.count_runs_by_status()
            client.close()
        state.store.close()

    assert [r.status for r in ends] == ["done", "done"]
    assert "running" in seen  # marked running in the store once the first freed its slot
    assert seen[-1] == "done"
    assert counts.get("done") == 2
    assert stats["tasks"]["completed"] == 24
