"""The built-in agent against a real small model (SmolLM2-135M-Instruct on llama.cpp's
OpenAI-compatible server, ``conftest.py``): an EvalRun from the CLI whose stored run holds the
server's token usage and a tool call the environment executed; the task's cassette recorded
from the live model and replayed with the server out of reach; the user simulator over the same
model. What each run measured (load time, tokens/s, wall time) is printed in pytest's summary.

What the model and the server can do, measured (docs/guides/agents.md, "A real small
model"): with ``tool_choice: auto`` and a system message, SmolLM2-135M calls ``get_weather``
with the right city on every weather question tried. The server's ``chatml-function-calling``
format never shows the model a tool's result (its template has no ``tool`` role) and its
plain-message branch returns empty text, so the agent cannot finish with an answer: the runs
here take one model turn (``maxSteps: 1``), whose tool call the environment runs, and end with
``max_steps``. Without ``tool_choice`` the server leaves the tools out and the model just talks,
which is what the user-simulator test uses.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.small_model import SmallModel, free_port

pytestmark = pytest.mark.small_model

ROOT = Path(__file__).resolve().parents[2]

# The chat format shows the model each tool's name and JSON schema (not its description) in the
# system message, then lets it choose between "message:" and "functions.NAME:"; a system
# message is therefore required, and a tool name that says what it does matters.
SYSTEM = (
    "You are a weather assistant. To answer a question about the weather, call the "
    "get_weather function with the city."
)
TASKS = [
    {"id": "paris", "input": "What is the weather in Paris?", "reference": "sunny"},
    {"id": "tokyo", "input": "What is the weather in Tokyo today?", "reference": "sunny"},
]
TOOLS = """
    from pathlib import Path

    CALLS = Path(__file__).with_name("calls.log")


    def get_weather(city: str) -> str:
        \"\"\"Today's weather in a city.\"\"\"
        with CALLS.open("a") as f:
            f.write(city + "\\n")
        return f"It is sunny and 21 C in {city}."
