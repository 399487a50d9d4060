"""An agent behind an MCP server (``tests/support/mcp_agent_server.py``, the ``mcp`` SDK) over
stdio and streamable HTTP: the tool that is the agent, with its progress and log messages as
steps; the prompt that is the agent; an ``isError`` answer graded as the agent's failure, a
server dying as infrastructure; a missing tool named at the start; the cassette replaying a
task with no server at all; an EvalRun graded end to end."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from evalsi.agents._cassette import Tape, taping
from evalsi.agents._connectors import ConnectorContext
from evalsi.agents._harness import Final, TaskSetup
from evalsi.agents._mcp_agent import MAX_TEXT, McpAgentHarness, connect
from evalsi.connectors import InfraError
from evalsi.core import Content, Step, UserError
from evalsi.runs._execute import execute_run
from evalsi.specs import AgentSpec, EnvironmentSpec, McpAgentSpec, run_spec_from_yaml
from evalsi.store import SqlStore
from tests.support.asgi_server import _free_port
from tests.support.registry import BUILTINS

ROOT = Path(__file__).resolve().parents[2]
SERVER = str(ROOT / "tests" / "support" / "mcp_agent_server.py")


@pytest.fixture(scope="module")
def http_agent() -> Iterator[str]:
    port = _free_port("127.0.0.1")
    proc = subprocess.Popen(
        [sys.executable, SERVER, "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        import socket

        for _ in range(200):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def _context(**section: Any) -> ConnectorContext:
    spec = McpAgentSpec(**section)

    def no_environment() -> Any:
        raise AssertionError("an MCP agent brings its own tools")

    return ConnectorContext(
        AgentSpec(kind="mcp", mcp=spec, max_seconds=60),
        EnvironmentSpec(tools=()),
        no_environment,
        None,
        "spec.target.agent.mcp",
    )


def _task(text: str) -> TaskSetup:
    return TaskSetup(run_id="r", task_id="s", trial=0, seed=None, input=Content.of_text(text))


async def _play(harness: McpAgentHarness, text: str) -> tuple[list[Step], Final]:
    session = await harness.setup(_task(text))
    steps: list[Step] = []
    async for event in harness.run(session):
        if isinstance(event, Final):
            return steps, event
        steps.append(event)
    raise AssertionError("no Final")


async def _one(text: str, **section: Any) -> tuple[list[Step], Final]:
    ctx = _context(**section)
    async with connect(ctx.agent.mcp, ctx) as harness:  # type: ignore[arg-type]
        return await _play(harness, text)


STDIO = {"command": ("python", SERVER), "tool": "ask"}


def test_the_tool_is_the_agent_with_progress_and_logs_as_steps() -> None:
    steps, final = asyncio.run(_one("work hard", **STDIO))
    assert (final.output.as_text(), final.stop_reason) == ("HARD", "final_answer")
    assert [(s.kind, s.name) for s in steps] == [
        *[("other", "progress")] * 3,
        ("other", "log"),
        ("other", "log"),
        ("tool_call", "ask"),
    ]
    assert steps[0].output == {"progress": 1.0, "total": 3.0, "message": "step 1"}
    assert steps[3].output == {"level": "info", "data": "working on hard"}
    call = steps[-1].tool_call
    assert call is not None
    assert (call.name, call.arguments) == ("ask", {"input": "work hard"})


def test_further_arguments_and_the_input_argument_reach_the_tool(http_agent: str) -> None:
    _, final = asyncio.run(_one("hello", url=http_agent, tool="ask", arguments={"style": "loud"}))
    assert final.output.as_text() == "loud: hello"


def test_an_error_result_is_the_agents_failure() -> None:
    steps, final = asyncio.run(_one("fail now", **STDIO))
    assert final.stop_reason == "error"
    assert final.output.as_text() == "Error executing tool ask: the agent gave up"
    assert steps[-1].error == final.output.as_text()


def test_the_server_dying_mid_call_is_infrastructure() -> None:
    with pytest.raises(InfraError) as e:
        asyncio.run(_one("die now", **STDIO))
    assert e.value.kind == "connection"
    assert "MCP server" in e.value.message


def test_the_prompt_is_the_agent(http_agent: str) -> None:
    steps, final = asyncio.run(
        _one("the budget", url=http_agent, prompt="brief", arguments={"tone": "warm"})
    )
    assert final.output.as_text() == "warm briefing: the budget"
    assert [(s.name, s.output) for s in steps] == [
        ("user", "brief me on the budget"),
        ("assistant", "warm briefing: the budget"),
    ]


def test_a_huge_answer_is_kept_whole_in_the_output_and_cut_in_the_step() -> None:
    steps, final = asyncio.run(_one("huge 200000", **STDIO))
    assert len(final.output.as_text()) == 200_000
    assert len(str(steps[-1].output)) < MAX_TEXT + 100


def test_a_tool_the_server_lacks_stops_the_run_naming_the_field(http_agent: str) -> None:
    with pytest.raises(UserError) as e:
        asyncio.run(_one("x", command=("python", SERVER), tool="nope"))
    assert e.value.message.startswith("spec.target.agent.mcp.tool: MCP server")
    assert "no tool named 'nope'" in e.value.message
    assert e.value.hint == "it has: ask"
    with pytest.raises(UserError) as e:
        asyncio.run(_one("x", url=http_agent, prompt="nope"))
    assert e.value.message.startswith("spec.target.agent.mcp.prompt:")


def test_a_server_that_will_not_start_is_named() -> None:
    with pytest.raises(UserError) as e:
        asyncio.run(_one("x", command=("python", "-c", "import sys; sys.exit(4)"), tool="ask"))
    assert "did not start" in e.value.message
    closed = f"http://127.0.0.1:{_free_port('127.0.0.1')}/mcp"
    with pytest.raises(UserError) as e:
        asyncio.run(_one("x", url=closed, tool="ask"))
    assert "did not start" in e.value.message


def test_a_recorded_task_replays_with_no_server(tmp_path: Path) -> None:
    """Recorded against a copy of the server, replayed after the copy is deleted: a replay
    that tried to start the server would fail."""
    copy = tmp_path / "agent_server.py"
    copy.write_text(Path(SERVER).read_text())

    async def go() -> tuple[Any, Any, Tape, Tape]:
        ctx = _context(command=("python", str(copy)), tool="ask")
        async with connect(ctx.agent.mcp, ctx) as harness:  # type: ignore[arg-type]
            recording = Tape()
            with taping(recording):
                live = await _play(harness, "work twice")
            copy.unlink()
            replay = Tape(recording.cassette())
            with taping(replay):
                again = await _play(harness, "work twice")
        return live, again, recording, replay

    live, again, recording, replay = asyncio.run(go())
    assert [e.channel for e in recording.cassette()] == ["mcp"]
    assert (recording.live_calls, replay.live_calls) == (1, 0)
    assert again == live
    assert live[1].output.as_text() == "TWICE"


def test_an_eval_run_grades_the_mcp_agent(tmp_path: Path) -> None:
    from evalsi.runs import iter_tasks

    rows = [
        {"id": "w", "input": "work fast", "reference": "FAST"},
        {"id": "f", "input": "fail please", "reference": "anything"},
    ]
    (tmp_path / "tasks.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    text = f"""
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: mcp-agent}}
spec:
  target:
    agent:
      mcp: {{command: [python, "{SERVER}"], tool: ask}}
  dataset: {{path: tasks.jsonl}}
  evaluators:
    - ref: exact-match
    - ref: tool-called
      params: {{tool: ask}}
"""
    spec = run_spec_from_yaml(text, base_dir=tmp_path)
    db = SqlStore.open(tmp_path / "s.db")
    result = asyncio.run(execute_run(spec, store=db, registry=BUILTINS))
    assert result.tasks == {"ok": 2}
    tasks = {t["sample_id"]: t for t in iter_tasks(db, result.run_id, 10)}
    verdicts = {k: {v["evaluator"]: v for v in t["scores"]} for k, t in tasks.items()}
    assert tasks["w"]["output"] == "FAST"
    assert tasks["f"]["trajectory"]["stop_reason"] == "error"
    steps = tasks["w"]["trajectory"]["steps"]
    assert steps[-1]["type"] == "tool_call"
    assert steps[-1]["tool"] == "ask"
    assert steps[-1]["arguments"] == {"input": "work fast"}
    assert verdicts["w"]["exact-match"]["scores"] != verdicts["f"]["exact-match"]["scores"]
    assert verdicts["w"]["tool-called"]["scores"] == {"tool-called": True}
