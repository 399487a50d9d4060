"""Server limits and project scoping, each as it was found, over REST and the official client
against a real server: ``trials: 10,000,000``, ``concurrency: 1e8``, an endless queue and a
huge Evaluate call were accepted; a run of project ``alpha`` was readable by id from the
default project."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import evalsi
from evalsi.server._state import Limits
from evalsi.store import SqlStore
from tests.integration.run_support import write_qa
from tests.support.server_state import server_state, serving
from tests.support.stub_llm import StubLLM

LIMITS = Limits(
    max_trials=10,
    max_tasks_per_run=50,
    max_queued_runs=1,
    max_concurrency=32,
    max_request_records=5,
)


@dataclass
class Served:
    url: str
    store: SqlStore
    llm: str

    def call(self, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path,
            data=data,
            method="POST" if data is not None else "GET",
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def run(self, dataset: str = "qa.jsonl", **spec: Any) -> dict[str, Any]:
        return {
            "apiVersion": "evals.si/v1alpha1",
            "kind": "EvalRun",
            "metadata": {"name": "limits"},
            "spec": {
                "target": {
                    "model": {"connector": "openai-compatible", "baseUrl": self.llm, "model": "m"}
                },
                "dataset": {"path": dataset},
                "evaluators": [{"ref": "exact-match"}],
                **spec,
            },
        }


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    (tmp_path / "datasets").mkdir()
    write_qa(tmp_path / "datasets" / "qa.jsonl", 5)
    write_qa(tmp_path / "datasets" / "big.jsonl", 60)
    # Slow answers keep the first runs live while the queue fills.
    with StubLLM(latency_ms=400) as llm:
        state = server_state(tmp_path, limits=LIMITS, max_concurrent_runs=1)
        with serving(state) as server:
            yield Served(server.url, state.store, llm.openai_url)


def _refused(answer: tuple[int, dict[str, Any]], key: str) -> str:
    status, body = answer
    assert status == 400, body
    assert body["code"] == "invalid_argument"
    assert f"limits.{key}" in body["message"], body["message"]
    return str(body["message"])


def test_run_limits_are_refused_naming_the_limit(served: Served) -> None:
    before = len(served.store.list_runs(100))
    message = _refused(
        served.call("/v1alpha1/runs", {"run": served.run(trials=10_000_000)}), "maxTrials"
    )
    assert message.startswith("spec.trials: 10000000 is over this server's limit of 10")
    message = _refused(
        served.call("/v1alpha1/runs", {"run": served.run(maxConcurrency=1000)}),
        "maxConcurrency",
    )
    assert message.startswith("spec.maxConcurrency: ")
    # 60 samples x 1 trial, then 5 x 11: both over 50 tasks; 5 x 10 = 50 is within.
    _refused(served.call("/v1alpha1/runs", {"run": served.run("big.jsonl")}), "maxTasksPerRun")
    _refused(
        served.call("/v1alpha1/runs", {"run": served.run(trials=11)}),
        "maxTrials",
    )
    limited = served.run("big.jsonl")
    limited["spec"]["dataset"]["limit"] = 50
    assert served.call("/v1alpha1/runs", {"run": limited, "dryRun": True})[0] == 200
    assert served.call("/v1alpha1/runs", {"run": served.run(trials=10), "dryRun": True})[0] == 200
    assert len(served.store.list_runs(100)) == before  # nothing refused was stored


def test_task_limit_counts_samples_times_trials(served: Served) -> None:
    message = _refused(
        served.call("/v1alpha1/runs", {"run": served.run("big.jsonl", trials=2)}),
        "maxTasksPerRun",
    )
    assert "x 2 trials" in message


def test_the_queue_is_bounded(served: Served) -> None:
    first = served.call("/v1alpha1/runs", {"run": served.run()})  # takes the one slot
    second = served.call("/v1alpha1/runs", {"run": served.run()})  # waits: the queue holds 1
    assert (first[0], second[0]) == (200, 200), (first, second)
    message = _refused(served.call("/v1alpha1/runs", {"run": served.run()}), "maxQueuedRuns")
    assert message.startswith("run queue: 1 runs already wait")
    assert len(served.store.list_runs(100)) == 2


def test_evaluate_records_per_request_are_bounded(served: Served) -> None:
    records = [{"id": str(i), "output": {"text": "a"}} for i in range(6)]
    body = {"records": records, "evaluators": [{"ref": "length"}]}
    message = _refused(served.call("/v1alpha1/evaluate", body), "maxRequestRecords")
    assert message.startswith("records: 6 records is over this server's limit of 5")
    assert served.call("/v1alpha1/evaluate", {**body, "records": records[:5]})[0] == 200
    with evalsi.Client(served.url) as client:
        rows = [{"id": str(i), "output": "a"} for i in range(6)]
        with pytest.raises(evalsi.UserError, match=r"limits\.maxRequestRecords"):
            list(client.evaluate_stream(rows, ["length"], batch_size=6))


def test_run_of_another_project_is_not_found_by_id(served: Served) -> None:
    status, body = served.call(
        "/v1alpha1/evaluate",
        {
            "records": [{"id": "1", "output": {"text": "a"}}],
            "evaluators": [{"ref": "length"}],
            "projectId": "alpha",
        },
    )
    assert status == 200, body
    run_id = body["runId"]
    prefix = run_id[:10]
    for path in (
        f"/v1alpha1/runs/{run_id}",
        f"/v1alpha1/runs/{prefix}",
        f"/v1alpha1/runs/{run_id}/results",
        f"/v1alpha1/runs/{run_id}?projectId=beta",
        f"/v1alpha1/runs/{run_id}:watch",
    ):
        status, body = served.call(path)
        assert status == 404, (path, body)
        assert body["code"] == "not_found"
    for verb in ("cancel", "resume"):
        status, body = served.call(f"/v1alpha1/runs/{run_id}:{verb}", {})
        assert status == 404, (verb, body)
    status, body = served.call("/v1alpha1/runs:compare", {"baseline": run_id, "candidate": run_id})
    assert status == 404, body
    status, _ = served.call("/v1alpha1/runs/latest")
    assert status == 404  # the default project holds no run: latest is scoped too
    # Within its project, every read finds it.
    status, body = served.call(f"/v1alpha1/runs/{run_id}?projectId=alpha")
    assert (status, body["run"]["id"], body["run"]["projectId"]) == (200, run_id, "alpha")
    status, body = served.call(f"/v1alpha1/runs/{prefix}/results?projectId=alpha")
    assert status == 200
    assert len(body["results"]) == 1
    status, body = served.call(
        "/v1alpha1/runs:compare", {"baseline": run_id, "candidate": "latest", "projectId": "alpha"}
    )
    assert status == 200, body
    status, body = served.call(f"/v1alpha1/runs/{run_id}?projectId=Not%20Valid")
    assert status == 400
    assert body["message"].startswith("project_id: ")


def test_official_client_reads_default_project_runs(served: Served) -> None:
    with evalsi.Client(served.url) as client:
        created = client.evaluate([{"id": "1", "output": "a"}], ["length"])
        assert client.run_info(created.run_id).id == created.run_id