"""


def _evalsi(cwd: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it, with the task's tool module importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALSI_")}
    # the evalsi this test imports, so the CLI runs the same code
    src = Path(importlib.util.find_spec("evalsi").origin or "").parents[1]  # type: ignore[union-attr]
    env["PYTHONPATH"] = os.pathsep.join([str(cwd), str(src), str(ROOT)])
    env["XDG_CONFIG_HOME"] = str(cwd / ".config")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "evalsi", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def _write_run(cwd: Path, model: SmallModel, agent_extra: str = "", *, max_steps: int = 1) -> Path:
    (cwd / "weather_tools.py").write_text(textwrap.dedent(TOOLS))
    (cwd / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    spec = cwd / "run.yaml"
    spec.write_text(
        textwrap.dedent(f"""\
        apiVersion: evals.si/v1alpha1
        kind: EvalRun
        metadata: {{name: small-model-agent}}
        spec:
          target:
            system: {json.dumps(SYSTEM)}
            agent:
              model:
                connector: openai-compatible
                baseUrl: "{model.base_url}"
                model: {model.model}
                params: {{tool_choice: auto, temperature: 0, max_tokens: 64}}
              maxSteps: {max_steps}
              maxDuration: 5m
        {textwrap.indent(agent_extra, " " * 6)}
          environment:
            tools:
              - function: "weather_tools:get_weather"
          dataset: {{path: tasks.jsonl}}
          evaluators:
            - ref: contains
        """)
    )
    return spec


def _show(cwd: Path) -> dict[str, Any]:
    shown = _evalsi(cwd, "runs", "show", "latest", "--tasks", "--format", "json")
    assert shown.returncode == 0, shown.stderr
    out: dict[str, Any] = json.loads(shown.stdout)
    return out


def _measure(label: str, steps: list[dict[str, Any]], wall_s: float) -> str:
    """Tokens and their rate over the model calls' own time, and the run's wall time."""
    calls = [s for s in steps if s["type"] == "model_call"]
    seconds = sum(s["usage"].get("latency_ms", 0.0) for s in calls) / 1000.0
    out_tokens = sum(s["usage"].get("output_tokens", 0) for s in calls)
    all_tokens = sum(s["usage"].get("total_tokens", 0) for s in calls)
    rate = f"{all_tokens / seconds:.0f} tokens/s, {out_tokens / seconds:.1f} output tokens/s"
    return (
        f"{label}: {len(calls)} model calls, {all_tokens} tokens ({out_tokens} output) in "
        f"{seconds:.1f} s of model time ({rate if seconds else '-'}); run wall time {wall_s:.1f} s"
    )


def test_the_builtin_agent_calls_a_tool_and_records_the_servers_usage(
    small_model: SmallModel, tmp_path: Path, measured: list[str]
) -> None:
    from evalsi.store import SqlStore

    spec = _write_run(tmp_path, small_model)
    started = time.monotonic()
    ran = _evalsi(tmp_path, "run", "-f", str(spec), "--format", "json")
    wall = time.monotonic() - started
    assert ran.returncode == 0, ran.stderr
    run_id = json.loads(ran.stdout)["run_id"]
    shown = _show(tmp_path)
    assert shown["run_id"] == run_id
    assert shown["infra_errors"] == 0
    tasks = shown["tasks"]
    assert sorted(t["sample_id"] for t in tasks) == ["paris", "tokyo"]
    assert all(t["status"] == "ok" for t in tasks), tasks

    steps = [s for t in tasks for s in t["trajectory"]["steps"]]
    model_calls = [s for s in steps if s["type"] == "model_call"]
    assert model_calls
    for s in model_calls:
        assert s["usage"]["input_tokens"] > 0, s
        assert s["usage"]["output_tokens"] > 0, s
    executed = [
        s
        for s in steps
        if s["type"] == "tool_call" and s["tool"] == "get_weather" and "error" not in s
    ]
    assert executed, f"the model made no tool call the environment ran: {steps}"
    for call in executed:
        assert call["result"] == f"It is sunny and 21 C in {call['arguments']['city']}."
    for t in tasks:  # one turn: the model's tool call, run; then the budget ends the task
        (call,) = [s for s in t["trajectory"]["steps"] if s["type"] == "tool_call"]
        assert t["sample_id"] in call["arguments"]["city"].lower(), call
        assert t["trajectory"]["stop_reason"] == "max_steps"
    # the environment ran the function itself, once per recorded call (tasks run in parallel)
    logged = (tmp_path / "calls.log").read_text().splitlines()
    assert sorted(logged) == sorted(c["arguments"]["city"] for c in executed)

    # the stored run's per-task usage is the server's, summed over the task's model calls
    store = SqlStore.open(tmp_path / ".evalsi" / "evalsi.db")
    try:
        rows = list(store.iter_outputs(run_id))
    finally:
        store.close()
    assert len(rows) == 2
    for row in rows:
        usage = json.loads(row.usage or "{}")
        (task,) = [t for t in tasks if t["sample_id"] == row.record_id]
        calls = [s for s in task["trajectory"]["steps"] if s["type"] == "model_call"]
        assert usage["input_tokens"] == sum(s["usage"]["input_tokens"] for s in calls) > 0
        assert usage["output_tokens"] == sum(s["usage"]["output_tokens"] for s in calls) > 0
    measured.append(_measure("built-in agent", steps, wall))


def test_the_stored_run_keeps_a_cassette(small_model: SmallModel, tmp_path: Path) -> None:
    spec = _write_run(tmp_path, small_model)
    ran = _evalsi(tmp_path, "run", "-f", str(spec), "--format", "json")
    assert ran.returncode == 0, ran.stderr
    from evalsi.store import SqlStore

    store = SqlStore.open(tmp_path / ".evalsi" / "evalsi.db")
    try:
        rows = list(store.iter_outputs(json.loads(ran.stdout)["run_id"]))
    finally:
        store.close()
    for row in rows:
        assert row.cassette, f"task {row.record_id} stored no cassette"
        assert json.loads(row.cassette)["x"][0][0] == "model"
    # and `evalsi replay` rebuilds the run from them
    replayed = _evalsi(tmp_path, "replay", "latest", "--format", "json")
    assert replayed.returncode == 0, replayed.stderr
    out = json.loads(replayed.stdout)
    assert out["replay_of"] == json.loads(ran.stdout)["run_id"]
    assert out.get("infra_errors", 0) == 0


def test_a_task_cassette_records_the_live_model_and_replays_offline(
    small_model: SmallModel,
) -> None:
    """Recorded against the live server, the task replays with the server unreachable: the same
    trajectory, no model call and no tool run."""
    from evalsi.agents import Budgets, Environment, FunctionTool, ToolLoop
    from evalsi.agents._cassette import Tape, taping
    from evalsi.connectors import OpenAICompatible, close_shared_session

    ran: list[str] = []

    def get_weather(city: str) -> str:
        """Today's weather in a city."""
        ran.append(city)
        return f"It is sunny and 21 C in {city}."

    params = {"tool_choice": "auto", "temperature": 0, "max_tokens": 64}

    async def task(base_url: str, tape: Tape, max_steps: int = 1) -> Any:
        model = OpenAICompatible(base_url, small_model.model, params, system=SYSTEM, timeout=300)
        loop = ToolLoop(model, Budgets(max_steps=max_steps))
        try:
            with taping(tape):
                return await loop.run(TASKS[0]["input"], Environment([FunctionTool(get_weather)]))
        finally:
            await close_shared_session()

    recording = Tape()
    live = asyncio.run(task(small_model.base_url, recording))
    cassette = recording.cassette()
    channels = [e.channel for e in cassette]
    assert "model" in channels, channels
    assert ran, live.trajectory
    assert recording.live_calls == len(cassette)

    calls_before = len(ran)
    dead = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    replay = Tape(cassette)
    replayed = asyncio.run(task(dead, replay))
    assert replay.live_calls == 0
    assert len(ran) == calls_before
    assert replayed.output == live.output
    assert replayed.usage.input_tokens == live.usage.input_tokens
    assert [(s.kind, s.name) for s in replayed.trajectory.steps] == [
        (s.kind, s.name) for s in live.trajectory.steps
    ]


