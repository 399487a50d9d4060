"""Replay over the server: ``RunService.ReplayRun`` (Connect, gRPC, REST) and
``evalsi.Client.replay_run`` replay an agent run the server recorded, with the model gone, into
a new run of the same project; bad requests and other projects' runs get plain errors."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import evalsi
from evalsi.core import NotFoundError, UserError
from evalsi.runs import iter_tasks
from evalsi.store import SqlStore
from tests.integration.test_int_replay import CALLS, ROWS, SCRIPT
from tests.support.server_state import server_state, serving
from tests.support.stub_llm import OPENAI_PATH, StubLLM


def _doc(url: str, data: str) -> dict[str, Any]:
    return {
        "apiVersion": "evals.si/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "weather"},
        "spec": {
            "target": {
                "agent": {
                    "model": {"connector": "openai-compatible", "baseUrl": url, "model": "stub"},
                    "maxSteps": 4,
                }
            },
            "environment": {"tools": [{"function": "tests.integration.test_int_replay:lookup"}]},
            "dataset": {"path": data},  # a local file: the client uploads it
            "trials": 2,
            "evaluators": [{"ref": "exact-match"}],
        },
    }


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Path]]:
    """An agent run recorded by the server, its model stopped since: (url, run id, tmp)."""
    tmp = tmp_path_factory.mktemp("srvreplay")
    (tmp / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    with serving(server_state(tmp, allow_python_targets=True)) as server:
        with StubLLM(**SCRIPT) as stub, evalsi.Client(server.url) as client:
            run = client.create_run(_doc(stub.openai_url, str(tmp / "tasks.jsonl")))
            assert stub.calls(OPENAI_PATH) > 0
        assert run.status == "done", run
        yield server.url, run.run_id, tmp


def _steps(tmp: Path, run_id: str) -> list[list[str]]:
    db = SqlStore.open(tmp / "s.db")
    try:
        return [
            [f"{s['type']}:{s.get('result', s.get('output'))}" for s in t["trajectory"]["steps"]]
            for t in iter_tasks(db, run_id, 100)
        ]
    finally:
        db.close()


@pytest.mark.parametrize("protocol", ["connect", "grpc"])
def test_the_client_replays_a_server_run_with_the_model_gone(
    served: tuple[str, str, Path], protocol: str
) -> None:
    url, run_id, tmp = served
    CALLS.clear()
    with evalsi.Client(url, protocol=protocol) as client:
        seen: list[int] = []
        replay = client.replay_run(
            run_id,
            evaluators=["exact-match", "step-efficiency"],
            params={"exact-match": {"ignore_case": True}},
            progress=lambda done, infra: seen.append(done),
        )
        info = client.run_info(replay.run_id)
    assert replay.status == "done", replay
    assert replay.tasks == {"ok": 4}
    assert CALLS == []
    assert replay.metric("exact-match").mean == 1.0
    assert info.spec["replay"] == {"of": run_id, "branch_from_step": None}
    params = {e["name"]: e["params"] for e in info.spec["evaluators"]}
    assert params == {"exact-match": {"ignore_case": True}, "step-efficiency": {}}
    assert _steps(tmp, replay.run_id) == _steps(tmp, run_id)


def test_rest_replays_and_answers_bad_requests_plainly(served: tuple[str, str, Path]) -> None:
    url, run_id, _ = served

    def post(path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        request = urllib.request.Request(
            f"{url}{path}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    status, body = post(f"/v1alpha1/runs/{run_id}:replay", {})
    assert status == 200, body
    assert body["run"]["id"] != run_id
    status, body = post(f"/v1alpha1/runs/{run_id}:replay", {"branchFromStep": -1})
    assert status == 400
    assert "branch" in json.dumps(body).lower()
    status, body = post(f"/v1alpha1/runs/{run_id}:replay", {"params": {"exact-match": {}}})
    assert status == 400
    assert "--param needs --evaluators" in body["message"]
    status, body = post("/v1alpha1/runs/no-such-run:replay", {})
    assert status == 404


def test_a_run_of_another_project_is_not_found(served: tuple[str, str, Path]) -> None:
    url, run_id, _ = served
    with evalsi.Client(url, project="elsewhere") as client, pytest.raises(NotFoundError):
        client.replay_run(run_id)


def test_a_score_run_is_refused(served: tuple[str, str, Path]) -> None:
    url, _, _ = served
    with evalsi.Client(url) as client:
        scored = client.evaluate(
            [{"id": "a", "input": "q", "output": "x", "reference": "x"}], ["exact-match"]
        )
        with pytest.raises(UserError, match="replay plays an agent run"):
            client.replay_run(scored.run_id)
