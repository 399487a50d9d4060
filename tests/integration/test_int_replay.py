"""Record and replay end to end: an agent run over the stub model (real HTTP) records a cassette
per task in the store; a replay rebuilds the same trajectories with the stub stopped (0 model
and 0 tool calls), grades them with other evaluators, branches from a step with live calls
after it, refuses what its cassettes lack, resumes, and runs on the server."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

from evalsi.core import UserError
from evalsi.runs import execute_run, iter_tasks, replay_run
from evalsi.specs import run_spec_from_yaml
from evalsi.store import SqlStore
from tests.support.registry import BUILTINS
from tests.support.stub_llm import OPENAI_PATH, StubLLM

CALLS: list[str] = []


def lookup(city: str) -> str:
    """Weather of a city."""
    CALLS.append(city)
    return {"paris": "rain", "rome": "sun"}.get(city, "unknown")


SCRIPT: dict[str, Any] = {
    "tool_calls": {
        "weather in paris and rome?": [
            {"name": "lookup", "arguments": {"city": "paris"}},
            {"name": "lookup", "arguments": {"city": "rome"}},
        ],
        "weather in paris?": [{"name": "lookup", "arguments": {"city": "paris"}}],
    },
    "answers": {"rain": "It rains in Paris.", "sun": "Paris rain, Rome sun."},
}
ROWS = [
    {"id": "two", "input": "weather in paris and rome?", "reference": "Paris rain, Rome sun."},
    {"id": "one", "input": "weather in paris?", "reference": "It rains in Paris."},
]


def _spec(tmp: Path, url: str, extra: str = "", system: str = "") -> Any:
    (tmp / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return run_spec_from_yaml(
        f"""
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: weather}}
spec:
  target:
    {system}agent:
      model: {{connector: openai-compatible, baseUrl: "{url}", model: stub}}
      maxSteps: 4{extra}
  environment:
    tools: [{{function: "{__name__}:lookup"}}]
  dataset: {{path: tasks.jsonl}}
  trials: 2
  evaluators: [{{ref: exact-match}}]
""",
        base_dir=tmp,
    )


def _steps(db: SqlStore, run_id: str) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """Each task's steps without their times and latencies (a replay happens later)."""
    out = {}
    for task in iter_tasks(db, run_id, 100):
        steps = []
        for s in task["trajectory"]["steps"]:
            step = {k: v for k, v in s.items() if not k.endswith("time") and k != "duration_ms"}
            if "usage" in step:
                step["usage"] = {k: v for k, v in step["usage"].items() if k != "latency_ms"}
            steps.append(step)
        out[(task["sample_id"], task["trial"])] = steps
    return out


def _record(tmp: Path, stub: StubLLM | None = None) -> tuple[SqlStore, str, int]:
    CALLS.clear()
    db = SqlStore.open(tmp / "s.db")
    with StubLLM(**SCRIPT) if stub is None else contextlib.nullcontext(stub) as model:
        spec = _spec(tmp, model.openai_url)
        result = asyncio.run(execute_run(spec, store=db, registry=BUILTINS))
        calls = model.calls(OPENAI_PATH)
    assert result.tasks == {"ok": 4}
    assert result.metric("exact-match").mean == 1.0
    return db, result.run_id, calls


def test_every_task_records_its_cassette_in_the_store(tmp_path: Path) -> None:
    db, run_id, model_calls = _record(tmp_path)
    index = db.cassette_index(run_id)
    assert set(index) == {("two", 0), ("two", 1), ("one", 0), ("one", 1)}
    channels = {task: [row[0] for row in json.loads(text)["x"]] for task, text in index.items()}
    # the calls, then the task's latency (a replay reports the recorded one)
    assert channels[("two", 0)] == ["model", "tool:lookup", "tool:lookup", "model", "latency"]
    assert channels[("one", 0)] == ["model", "tool:lookup", "model", "latency"]
    assert sum(map(len, channels.values())) == model_calls + len(CALLS) + len(channels)
    # content-addressed: the same tool answer ("rain") is one blob for every task and trial
    keys = [row[2] for text in index.values() for row in json.loads(text)["x"]]
    blobs = db.cassette_blobs(keys)
    assert len(blobs) == len(set(keys)) < len(keys)
    db.close()


def test_a_replay_rebuilds_the_trajectories_with_no_model_or_tool_call(tmp_path: Path) -> None:
    db, run_id, _ = _record(tmp_path)
    CALLS.clear()
    # the model is gone: a replay must not need it (nor its key)
    result = asyncio.run(
        replay_run(
            db,
            run_id,
            registry=BUILTINS,
            evaluators=["exact-match", "step-efficiency", "tool-call-accuracy"],
        )
    )
    assert CALLS == []
    assert result.tasks == {"ok": 4}
    assert _steps(db, result.run_id) == _steps(db, run_id)
    # the tasks' usage, latency included, is the recorded one (not the replay's own time)
    usage = {
        r: {(o.record_id, o.trial): o.usage for o in db.iter_outputs(r)}
        for r in (run_id, result.run_id)
    }
    assert usage[result.run_id] == usage[run_id]
    assert result.metric("exact-match").mean == 1.0
    assert {m.evaluator for m in result.metrics} >= {"step-efficiency", "exact-match"}
    stored = db.get_run(result.run_id).spec
    assert stored["replay"] == {"of": run_id, "branch_from_step": None}
    # a replay records its own cassettes: it can be replayed again
    again = asyncio.run(replay_run(db, result.run_id, registry=BUILTINS))
    assert again.tasks == {"ok": 4}
    assert CALLS == []
    db.close()


