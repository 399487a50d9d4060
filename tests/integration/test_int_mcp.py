"""``evalsi mcp`` over stdio, from the ``mcp`` SDK's client in another process: the tools and
their proto-derived schemas, refusals as tool errors, a run with progress and cancellation,
a report resource, and the Phase 6 exit — a scripted agent runs a spec, changes its target,
runs again and gets a paired regression verdict from ``compare_runs``."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from evalsi.server._mcp import TOOLS, tool_schemas

pytestmark = pytest.mark.anyio

EVALSI = str(Path(sys.executable).with_name("evalsi"))
N = 40
TARGETS = """
import time


def right(input):
    return input.upper()


def wrong(input):  # the change under test: a third of the answers break
    n = int(input.split("-")[1])
    return input.upper() if n % 3 else "?"


def slow(input):
    time.sleep(0.5)
    return input.upper()
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "mcp_targets.py").write_text(TARGETS)
    rows = [{"id": f"s{i}", "input": f"q-{i}", "reference": f"Q-{i}"} for i in range(N)]
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path


def spec(target: str, *, concurrency: int = 8) -> dict[str, Any]:
    return {
        "apiVersion": "evals.si/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": f"mcp-{target}"},
        "spec": {
            "target": {"python": f"mcp_targets:{target}"},
            "dataset": {"path": "tasks.jsonl"},
            "evaluators": [{"ref": "exact-match"}],
            "maxConcurrency": concurrency,
        },
    }


@asynccontextmanager
async def evalsi_mcp(cwd: Path) -> AsyncIterator[Client]:
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    params = StdioServerParameters(command=EVALSI, args=["mcp"], cwd=str(cwd), env=env)
    async with Client(params) as client:
        yield client


def body(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content[0].text
    doc = json.loads(result.content[0].text)
    assert doc == result.structured_content
    return doc


async def test_the_tools_are_listed_with_the_schemas_of_their_request_messages(work: Path) -> None:
    async with evalsi_mcp(work) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
    assert list(listed) == [t.name for t in TOOLS]
    schemas = tool_schemas()
    for name, tool in listed.items():
        assert tool.input_schema == schemas[name], name  # one schema: the proto's
        assert tool.input_schema["type"] == "object"
        assert tool.description
    assert listed["get_run"].annotations.read_only_hint is True
    assert listed["start_run"].annotations.read_only_hint is False
    assert "run" in listed["start_run"].input_schema["properties"]


async def test_evaluate_grades_and_bad_input_is_a_tool_error_naming_the_field(work: Path) -> None:
    async with evalsi_mcp(work) as client:
        ok = body(
            await client.call_tool(
                "evaluate",
                {
                    "records": [
                        {"id": "1", "output": {"text": "Paris"}, "reference": {"text": "Paris"}},
                        {"id": "2", "output": {"text": "Lyon"}, "reference": {"text": "Paris"}},
                    ],
                    "evaluators": [{"ref": "exact-match"}],
                },
            )
        )
        assert ok["metrics"][0]["mean"] == 0.5
        unknown = await client.call_tool("evaluate", {"recordz": []})
        assert unknown.is_error
        assert "recordz" in unknown.content[0].text
        bad_type = await client.call_tool("get_run", {"id": 5})
        assert bad_type.is_error
        assert "invalid_argument" in bad_type.content[0].text
        missing = await client.call_tool("get_run", {"id": "no-such-run"})
        assert missing.is_error
        assert missing.content[0].text.startswith("not_found")
        no_tool = await client.call_tool("drop_tables", {})
        assert no_tool.is_error
        assert "list_evaluators" in no_tool.content[0].text
        evaluators = body(await client.call_tool("list_evaluators", {}))
        assert any(e["ref"]["name"] == "exact-match" for e in evaluators["evaluators"])


async def test_a_coding_agent_runs_changes_its_target_and_gets_a_regression_verdict(
    work: Path,
) -> None:
    progress: list[tuple[float, float | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total))

    async with evalsi_mcp(work) as client:
        first = body(
            await client.call_tool(
                "start_run", {"run": spec("right")}, progress_callback=on_progress
            )
        )["run"]
        assert first["status"] == "done"
        assert first["metrics"][0]["mean"] == 1.0
        second = body(await client.call_tool("start_run", {"run": spec("wrong")}))["run"]
        assert second["status"] == "done"
        assert second["exitCode"] == 0
        compared = body(
            await client.call_tool(
                "compare_runs", {"baseline": first["id"], "candidate": second["id"]}
            )
        )
        metric = compared["metrics"][0]
        assert metric["verdict"] == "regressed"
        assert int(metric["nPaired"]) == N  # int64: a string in proto3 JSON
        assert metric["delta"] == pytest.approx(-(N // 3 + 1) / N)
        assert metric["ci"]["high"] < 0
        report = await client.read_resource(f"evalsi://runs/{second['id']}/report.md")
        text = report.contents[0].text
        assert second["id"] in text
        assert "exact-match" in text
        listed = body(await client.call_tool("list_runs", {}))
        assert {r["id"] for r in listed["runs"]} >= {first["id"], second["id"]}
    # The runs are ordinary runs of the store: the CLI sees them.
    assert (work / ".evalsi" / "evalsi.db").is_file()
    if progress:  # a fast run may end before the first look
        assert all(total in (None, float(N)) for _, total in progress)


async def test_progress_is_reported_and_a_cancelled_call_cancels_its_run(work: Path) -> None:
    progress: list[float] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(done)

    async with evalsi_mcp(work) as client:
        with anyio.move_on_after(2.5):
            await client.call_tool(
                "start_run", {"run": spec("slow", concurrency=2)}, progress_callback=on_progress
            )
        assert progress, "no progress notification while the run went on"
        run = body(await client.call_tool("get_run", {"id": "latest"}))["run"]
        for _ in range(50):
            if run["status"] not in ("queued", "running"):
                break
            await anyio.sleep(0.2)
            run = body(await client.call_tool("get_run", {"id": run["id"]}))["run"]
        assert run["status"] == "cancelled"
        assert max(progress) < N  # stopped on the way


async def test_a_dry_run_and_a_spec_error_answer_without_running(work: Path) -> None:
    async with evalsi_mcp(work) as client:
        dry = body(await client.call_tool("start_run", {"run": spec("right"), "dryRun": True}))
        assert dry["run"]["status"] == "planned"  # answered at once: nothing ran
        bad = spec("right")
        bad["spec"]["dataset"] = {"path": "missing.jsonl"}
        refused = await client.call_tool("start_run", {"run": bad})
        assert refused.is_error
        assert "missing.jsonl" in refused.content[0].text
        typo = spec("right")
        typo["spec"]["evaluatorz"] = []
        refused = await client.call_tool("start_run", {"run": typo})
        assert refused.is_error
        assert "evaluatorz" in refused.content[0].text
