"""A multi-turn agent run end to end: the built-in agent and the simulated user both over the
stub LLM (real HTTP), through an EvalRun spec; the user gives the hidden city only when asked,
the agent sets it with a tool in the task's workspace, a checker grades the end state; the
user's turns are in the stored trajectory; a re-run asks the simulator nothing (its cache);
a recorded conversation replays with no call to the stub."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from evalsi.agents import workspace
from evalsi.connectors import TaskInfo
from evalsi.core import Cassette, Content, Record
from evalsi.runs._execute import execute_run
from evalsi.runs._targets import build_target
from evalsi.specs import run_spec_from_yaml
from evalsi.store import SqlStore
from tests.support.registry import BUILTINS
from tests.support.stub_llm import OPENAI_PATH, StubLLM


def set_city(city: str) -> str:
    """Set the customer's city."""
    (workspace() / "profile.json").write_text(json.dumps({"city": city}))
    return f"city set to {city}"


ASK = "Sure. What is your new city?"
SCRIPT: dict[str, Any] = {
    "answers": {
        # the agent's side (the last user or tool message it reads)
        "I moved, please update my address": ASK,
        "city set to Oslo": "Done: your city is Oslo.",
        # the simulated user's side (the agent's last message, which it reads as "user")
        ASK: "Oslo",
        "Done: your city is Oslo.": "Thank you! ###STOP###",
    },
    "tool_calls": {"Oslo": [{"name": "set_city", "arguments": {"city": "Oslo"}}]},
}


def _spec(tmp_path: Path, url: str) -> str:
    rows = [
        {
            "id": "move",
            "input": "I moved, please update my address",
            "metadata": {"user": {"hidden": "You now live in Oslo."}},
        },
        {"id": "chatter", "input": "hello there"},  # the stub echoes: nobody ever stops
    ]
    (tmp_path / "tasks.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return f"""
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: moving-customer}}
spec:
  target:
    agent:
      model: {{connector: openai-compatible, baseUrl: "{url}", model: agent-model}}
      maxSteps: 4
      user:
        model: {{connector: openai-compatible, baseUrl: "{url}", model: user-model}}
        persona: A customer who just moved house.
        goal: Get the address on file updated.
        maxTurns: 3
  environment:
    tools:
      - function: "{__name__}:set_city"
        declare: {{permission: write, reversible: true}}
    sandbox: {{minIsolation: none}}
    checkers:
      - jsonFile: {{path: profile.json, expect: {{city: Oslo}}}}
        name: city-updated
  dataset: {{path: tasks.jsonl}}
  evaluators:
    - ref: task-success
"""


def _tasks(db: SqlStore, run_id: str) -> dict[str, dict[str, Any]]:
    from evalsi.runs import iter_tasks

    return {t["sample_id"]: t for t in iter_tasks(db, run_id, 100)}


def _models(stub: StubLLM) -> list[str]:
    return [r.body["model"] for r in stub.requests(OPENAI_PATH)]


def test_a_conversation_with_a_simulated_user_is_run_stored_and_graded(tmp_path: Path) -> None:
    with StubLLM(**SCRIPT) as stub:
        spec = run_spec_from_yaml(_spec(tmp_path, stub.openai_url), base_dir=tmp_path)
        db = SqlStore.open(tmp_path / "s.db")
        result = asyncio.run(execute_run(spec, store=db, registry=BUILTINS))
        models = _models(stub)
        asked_user = [r.body for r in stub.requests(OPENAI_PATH) if r.body["model"] == "user-model"]
        stub.reset()
        again = asyncio.run(execute_run(spec, store=db, registry=BUILTINS))
        models_again = _models(stub)
    assert result.tasks == {"ok": 2}
    tasks = _tasks(db, result.run_id)
    move = tasks["move"]["trajectory"]
    assert move["stop_reason"] == "user_stop"
    assert [s["type"] for s in move["steps"]] == [
        "model_call",  # "What is your new city?"
        "message",  # the user: Oslo
        "model_call",
        "tool_call",
        "model_call",  # "Done: your city is Oslo."
        "message",  # the user: thanks + stop token
    ]
    users = [s for s in move["steps"] if s["type"] == "message"]
    assert [(u["name"], u["output"]["text"]) for u in users] == [
        ("user", "Oslo"),
        ("user", "Thank you! ###STOP###"),
    ]
    assert tasks["move"]["output"] == "Done: your city is Oslo."
    # the hidden information reached the simulator's prompt, and the roles were flipped
    (asked,) = [a for a in asked_user if a["messages"][-1] == {"role": "user", "content": ASK}]
    system = asked["messages"][0]
    assert system["role"] == "system"
    assert "You now live in Oslo." in system["content"]
    assert "A customer who just moved house." in system["content"]
    # the echoing conversation was cut at three user turns, and failed its check
    chatter = tasks["chatter"]["trajectory"]
    assert chatter["stop_reason"] == "max_turns"
    assert sum(s["type"] == "message" for s in chatter["steps"]) == 2
    verdicts = {t: tasks[t]["scores"][0]["scores"]["task-success"] for t in tasks}
    assert verdicts == {"move": True, "chatter": False}
    success = result.metric("task-success")
    assert (success.n, success.mean) == (2, 0.5)
    # the agent's usage holds the agent's model calls only (the stub counts words)
    assert models.count("agent-model") == 6  # 3 in "move", 3 in "chatter"
    assert models.count("user-model") == 4
    # a re-run of the same spec asks the simulated user nothing: its answers are cached
    assert again.tasks == {"ok": 2}
    assert models_again.count("user-model") == 0
    assert models_again.count("agent-model") == 6


def test_a_recorded_conversation_replays_without_calling_the_stub(tmp_path: Path) -> None:
    with StubLLM(**SCRIPT) as stub:
        spec = run_spec_from_yaml(_spec(tmp_path, stub.openai_url), base_dir=tmp_path)
        record = Record(
            id="move",
            input=Content.of_text("I moved, please update my address"),
            metadata={"user": {"hidden": "You now live in Oslo."}},
        )
        task = TaskInfo("run", "move", 0, record)

        async def once(replay: Any = None) -> Any:
            target: Any = build_target(spec.target, environment=spec.environment)
            target.replay = replay
            async with target:
                return await target.invoke(record.input, seed=1, task=task)

        recorded = asyncio.run(once())
        assert stub.calls(OPENAI_PATH) == 5
        stub.reset()
        cassette = recorded.cassette
        assert [e.channel for e in cassette] == [
            "model",
            "user",
            "model",
            "tool:set_city",
            "model",
            "user",
            "check",  # the workspace's verdicts: a replay runs no tool, so they are replayed
            "latency",  # the task's: a replay reports the recorded one
        ]

        class Recorded:
            live_after = None

            def cassette(self, sample_id: str, trial: int) -> Cassette | None:
                return cassette

        replayed = asyncio.run(once(Recorded()))
        assert stub.calls() == 0
    assert replayed.output == recorded.output
    assert replayed.trajectory.stop_reason == "user_stop"
    # the tool call was replayed too (nothing wrote profile.json in the fresh workspace), so
    # the verdicts are the recorded ones, not a check of an untouched workspace
    assert [c.passed for c in replayed.trajectory.checks] == [True]
    assert replayed.trajectory.checks == recorded.trajectory.checks
