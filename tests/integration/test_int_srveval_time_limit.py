"""One slow evaluator no longer stalls the server: grading runs off the event loop, each sync
evaluator call is stopped at ``limits.evaluatorSeconds`` (its record ERROR, the others scored),
and ``/healthz`` answers all the while. The regex that took 24 s under Python's ``re`` answers
at once over the API.

The latency bounds here are guards, not speed targets: each fails only when the loop is held
for the whole slow call (seconds), as it was before."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from evalsi.core import Record
from evalsi.evaluators import evaluator
from evalsi.packs import builtin_registry
from evalsi.server._state import Limits
from tests.support.server_state import server_state, serving


@evaluator(name="test/spin", version="1.0.0", requires=("output",))
def spin(record: Record) -> bool:
    """Pure Python that never ends on "slow": the case a thread-pool timeout alone cannot
    stop (the thread would spin, holding a worker, for ever)."""
    if record.output is not None and record.output.as_text() == "slow":
        n = 0
        while True:
            n += 1
    return True


def _post(url: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


def _evaluate(url: str, outputs: list[str], evaluators: list[dict[str, Any]]) -> dict[str, Any]:
    records = [{"id": f"r{i}", "output": {"text": o}} for i, o in enumerate(outputs)]
    return _post(url + "/v1alpha1/evaluate", {"records": records, "evaluators": evaluators}, 60)


def test_a_spinning_evaluator_times_out_while_healthz_answers(tmp_path: Path) -> None:
    registry = builtin_registry(entry_points=False)
    registry.register(spin)
    state = server_state(
        tmp_path, registry=registry, runs=False, limits=Limits(evaluator_seconds=2)
    )
    with serving(state) as server:
        answer: dict[str, Any] = {}
        call = threading.Thread(
            target=lambda: answer.update(
                _evaluate(server.url, ["fast", "slow", "fast"], [{"ref": "test/spin"}])
            ),
            daemon=True,
        )
        started = time.monotonic()
        call.start()
        slowest, polls = 0.0, 0
        while call.is_alive() and time.monotonic() - started < 30:
            t = time.monotonic()
            with urllib.request.urlopen(server.url + "/healthz", timeout=5) as response:
                assert response.status == 200
            slowest = max(slowest, time.monotonic() - t)
            polls += 1
            time.sleep(0.05)
        call.join(30)
        took = time.monotonic() - started

    assert not call.is_alive(), "the request never ended: the spinning call was not stopped"
    assert took >= 2  # the limit was what ended it
    assert polls >= 5  # health was asked throughout the slow call
    assert slowest < 1.0, f"/healthz took {slowest:.2f}s while an evaluator spun"
    results = {r["recordId"]: r for r in answer["results"]}
    assert results["r1"]["outcome"] == "OUTCOME_ERROR"
    assert results["r1"]["reason"] == "timed out after 2s"
    assert {results[k]["outcome"] for k in ("r0", "r2")} == {"OUTCOME_SCORED"}
    (metric,) = answer["metrics"]
    assert int(metric["n"]) == 2  # proto JSON writes 64-bit counts as strings
    assert int(metric["errors"]) == 1


def test_catastrophic_regex_answers_at_once(tmp_path: Path) -> None:
    """``^(a+)+$`` on 28 a's and a "!" took 24 s under Python's re, with the server deaf."""
    state = server_state(tmp_path, runs=False)
    with serving(state) as server:
        started = time.monotonic()
        answer = _evaluate(
            server.url,
            ["a" * 28 + "!", "a" * 28],
            [{"ref": "regex", "params": {"pattern": "^(a+)+$"}}],
        )
        assert time.monotonic() - started < 5
    verdicts = [r["scores"][0]["passed"] for r in answer["results"]]
    assert verdicts == [False, True]


def test_a_pattern_re2_refuses_is_a_400_naming_it(tmp_path: Path) -> None:
    state = server_state(tmp_path, runs=False)
    with serving(state) as server, pytest.raises(urllib.error.HTTPError) as info:
        _evaluate(server.url, ["x"], [{"ref": "regex", "params": {"pattern": r"(a)\1"}}])
    assert info.value.code == 400
    body = json.loads(info.value.read())
    assert "evaluators[0].params: regex: param 'pattern': '(a)\\\\1'" in body["message"]
    assert "backreferences" in body["message"]


def test_a_server_run_stops_a_spinning_evaluator_and_scores_the_rest(tmp_path: Path) -> None:
    """A Run on the server grades its sync evaluators off the run's loop under the same limit:
    the spinning call is stopped (that task ERROR), the other samples are scored, and the run
    ends instead of holding its slot for ever."""
    from evalsi.client import Client
    from tests.support.stub_llm import StubLLM

    registry = builtin_registry(entry_points=False)
    registry.register(spin)
    rows = [{"id": f"s{i}", "input": "slow" if i == 1 else f"fast {i}"} for i in range(4)]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    state = server_state(tmp_path, registry=registry, limits=Limits(evaluator_seconds=2))
    with StubLLM() as llm, serving(state) as server, Client(server.url) as client:  # echoes
        spec = {
            "apiVersion": "evals.si/v1alpha1",
            "kind": "EvalRun",
            "metadata": {"name": "spin"},
            "spec": {
                "target": {
                    "model": {
                        "connector": "openai-compatible",
                        "baseUrl": llm.openai_url,
                        "model": "m",
                    }
                },
                "dataset": {"path": str(tmp_path / "rows.jsonl")},
                "evaluators": [{"ref": "test/spin"}],
            },
        }
        run = client.create_run(spec)
        results = list(run.results)
    assert run.status == "done"
    by_id = {r.record_id: r for r in results}
    assert by_id["s1"].outcome.name == "ERROR"
    assert "timed out after 2s" in (by_id["s1"].reason or "")
    assert [by_id[f"s{i}"].outcome.name for i in (0, 2, 3)] == ["SCORED"] * 3
