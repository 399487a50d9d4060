"""``bfcl-ast`` equals BFCL's own AST checker on golden vectors (made by
``tests/support/bfcl_golden.py`` with bfcl-eval 2026.3.23), and both bench evaluators give
the gold answers 1 and wrong ones 0 in every category."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

import evalsi
from evalsi.benchmarks import import_bfcl
from evalsi.packs.bench import check_calls, parse_call

ROOT = Path(__file__).resolve().parents[4]
GOLDEN = Path(__file__).with_name("golden_bfcl_ast.jsonl")
DATA = ROOT / "examples" / "benchmarks" / "bfcl"


def _vectors() -> list[dict[str, Any]]:
    return [json.loads(line) for line in GOLDEN.read_text().splitlines()]


def test_every_golden_verdict_is_bfcls() -> None:
    vectors = _vectors()
    assert len(vectors) > 300
    assert {v["valid"] for v in vectors} == {True, False}  # the vectors can tell them apart
    assert len({v["error_type"] for v in vectors}) >= 8
    for v in vectors:
        got = check_calls(
            v["functions"], v["calls"], v["possible_answer"], v["category"],
            underscore_to_dot=v["underscore_to_dot"],
        )  # fmt: skip
        assert (got.valid, got.error_type) == (v["valid"], v["error_type"]), (v["id"], v["case"])


@pytest.fixture
def rows(tmp_path: Path) -> list[dict[str, Any]]:
    out = import_bfcl(DATA, tmp_path, with_gold=True)
    return [json.loads(line) for line in out.dataset.read_text().splitlines()]


def _means(rows: list[dict[str, Any]], evaluator: str, **params: Any) -> dict[str, float]:
    means = {}
    for category in sorted({r["metadata"]["bfcl_category"] for r in rows}):
        subset = [r for r in rows if r["metadata"]["bfcl_category"] == category]
        result = evalsi.evaluate(subset, [evaluator], params={evaluator: params}, store=":memory:")
        means[category] = result.metric(evaluator).mean
    return means


def test_gold_answers_score_one_in_every_ast_category(rows: list[dict[str, Any]]) -> None:
    ast_rows = [r for r in rows if "possible_answer" in r["reference"]]
    assert _means(ast_rows, "bfcl-ast") == {
        "multiple": 1.0, "parallel": 1.0, "parallel_multiple": 1.0, "simple_python": 1.0,
    }  # fmt: skip


def _spoil(row: dict[str, Any]) -> dict[str, Any]:
    steps = row["trajectory"]["steps"]
    args = steps[0]["tool_call"]["arguments"]
    key = sorted(args)[0]
    value = args[key]
    args[key] = "nonsense" if not isinstance(value, str) else 12345
    return row


def test_wrong_answers_score_zero_in_every_category(rows: list[dict[str, Any]]) -> None:
    ast_rows = [_spoil(r) for r in rows if "possible_answer" in r["reference"]]
    assert set(_means(ast_rows, "bfcl-ast").values()) == {0.0}
    exec_rows = [_spoil(r) for r in rows if "ground_truth" in r["reference"]]
    sys.path.insert(0, str(DATA))
    try:
        assert set(_means(exec_rows, "bfcl-exec", functions="bfcl_functions").values()) == {0.0}
    finally:
        sys.path.remove(str(DATA))


def test_gold_calls_run_to_the_ground_truths_results(rows: list[dict[str, Any]]) -> None:
    exec_rows = [r for r in rows if "ground_truth" in r["reference"]]
    sys.path.insert(0, str(DATA))
    try:
        means = _means(exec_rows, "bfcl-exec", functions="bfcl_functions")
    finally:
        sys.path.remove(str(DATA))
    assert means == {"exec_multiple": 1.0, "exec_parallel": 1.0, "exec_simple": 1.0}


def test_no_calls_and_reordered_parallel_calls(rows: list[dict[str, Any]]) -> None:
    parallel = [r for r in rows if r["metadata"]["bfcl_category"] == "parallel"]
    for r in parallel:
        r["trajectory"]["steps"].reverse()  # any order is fine for parallel
    assert _means(parallel, "bfcl-ast") == {"parallel": 1.0}
    for r in parallel:
        r["trajectory"]["steps"] = []
    assert _means(parallel, "bfcl-ast") == {"parallel": 0.0}


def test_ground_truth_calls_are_parsed_never_evaluated() -> None:
    assert parse_call("gcd(a=84, b=[1, 2])") == ("gcd", {"a": 84, "b": [1, 2]})
    with pytest.raises(ValueError, match="not a literal"):
        parse_call("gcd(a=__import__('os').getpid())")
    with pytest.raises(ValueError, match="expected name"):
        parse_call("gcd(84, 36)")
