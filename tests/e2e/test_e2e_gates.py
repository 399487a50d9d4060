"""`evalsi eval --gate`: exit codes, the JSON "gates" contract, the table section and
`evalsi runs show` reading the stored verdicts back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.proportions import wilson_reference

# 20 records: 16 exact matches (mean 0.8, Wilson 95% low ≈ 0.584), each costing $0.10.
ROWS = [
    {
        "id": f"r{i}",
        "output": "yes" if i % 5 else "no",
        "reference": "yes",
        "usage": {"cost_usd": 0.1},
    }
    for i in range(20)
]
PASSES = "metric('exact-match').mean >= 0.75"
FAILS = "metric('exact-match').ci.low > 0.7"


@pytest.fixture
def data(tmp_path: Path, write_jsonl: Any) -> Path:
    rows = [dict(r) for r in ROWS]
    for r in rows[:8]:
        del r["output"]  # 8 of 20 skipped by every evaluator that requires an output
    write_jsonl(tmp_path / "thin.jsonl", rows)
    path: Path = write_jsonl(tmp_path / "data.jsonl", ROWS)
    return path


def gates_of(proc: Any) -> list[dict[str, Any]]:
    assert "Traceback" not in proc.stderr, proc.stderr
    out = json.loads(proc.stdout)
    assert isinstance(out["gates"], list)
    gates: list[dict[str, Any]] = out["gates"]
    return gates


def test_all_gates_pass_exit_0(cli: Any, data: Path) -> None:
    proc = cli(
        "eval", "--data", data, "--evaluators", "exact-match,cost", "--format", "json",
        "--gate", PASSES, "--gate", "metric('cost').mean <= 0.25",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    gates = gates_of(proc)
    assert gates == [
        {
            "expr": PASSES,
            "passed": True,
            "verdict": "passed",
            "value": 0.8,
            "reason": "0.8 >= 0.75",
        },
        {
            "expr": "metric('cost').mean <= 0.25",
            "passed": True,
            "verdict": "passed",
            "value": pytest.approx(0.1),
            "reason": "0.1 <= 0.25",
        },
    ]


def test_a_failed_gate_exits_1_and_keeps_the_json_contract(cli: Any, data: Path) -> None:
    proc = cli(
        "eval", "--data", data, "--evaluators", "exact-match", "--format", "json",
        "--gate", PASSES, "--gate", FAILS,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    gates = gates_of(proc)
    assert [g["passed"] for g in gates] == [True, False]
    failed = gates[1]
    assert set(failed) >= {"expr", "passed", "value"}
    assert failed["expr"] == FAILS
    # Wilson's low for 16/20, widened to the exact Clopper-Pearson bound (4 failures <= 10).
    assert failed["value"] == pytest.approx(wilson_reference(16, 20)[0], abs=1e-9)
    assert failed["reason"].endswith("needs > 0.7")


def test_inconclusive_alone_exits_2_and_failure_beats_it(
    cli: Any, data: Path, tmp_path: Path
) -> None:
    thin = tmp_path / "thin.jsonl"  # completion 12/20 = 60% < 80%
    proc = cli(
        "eval", "--data", thin, "--evaluators", "exact-match", "--format", "json",
        "--gate", "metric('exact-match').mean >= 0.5",
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    (gate,) = gates_of(proc)
    assert gate["passed"] is None
    assert gate["verdict"] == "inconclusive"
    assert gate["value"] is None
    assert "completion 60% is below 80%" in gate["reason"]
    both = cli(
        "eval", "--data", thin, "--evaluators", "exact-match,cost", "--format", "json",
        "--gate", "metric('exact-match').mean >= 0.5", "--gate", "metric('cost').mean > 1.0",
    )  # fmt: skip
    assert both.returncode == 1, both.stderr  # cost is complete and over budget
    assert [g["verdict"] for g in gates_of(both)] == ["inconclusive", "failed"]
    lenient = cli(
        "eval", "--data", thin, "--evaluators", "exact-match", "--format", "json",
        "--gate", "metric('exact-match').mean >= 0.5", "--min-completion-rate", "0.5",
    )  # fmt: skip
    assert lenient.returncode == 0, lenient.stderr


def test_bad_gate_syntax_exits_2_before_reading_data(cli: Any, user_error: Any) -> None:
    proc = cli(
        "eval", "--data", "does-not-exist.jsonl", "--evaluators", "exact-match",
        "--gate", "metric('exact-match').mean >=",
    )  # fmt: skip
    user_error(proc, "gate 1", "syntax error", "column 30")
    unknown = cli(
        "eval", "--data", "does-not-exist.jsonl", "--evaluators", "exact-match",
        "--gate", PASSES, "--gate", "metric('llm-judge').ci.low > 0.6",
    )  # fmt: skip
    user_error(unknown, "gate 2", "no evaluator 'llm-judge'", "column 8", "exact-match")


def test_bad_rate_exits_2(cli: Any, data: Path, user_error: Any) -> None:
    proc = cli(
        "eval", "--data", data, "--evaluators", "exact-match",
        "--gate", PASSES, "--max-error-rate", "1.5",
    )  # fmt: skip
    user_error(proc, "max_evaluator_error_rate must be a number between 0 and 1")


def test_table_prints_a_gates_section_after_the_metrics(cli: Any, data: Path) -> None:
    proc = cli(
        "eval", "--data", data, "--evaluators", "exact-match", "--gate", PASSES, "--gate", FAILS
    )
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout
    assert out.index("exact-match  exact-match") < out.index("\ngates\n")
    assert f"✔ passed  {PASSES}" in out
    assert f"✘ failed  {FAILS}" in out


def test_ascii_terminals_get_plain_marks(cli: Any, data: Path) -> None:
    proc = cli(
        "eval", "--data", data, "--evaluators", "exact-match", "--gate", PASSES, "--gate", FAILS,
        env={"PYTHONIOENCODING": "ascii:replace"},
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert f"+ passed  {PASSES}" in proc.stdout
    assert f"x failed  {FAILS}" in proc.stdout
    assert "✔" not in proc.stdout


def test_markdown_has_a_gates_table(cli: Any, data: Path) -> None:
    proc = cli(
        "eval", "--data", data, "--evaluators", "exact-match", "--format", "md", "--gate", PASSES
    )
    assert proc.returncode == 0, proc.stderr
    assert "gates\n\n| verdict | gate | value | reason |" in proc.stdout


def test_runs_show_prints_the_stored_gates(cli: Any, data: Path) -> None:
    ran = cli(
        "eval", "--data", data, "--evaluators", "exact-match", "--format", "json",
        "--gate", PASSES, "--gate", FAILS,
    )  # fmt: skip
    run_id = json.loads(ran.stdout)["run_id"]
    shown = cli("runs", "show", run_id, "--format", "json")
    assert shown.returncode == 0, shown.stderr
    stored = json.loads(shown.stdout)
    assert stored["gates"] == json.loads(ran.stdout)["gates"]
    assert stored["spec"]["gates"] == [PASSES, FAILS]
    table = cli("runs", "show", run_id)
    assert table.returncode == 0, table.stderr
    assert "\ngates\n" in table.stdout
    assert f"✘ failed  {FAILS}" in table.stdout


def test_no_gates_keeps_exit_0_and_an_empty_list(cli: Any, data: Path) -> None:
    proc = cli("eval", "--data", data, "--evaluators", "exact-match", "--format", "json")
    assert proc.returncode == 0
    assert gates_of(proc) == []
    table = cli("eval", "--data", data, "--evaluators", "exact-match")
    assert "gates" not in table.stdout