@pytest.mark.parametrize("branch", [0, 1, 2])
def test_a_branch_replays_n_calls_then_calls_live(tmp_path: Path, branch: int) -> None:
    with StubLLM(**SCRIPT) as stub:  # the recorded run's model, still there for the live part
        db, run_id, _ = _record(tmp_path, stub)
        CALLS.clear()
        stub.reset()
        result = asyncio.run(replay_run(db, run_id, registry=BUILTINS, branch_from_step=branch))
        model_calls = stub.calls(OPENAI_PATH)
    assert result.tasks == {"ok": 4}
    # per task: calls 1..branch from the cassette, the rest live ("two" makes 4, "one" 3)
    recorded = {"two": ["model", "tool", "tool", "model"], "one": ["model", "tool", "model"]}
    live = [kind for calls in recorded.values() for kind in calls[branch:]] * 2
    assert model_calls == live.count("model")
    assert len(CALLS) == live.count("tool")
    assert _steps(db, result.run_id) == _steps(db, run_id)  # the same model: the same story
    spec = db.get_run(result.run_id).spec
    assert spec["replay"] == {"of": run_id, "branch_from_step": branch}
    db.close()


def test_a_changed_agent_misses_its_cassette_and_says_so(tmp_path: Path) -> None:
    db, run_id, _ = _record(tmp_path)
    info = db.get_run(run_id)
    # the same run with another system prompt: the first model call is not in the cassette
    doc = info.spec["document"]
    doc["spec"]["target"]["system"] = "Be brief."
    CALLS.clear()
    from evalsi.runs._replay import cassettes_of
    from evalsi.specs import run_spec_from_dict

    spec = run_spec_from_dict(doc, base_dir=tmp_path)
    result = asyncio.run(
        execute_run(spec, store=db, registry=BUILTINS, replay=cassettes_of(db, info, None))
    )
    assert result.tasks == {"infra_error": 4}
    assert CALLS == []
    failures = db.task_failures(result.run_id)
    assert failures[0][:3] == ("infra_error", "cassette", 4)
    assert "call 1 (model) is not in the cassette" in failures[0][3]
    assert result.exit_code == 2 or result.exit_code == 3
    db.close()


def test_a_run_that_recorded_no_cassette_cannot_be_replayed(tmp_path: Path) -> None:
    db = SqlStore.open(tmp_path / "s.db")
    with StubLLM(**SCRIPT) as stub:
        spec = _spec(tmp_path, stub.openai_url, extra="\n      cassette: {record: false}")
        result = asyncio.run(execute_run(spec, store=db, registry=BUILTINS))
    assert db.cassette_index(result.run_id) == {}
    with pytest.raises(UserError, match="recorded no cassette"):
        asyncio.run(replay_run(db, result.run_id, registry=BUILTINS))
    with pytest.raises(UserError, match="--branch-from-step must be 0 or more"):
        asyncio.run(replay_run(db, result.run_id, registry=BUILTINS, branch_from_step=-1))
    db.close()


def test_only_an_agent_run_is_replayed_and_params_need_evaluators(tmp_path: Path) -> None:
    db, run_id, _ = _record(tmp_path)
    with pytest.raises(UserError, match="--param needs --evaluators"):
        asyncio.run(replay_run(db, run_id, registry=BUILTINS, params={"exact-match": {"x": 1}}))
    with pytest.raises(UserError, match="which --evaluators does not list"):
        asyncio.run(
            replay_run(
                db,
                run_id,
                registry=BUILTINS,
                evaluators=["exact-match"],
                params={"contains": {"x": 1}},
            )
        )
    (tmp_path / "qa.jsonl").write_text(
        '{"id": "a", "input": "q", "output": "x", "reference": "x"}\n'
    )
    from evalsi.runs import score_async

    scored = asyncio.run(
        score_async(str(tmp_path / "qa.jsonl"), ["exact-match"], store=db, registry=BUILTINS)
    )
    with pytest.raises(UserError, match="replay plays an agent run"):
        asyncio.run(replay_run(db, scored.run_id, registry=BUILTINS))
    db.close()


def test_an_interrupted_replay_resumes_from_the_same_cassettes(tmp_path: Path) -> None:
    db, run_id, _ = _record(tmp_path)
    CALLS.clear()
    replayed = asyncio.run(
        replay_run(db, run_id, registry=BUILTINS, evaluators=["exact-match", "step-efficiency"])
    )
    # forget two tasks of the replay, as if it had been killed, then resume it
    db.engine.dispose()
    import sqlite3

    with sqlite3.connect(tmp_path / "s.db") as conn:
        pk = conn.execute("SELECT pk FROM runs WHERE id = ?", (replayed.run_id,)).fetchone()[0]
        conn.execute("DELETE FROM results WHERE run = ? AND trial = 1", (pk,))
        conn.execute("DELETE FROM outputs WHERE run = ? AND trial = 1", (pk,))
        conn.execute("UPDATE runs SET status = 'interrupted' WHERE pk = ?", (pk,))
    db = SqlStore.open(tmp_path / "s.db")
    spec = _spec(tmp_path, "http://127.0.0.1:9/v1")  # nothing listens: it must not be called
    info = db.get_run(replayed.run_id)
    from evalsi.runs import stored_spec

    resumed = asyncio.run(
        execute_run(stored_spec(info), store=db, registry=BUILTINS, resume=replayed.run_id)
    )
    assert spec is not None
    assert resumed.tasks == {"ok": 4}
    assert CALLS == []
    assert _steps(db, resumed.run_id) == _steps(db, run_id)
    # resumed with the replay's own evaluators, not the recorded run's
    assert {m.evaluator for m in resumed.metrics} == {"exact-match", "step-efficiency"}
    db.close()