def test_the_conversation_goes_back_to_the_server_after_a_tool_call(
    small_model: SmallModel,
) -> None:
    """The second turn sends the model its own tool call and the tool's result."""
    from evalsi.agents import Budgets, Environment, FunctionTool, ToolLoop
    from evalsi.connectors import (
        OpenAICompatible,
        Resilience,
        RetryPolicy,
        close_shared_session,
    )

    def get_weather(city: str) -> str:
        """Today's weather in a city."""
        return f"It is sunny and 21 C in {city}."

    params = {"tool_choice": "auto", "temperature": 0, "max_tokens": 64}
    model = OpenAICompatible(
        small_model.base_url,
        small_model.model,
        params,
        system=SYSTEM,
        timeout=300,
        resilience=Resilience(retry=RetryPolicy(max_attempts=1)),
    )

    async def task() -> Any:
        try:
            return await ToolLoop(model, Budgets(max_steps=2)).run(
                TASKS[0]["input"], Environment([FunctionTool(get_weather)])
            )
        finally:
            await close_shared_session()

    out = asyncio.run(task())
    assert [s.kind for s in out.trajectory.steps][:3] == ["llm_call", "tool_call", "llm_call"]


@pytest.mark.skipif(
    importlib.util.find_spec("evalsi.agents._simulator") is None,
    reason="user simulator not merged yet (no src/evalsi/agents/_simulator.py)",
)
def test_the_user_simulator_talks_to_the_agent(
    small_model: SmallModel, tmp_path: Path, measured: list[str]
) -> None:
    """A conversation: the simulator (the same model, plain chat) answers the agent, which
    answers again. The agent's model gets no ``tool_choice``, so the server leaves its tool
    out of the prompt: with one this model never gives a final answer (see the module's
    docstring), and the user speaks only after an answer."""
    (tmp_path / "weather_tools.py").write_text(textwrap.dedent(TOOLS))
    (tmp_path / "tasks.jsonl").write_text(
        json.dumps({"id": "umbrella", "input": "Hello! I am going to Paris today."}) + "\n"
    )
    spec = tmp_path / "run.yaml"
    spec.write_text(
        textwrap.dedent(f"""\
        apiVersion: evals.si/v1alpha1
        kind: EvalRun
        metadata: {{name: small-model-user}}
        spec:
          target:
            system: "You are a friendly travel assistant. Answer in one or two sentences."
            agent:
              model:
                connector: openai-compatible
                baseUrl: "{small_model.base_url}"
                model: {small_model.model}
                params: {{temperature: 0, max_tokens: 48}}
              maxSteps: 2
              maxDuration: 5m
              user:
                model:
                  connector: openai-compatible
                  baseUrl: "{small_model.base_url}"
                  model: {small_model.model}
                  params: {{temperature: 0, max_tokens: 32}}
                persona: "A traveller who answers in one short sentence."
                goal: "Find out whether to take an umbrella in Paris today."
                maxTurns: 2
          environment:
            tools:
              - function: "weather_tools:get_weather"
          dataset: {{path: tasks.jsonl}}
          evaluators:
            - ref: contains
        """)
    )
    started = time.monotonic()
    ran = _evalsi(tmp_path, "run", "-f", str(spec), "--format", "json")
    wall = time.monotonic() - started
    assert ran.returncode == 0, ran.stderr
    (task,) = _show(tmp_path)["tasks"]
    assert task["status"] == "ok", task
    steps = task["trajectory"]["steps"]
    said = [s for s in steps if s["type"] == "message" and s["name"] == "user"]
    assert len(said) == 1, steps  # maxTurns 2: the sample's input, then one simulated message
    assert said[0]["output"]["text"].strip(), said
    calls = [s for s in steps if s["type"] == "model_call"]
    assert len(calls) == 2, steps  # the agent answered the input and the simulated user
    for s in calls:
        assert s["usage"]["input_tokens"] > 0, s
    assert task["trajectory"]["stop_reason"] == "max_turns"
    measured.append(_measure("user simulator", steps, wall))
