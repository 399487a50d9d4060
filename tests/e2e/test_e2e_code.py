"""The code pack from the CLI, with the commands of docs/guides/packs/code.md as written, through
the real namespaced sandbox: per-candidate verdicts against the hand labels of
examples/code/solutions.jsonl, pass@k over candidate lists against the binomial formula, the
other test shapes, and pass@k from `evalsi run` trials.

Expected values come from the hand labels (``metadata.expected``), never from a run.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from math import comb
from pathlib import Path
from typing import Any

import pytest

from evalsi.core import Outcome
from evalsi.packs.code import find_ruff
from evalsi.sandbox import Level, default_ladder
from evalsi.store import SqlStore
from tests.support.guides import guide_commands, load_jsonl, run_json
from tests.support.stub_llm import OPENAI_PATH, StubLLM

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guides" / "packs" / "code.md"
EXAMPLES = ROOT / "examples" / "code"

pytestmark = pytest.mark.skipif(
    not any(r.available and r.level >= Level.NAMESPACED for r in default_ladder().probe_all()),
    reason="no namespaced sandbox rung on this machine",
)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("code")
    shutil.copytree(EXAMPLES, root / "examples" / "code")
    return root


@pytest.fixture(scope="module")
def outputs(run_evalsi: Callable[..., Any], workdir: Path) -> dict[str, dict[str, Any]]:
    """Every ``evalsi eval`` command of the guide, run once as written: data file → output."""
    commands = guide_commands(GUIDE)
    assert len(commands) == 3
    out = {}
    for args in commands:
        data = args[args.index("--data") + 1].rsplit("/", 1)[-1]
        out[data] = run_json(run_evalsi, workdir, args)
    return out


def stored(workdir: Path, run_id: str) -> dict[tuple[str, str], Any]:
    store = SqlStore.open(workdir / ".evalsi" / "evalsi.db")
    try:
        return {(r.record_id, r.evaluator): r for _, _, r in store.iter_results(run_id)}
    finally:
        store.close()


def pass_at_k(n: int, c: int, k: int) -> float:
    return 1.0 - comb(n - c, k) / comb(n, k)


def test_guide_commands_all_run(outputs: dict[str, dict[str, Any]]) -> None:
    assert sorted(outputs) == ["asserts.jsonl", "samples.jsonl", "solutions.jsonl"]
    for out in outputs.values():
        assert out["status"] == "done"
        assert out["infra_errors"] == 0
        for section in out["isolation"]:
            assert section["level"] == "namespaced"
            assert section["unreported"] == 0


def test_single_candidates_match_the_hand_labels(
    outputs: dict[str, dict[str, Any]], workdir: Path
) -> None:
    rows = load_jsonl(EXAMPLES / "solutions.jsonl")
    assert len({r["metadata"]["problem"] for r in rows}) >= 12
    out = outputs["solutions.jsonl"]
    metrics = {m["metric"]: m for m in out["metrics"]}
    right = [r["metadata"]["expected"] == "correct" for r in rows]
    assert metrics["code-exec-tests"]["n"] == len(rows)
    assert metrics["code-exec-tests"]["errors"] == 0
    assert metrics["code-exec-tests"]["mean"] == pytest.approx(sum(right) / len(rows))
    results = stored(workdir, out["run_id"])
    for row in rows:
        result = results[(row["id"], "code-exec-tests")]
        assert result.outcome is Outcome.SCORED
        main = result.scores[0]
        label = row["metadata"]["expected"]
        assert main.passed is (label == "correct"), (row["id"], main.explanation)
        assert main.metadata["isolation"]["level"] == "namespaced"
        if label == "timeout":
            assert "timed out after 5s" in main.explanation
        if label == "syntax":
            assert "the solution failed to load: SyntaxError" in main.explanation
        if label == "exit":
            assert "SystemExit" in main.explanation


def test_pass_at_k_over_candidate_lists(outputs: dict[str, dict[str, Any]], workdir: Path) -> None:
    labels: dict[str, list[bool]] = {}
    for row in load_jsonl(EXAMPLES / "solutions.jsonl"):
        labels.setdefault(row["metadata"]["problem"], []).append(
            row["metadata"]["expected"] == "correct"
        )
    out = outputs["samples.jsonl"]
    metrics = {m["metric"]: m for m in out["metrics"]}
    for k in (1, 2, 3):
        want = [pass_at_k(len(v), sum(v), k) for v in labels.values()]
        assert metrics[f"pass-at-{k}"]["mean"] == pytest.approx(sum(want) / len(want)), k
    results = stored(workdir, out["run_id"])
    for problem, verdicts in labels.items():
        meta = results[(problem, "code-exec-tests")].scores[0].metadata
        assert [c["passed"] for c in meta["candidates"]] == verdicts, problem


def test_other_test_shapes(outputs: dict[str, dict[str, Any]], workdir: Path) -> None:
    out = outputs["asserts.jsonl"]
    results = stored(workdir, out["run_id"])
    expected = {  # record: (passed, tests passed / total), read from asserts.jsonl by hand
        "asserts/1": (True, "3/3"), "asserts/2": (False, "1/3"),
        "functions/1": (True, "3/3"), "functions/2": (False, "1/3"),
        "list/1": (True, "3/3"), "list/2": (False, "1/3"),
    }  # fmt: skip
    for record, (passed, share) in expected.items():
        main = results[(record, "code-exec-tests")].scores[0]
        assert main.passed is passed, record
        assert main.explanation.startswith(f"{share} tests passed"), main.explanation
        assert results[(record, "compile-check")].scores[0].passed is True
    lint = results[("asserts/2", "lint-check")]
    if find_ruff() is None:
        assert lint.outcome is Outcome.SKIPPED
    else:
        assert lint.scores[0].passed is False  # `import os` unused
        assert lint.scores[0].metadata["findings"][0]["code"] == "F401"
        assert results[("asserts/1", "lint-check")].scores[0].passed is True


def test_run_trials_give_pass_at_k(run_evalsi: Callable[..., Any], workdir: Path) -> None:
    spec = workdir / "examples" / "code" / "run-code.yaml"
    assert "PYTHONPATH=examples/code evalsi run -f examples/code/run-code.yaml" in (
        GUIDE.read_text()
    )
    proc = run_evalsi(
        workdir,
        "run", "-f", spec, "--format", "json",
        env={"PYTHONPATH": str(workdir / "examples" / "code")},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    metric = next(m for m in out["metrics"] if m["metric"] == "code-exec-tests")
    # sampler.py answers trial t with the t-th candidate: the first three of each problem
    firsts: dict[str, list[bool]] = {}
    for row in load_jsonl(EXAMPLES / "solutions.jsonl"):
        got = firsts.setdefault(row["metadata"]["problem"], [])
        if len(got) < 3:
            got.append(row["metadata"]["expected"] == "correct")
    for k in (1, 2, 3):
        want = [pass_at_k(3, sum(v), k) for v in firsts.values()]
        assert metric["pass_at_k"][str(k)] == pytest.approx(sum(want) / len(want)), k
    assert out["isolation"][0]["level"] == "namespaced"


@pytest.mark.parametrize(
    "section",
    [
        "sandbox:\n  drivers: [none]\n",  # no confining rung at all
        "sandbox:\n  drivers: [landlock, none]\n  minIsolation: namespaced\n",  # floor above
    ],
)
def test_without_a_qualifying_rung_nothing_runs_and_the_run_says_so(
    tmp_path: Path, run_evalsi: Callable[..., Any], section: str
) -> None:
    """Remove the capability (here by config): the run stops before any record, exit 2
    naming the sandbox it lacks, and the candidate never ran (its marker is absent)."""
    marker = tmp_path / "ran-unconfined"
    program = f"open({str(marker)!r}, 'w').write('x')\ndef sq(x):\n    return x * x\n"
    row = {
        "id": "r1",
        "output": program,
        "reference": "def check(candidate):\n    assert candidate(3) == 9\n",
        "metadata": {"entry_point": "sq"},
    }
    (tmp_path / "data.jsonl").write_text(json.dumps(row) + "\n")
    (tmp_path / "evalsi.yaml").write_text(section)
    proc = run_evalsi(
        tmp_path,
        "eval",
        "--data",
        "data.jsonl",
        "--evaluators",
        "code-exec-tests",
        "--param",
        "code-exec-tests.min_isolation=confined",
        "--format",
        "json",
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert "error: code-exec-tests runs code only in a sandbox at or above" in proc.stderr
    assert not marker.exists()


def test_a_run_without_a_qualifying_rung_stops_before_its_first_call(
    tmp_path: Path, run_evalsi: Callable[..., Any]
) -> None:
    """As `evalsi eval` does: a Run whose code evaluator has no sandbox here stops before it
    calls the target (exit 2, naming the sandbox it lacks); nothing is spent."""
    row = {
        "id": "r1",
        "input": "write sq",
        "reference": "def check(candidate):\n    assert candidate(3) == 9\n",
        "metadata": {"entry_point": "sq"},
    }
    (tmp_path / "data.jsonl").write_text(json.dumps(row) + "\n")
    (tmp_path / "evalsi.yaml").write_text("sandbox:\n  drivers: [none]\n")
    with StubLLM(answers={"write sq": "def sq(x):\n    return x * x\n"}) as stub:
        spec = {
            "apiVersion": "evals.si/v1alpha1",
            "kind": "EvalRun",
            "metadata": {"name": "code-run"},
            "spec": {
                "target": {
                    "model": {
                        "connector": "openai-compatible",
                        "baseUrl": stub.openai_url,
                        "model": "m",
                    }
                },
                "dataset": {"path": "data.jsonl"},
                "evaluators": [{"ref": "code-exec-tests", "params": {"min_isolation": "confined"}}],
            },
        }
        (tmp_path / "run.yaml").write_text(json.dumps(spec))
        proc = run_evalsi(tmp_path, "run", "-f", "run.yaml")
        assert stub.calls(OPENAI_PATH) == 0
    assert proc.returncode == 2, proc.stderr
    assert "error: code-exec-tests runs code only in a sandbox at or above" in proc.stderr
