"""Terminal-Bench and Harbor tasks on evalsi's harness, on real bubblewrap: the example tasks
(two in each layout) imported, then run by the oracle (the scripted model plays each task's
solution through the sandbox's exec tool) and by an agent that does nothing. Every task the
oracle runs is resolved and none of the idle agent's is, as the benchmarks' own verdicts
(pytest's summary, Harbor's reward file) decide."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import evalsi
from evalsi.benchmarks import import_terminal_bench
from evalsi.sandbox import Level, Sandbox, SandboxSpec, SandboxUnavailable

ROOT = Path(__file__).resolve().parents[2]
TASKS = [ROOT / "examples/benchmarks/terminal-bench", ROOT / "examples/benchmarks/harbor"]


def _bwrap() -> str:
    try:
        Sandbox.create(SandboxSpec(min_isolation=Level.NAMESPACED)).destroy()
    except SandboxUnavailable as e:
        return str(e)
    return ""


pytestmark = pytest.mark.skipif(bool(_bwrap()), reason=f"no namespaced sandbox: {_bwrap()}")


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tb")
    result = import_terminal_bench(TASKS, out)
    assert result.count == 4
    assert result.spec == out / "run.yaml"
    return out


def _run(spec: Path, variant: str, store: Path) -> evalsi.RunResult:
    text = spec.read_text().replace("model: gold", f"model: {variant}")
    path = spec.with_name(f"run-{variant}.yaml")
    path.write_text(text)
    return evalsi.run(path, store=store)


def test_the_oracle_resolves_every_task(imported: Path, tmp_path: Path) -> None:
    result = _run(imported / "run.yaml", "gold", tmp_path / "e.db")
    assert result.tasks == {"ok": 4}
    success = result.metric("task-success")
    assert success.n == 4
    assert success.mean == 1.0


def test_an_agent_that_does_nothing_resolves_none(imported: Path, tmp_path: Path) -> None:
    result = _run(imported / "run.yaml", "empty", tmp_path / "e.db")
    assert result.tasks == {"ok": 4}
    success = result.metric("task-success")
    assert success.n == 4
    assert success.mean == 0.0
    # the verifier was staged (check 1 passed) and the tests ran and failed (check 2)
    assert result.metric("task-success", "checks-passed").mean == 0.5


def test_a_wrong_answer_fails_the_benchmarks_own_tests(imported: Path, tmp_path: Path) -> None:
    rows = [json.loads(x) for x in (imported / "tasks.jsonl").read_text().splitlines()]
    for row in rows:  # the oracle's script, then a line that spoils the result
        gold = row["metadata"]["known"]["gold"]
        call = gold["steps"][0]["tool_call"]["arguments"]["command"]
        call[2] += "\necho spoiled > hello.txt; echo 1 > sum.txt; echo 99 > count.txt\n"
        call[2] += "echo '{}' > config.json\n"
    (imported / "wrong.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    spec = (imported / "run.yaml").read_text().replace("path: tasks.jsonl", "path: wrong.jsonl")
    (imported / "run-wrong.yaml").write_text(spec)
    result = evalsi.run(imported / "run-wrong.yaml", store=tmp_path / "e.db")
    assert result.metric("task-success").mean == 0.0
