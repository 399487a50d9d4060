"""An agent from production to a regression suite and back, as a user runs it with the example
of examples/agents-shadow: the weather agent over the stub model gets 3 of 12 cities wrong;
its failing tasks are promoted; a better candidate (another scripted model) shadowed on them
exits 0, a worse one shadowed on every promoted task exits 1; the candidates' trajectories are
their own (their model and the tool were called again), never the recorded ones."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.stub_llm import OPENAI_PATH, StubLLM

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agents-shadow"
PORTS = {"recorded": 18095, "better": 18096, "worse": 18097}
FAILING = ["lima", "riga", "hanoi"]


@pytest.fixture
def stubs(tmp_path: Path) -> Iterator[dict[str, StubLLM]]:
    """The example copied to ``tmp_path`` with each spec pointing at its own stub model."""
    shutil.copytree(EXAMPLE, tmp_path, dirs_exist_ok=True)
    started: dict[str, StubLLM] = {}
    try:
        for name, port in PORTS.items():
            script = json.loads((EXAMPLE / f"{name}-script.json").read_text())
            started[name] = StubLLM(**script).start()
            spec = tmp_path / f"{name}.yaml"
            text = spec.read_text().replace(f"http://127.0.0.1:{port}/v1", started[name].openai_url)
            assert text != spec.read_text()
            spec.write_text(text)
        yield started
    finally:
        for stub in started.values():
            stub.stop()


def _json(done: Any) -> Any:
    assert "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout)


def _answers(run_evalsi: Any, tmp: Path, run_id: str, env: dict[str, str]) -> dict[str, Any]:
    """Each task's final answer and the tool results its trajectory holds, by sample id."""
    done = run_evalsi(tmp, "runs", "show", run_id, "--tasks", "--format", "json", env=env)
    assert done.returncode == 0, done.stderr
    out = {}
    for task in _json(done)["tasks"]:
        steps = task["trajectory"]["steps"]
        tools = [s.get("result") for s in steps if s["type"] == "tool_call"]
        out[task["sample_id"]] = (task["output"], tools)
    return out


def test_promote_failing_agent_tasks_then_shadow_better_and_worse(
    run_evalsi: Any, tmp_path: Path, stubs: dict[str, StubLLM]
) -> None:
    paths = [p for p in (os.environ.get("PYTHONPATH"), str(tmp_path)) if p]
    env = {"PYTHONPATH": os.pathsep.join(paths)}
    run = run_evalsi(tmp_path, "run", "-f", "recorded.yaml", "--format", "json", env=env)
    assert run.returncode == 0, run.stderr
    run_id = _json(run)["run_id"]
    recorded_calls = stubs["recorded"].calls(OPENAI_PATH)
    assert recorded_calls == 24  # a tool call, then the answer, per city

    failing = run_evalsi(tmp_path, "promote", "--run", run_id, "--failing", "-o", "failing.jsonl")
    assert failing.returncode == 0, failing.stderr
    every = run_evalsi(tmp_path, "promote", "--run", run_id, "-o", "all.jsonl")
    assert every.returncode == 0, every.stderr
    rows = [json.loads(line) for line in (tmp_path / "failing.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == FAILING
    for row in rows:
        assert row["output"].startswith("Sunny in")
        assert [s["output"] for s in row["trajectory"]["steps"] if s["kind"] == "tool_call"] == [
            f"{row['id']}: " + row["reference"].split()[0].lower()
        ]
        assert row["metadata"]["promoted"]["run_id"] == run_id

    better = run_evalsi(
        tmp_path, "shadow", "-f", "better.yaml", "--data", "failing.jsonl", "--format", "json",
        env=env,
    )  # fmt: skip
    assert better.returncode == 0, better.stderr
    doc = _json(better)
    (m,) = doc["comparison"]["metrics"]
    assert (m["n_paired"], m["mean_a"], m["mean_b"]) == (3, 0.0, 1.0)
    assert doc["regressions"] == []
    assert doc["comparison"]["warnings"] == []
    assert stubs["better"].calls(OPENAI_PATH) == 6  # the candidate's own model, 2 calls a row
    assert stubs["recorded"].calls(OPENAI_PATH) == recorded_calls  # never asked again
    answers = _answers(run_evalsi, tmp_path, doc["candidate_run"], env)
    recorded = {r["id"]: r["output"] for r in rows}
    assert sorted(answers) == sorted(FAILING)
    for sample, (output, tools) in answers.items():
        assert output != recorded[sample]  # its own answer, not the recorded one
        assert output == next(r["reference"] for r in rows if r["id"] == sample)
        assert len(tools) == 1
        assert tools[0].startswith(f"{sample}: ")  # the tool ran again for the candidate

    worse = run_evalsi(
        tmp_path, "shadow", "-f", "worse.yaml", "--data", "all.jsonl", "--format", "json",
        env=env,
    )  # fmt: skip
    assert worse.returncode == 1, worse.stderr
    doc = _json(worse)
    (reg,) = doc["regressions"]
    assert (reg["metric"], reg["n_paired"]) == ("exact-match", 12)
    assert (reg["mean_recorded"], reg["mean_candidate"]) == (0.75, 0.0)
    assert reg["ci"][1] < 0
    assert stubs["worse"].calls(OPENAI_PATH) == 24
    assert {o for o, _ in _answers(run_evalsi, tmp_path, doc["candidate_run"], env).values()} == {
        "It is nice out."
    }
