"""The rag pack from the CLI, with the commands of docs/guides/packs/rag.md as written: the
retrieval metrics on examples/rag/rag.jsonl, and judge metrics against the stub judge server
through the example's judges.yaml."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evalsi.core import Outcome
from evalsi.store import SqlStore
from tests.support.stub_llm import OPENAI_PATH, StubLLM

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guides" / "packs" / "rag.md"
RETRIEVAL = (
    "evalsi eval --data examples/rag/rag.jsonl --evaluators context-precision,context-recall "
    "--format json"
)
JUDGED = (
    "evalsi eval --data examples/rag/rag.jsonl --evaluators "
    "faithfulness,answer-relevance,context-relevance --judges examples/rag/judges.yaml "
    "--format json"
)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A copy of examples/rag under a temporary working directory (results stored there)."""
    shutil.copytree(ROOT / "examples" / "rag", tmp_path / "examples" / "rag")
    return tmp_path


def documented(command: str) -> list[str]:
    """``command``'s arguments, after checking the guide shows it as written."""
    text = GUIDE.read_text().replace("\\\n    ", "")
    assert f"$ {command}" in text, f"the guide no longer shows: {command}"
    return command.split()[1:]


def expected_retrieval() -> dict[str, float]:
    """Mean precision and recall of the example, from the textbook definitions."""
    precision, recall = [], []
    for line in (ROOT / "examples" / "rag" / "rag.jsonl").read_text().splitlines():
        row = json.loads(line)
        ref = row["reference"]
        if not isinstance(ref, dict):
            continue  # no labels: skipped
        ids = ref["context_ids"]
        relevant = {k for k, v in ids.items() if v > 0} if isinstance(ids, dict) else set(ids)
        ranked = [c["id"] for c in row["context"]]
        hits = sum(d in relevant for d in ranked)
        precision.append(hits / len(ranked))
        recall.append(len(set(ranked) & relevant) / len(relevant))
    return {
        "context-precision": sum(precision) / len(precision),
        "context-recall": sum(recall) / len(recall),
    }


def test_retrieval_example_command(run_evalsi: Callable[..., Any], workdir: Path) -> None:
    proc = run_evalsi(workdir, *documented(RETRIEVAL))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    metrics = {m["metric"]: m for m in out["metrics"]}
    want = expected_retrieval()
    for name, mean in want.items():
        assert metrics[name]["mean"] == pytest.approx(mean, abs=1e-12)
        assert (metrics[name]["n"], metrics[name]["skipped"], metrics[name]["errors"]) == (7, 1, 0)
    assert 0 < want["context-precision"] < want["context-recall"] < 1
    store = SqlStore.open(workdir / ".evalsi" / "evalsi.db")
    try:
        results = {(r.record_id, r.evaluator): r for _, _, r in store.iter_results(out["run_id"])}
    finally:
        store.close()
    skipped = results[("python", "context-recall")]
    assert skipped.outcome is Outcome.SKIPPED
    assert skipped.reason.startswith("record has no relevance labels")
    missed = results[("shakespeare", "context-recall")].scores[0]
    assert missed.explanation == (
        "no relevant chunk in the 3 retrieved; 0 of 1 relevant chunks found (missing: shakes-1)"
    )


# One verdict that fits all three metrics' formats (each reads its own key); every example
# record retrieved three chunks.
VERDICT = json.dumps(
    {
        "claims": [
            {"claim": "The answer's first fact.", "supported": True},
            {
                "claim": "The answer's second fact.",
                "supported": False,
                "reason": "no passage states it",
            },
        ],
        "statements": [
            {"statement": "A relevant statement.", "relevant": True},
            {"statement": "Another relevant one.", "relevant": True},
            {"statement": "An aside.", "relevant": False, "reason": "not asked"},
        ],
        "chunks": [
            {"chunk": 1, "relevant": True},
            {"chunk": 2, "relevant": False, "reason": "another topic"},
            {"chunk": 3, "relevant": True},
        ],
    }
)


def test_judged_example_command_against_a_stub_judge(
    run_evalsi: Callable[..., Any], workdir: Path
) -> None:
    judges = workdir / "examples" / "rag" / "judges.yaml"
    with StubLLM(default=VERDICT) as stub:
        text = judges.read_text()
        assert "http://127.0.0.1:8000/v1" in text
        judges.write_text(text.replace("http://127.0.0.1:8000/v1", stub.openai_url))
        proc = run_evalsi(workdir, *documented(JUDGED))
        calls = stub.calls(OPENAI_PATH)
        sent = stub.requests(OPENAI_PATH)[0].body
    assert proc.returncode == 0, proc.stderr
    assert calls == 3 * 8  # three metrics, eight records, one call each
    assert sent["model"] == "qwen2.5-7b-instruct"
    out = json.loads(proc.stdout)
    metrics = {m["metric"]: m for m in out["metrics"]}
    assert metrics["faithfulness"]["mean"] == pytest.approx(0.5)
    assert metrics["answer-relevance"]["mean"] == pytest.approx(2 / 3)
    assert metrics["context-relevance"]["mean"] == pytest.approx(2 / 3)
    assert all(m["n"] == 8 and m["errors"] == 0 for m in metrics.values())
    store = SqlStore.open(workdir / ".evalsi" / "evalsi.db")
    try:
        results = {(r.record_id, r.evaluator): r for _, _, r in store.iter_results(out["run_id"])}
    finally:
        store.close()
    faithful = results[("dna", "faithfulness")].scores[0]
    assert faithful.explanation == (
        '1 of 2 claims not supported by the context: "The answer\'s second fact." '
        "(no passage states it)"
    )
    relevance = results[("everest", "context-relevance")].scores[0]
    assert relevance.explanation == (
        "1 of 3 chunks irrelevant to the question: [2] everest-2 (another topic)"
    )
