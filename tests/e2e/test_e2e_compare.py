"""`evalsi compare RUN_A RUN_B` as a user runs it: the JSON contract, the table and Markdown,
exit codes (0 whatever the verdicts: compare reports, it does not gate; 2 for bad input), and
errors without a traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

N = 60


def rows(right_every: int) -> list[dict[str, Any]]:
    """Answers to the same N questions; one in ``right_every`` is right."""
    return [
        {
            "id": f"q{i}",
            "output": "Paris" if i % right_every == 0 else "Lyon",
            "reference": "Paris",
        }
        for i in range(N)
    ]


def eval_run(cli: Any, json_out: Any, data: str, *extra: str) -> str:
    out = json_out(
        cli(
            "eval",
            "--data",
            data,
            "--evaluators",
            "exact-match,contains,length",
            "--store",
            "s.db",
            "--format",
            "json",
            *extra,
        )
    )
    return str(out["run_id"])


@pytest.fixture
def two_runs(cli: Any, write_jsonl: Any, json_out: Any, tmp_path: Path) -> tuple[str, str]:
    """A baseline right 1 time in 4 and a candidate right 9 times in 10 (a clear improvement)."""
    write_jsonl(tmp_path / "a.jsonl", rows(4))
    b_rows = rows(1)
    for row in b_rows[::10]:
        row["output"] = "Lyon"
    write_jsonl(tmp_path / "b.jsonl", b_rows)
    return eval_run(cli, json_out, "a.jsonl"), eval_run(cli, json_out, "b.jsonl")


def test_json_is_one_object_with_the_contract(
    cli: Any, json_out: Any, two_runs: tuple[str, str]
) -> None:
    a, b = two_runs
    out = json_out(cli("compare", a, b, "--store", "s.db", "--format", "json"))
    assert out["run_a"] == a
    assert out["run_b"] == b
    assert len(out["dataset_versions"]) == 2
    assert all(v.startswith("sha256:") for v in out["dataset_versions"])
    assert isinstance(out["warnings"], list)
    assert any(w.startswith("dataset versions differ") for w in out["warnings"])
    assert out["unmatched"] == []
    by_name = {m["metric"]: m for m in out["metrics"]}
    assert list(by_name) == ["exact-match", "contains", "length"]
    for m in out["metrics"]:
        assert {
            "evaluator",
            "metric",
            "kind",
            "n_paired",
            "mean_a",
            "mean_b",
            "delta",
            "ci",
            "ci_method",
            "p_value",
            "mcnemar",
            "verdict",
            "mde",
        } <= set(m)
        assert m["n_paired"] == N
        assert len(m["ci"]) == 2
        assert m["ci_method"] == "paired-bootstrap-percentile"
    em = by_name["exact-match"]
    assert em["kind"] == "passed"
    assert em["mean_a"] == pytest.approx(15 / 60)
    assert em["mean_b"] == pytest.approx(54 / 60)
    assert em["delta"] == pytest.approx(39 / 60)
    assert em["verdict"] == "improved"
    # Right in A and wrong in B: q0, q20, q40 (multiples of 4 and of 10).
    assert em["mcnemar"]["b10"] == 3
    assert em["mcnemar"]["b01"] == 42
    assert em["mcnemar"]["method"] == "chi2"
    length = by_name["length"]
    assert length["kind"] == "number"
    assert length["mcnemar"] is None
    assert length["verdict"] == "changed"  # longer answers; length has no better direction


def test_a_regression_still_exits_0(cli: Any, json_out: Any, two_runs: tuple[str, str]) -> None:
    a, b = two_runs
    out = json_out(cli("compare", b, a, "--store", "s.db", "--format", "json"))
    verdicts = {m["metric"]: m["verdict"] for m in out["metrics"]}
    assert verdicts["exact-match"] == "regressed"
    assert verdicts["contains"] == "regressed"


def test_table_and_markdown(cli: Any, two_runs: tuple[str, str]) -> None:
    a, b = two_runs
    table = cli("compare", a, b, "--store", "s.db")
    assert table.returncode == 0, table.stderr
    assert table.stderr == ""
    lines = table.stdout.splitlines()
    assert lines[0].startswith(f"compare A {a} → B {b}")
    header = lines[1].split()
    assert header[:6] == ["evaluator", "metric", "n", "A", "B", "Δ"]
    assert "95%" in lines[1]
    assert "verdict" in lines[1]
    assert any(line.startswith("exact-match") and "improved" in line for line in lines)
    assert any(line.startswith("warning: dataset versions differ") for line in lines)
    md = cli("compare", a, b, "--store", "s.db", "--format", "md")
    assert md.returncode == 0, md.stderr
    assert "| evaluator | metric | n | A | B | Δ |" in md.stdout
    assert "- warning: dataset versions differ" in md.stdout


def test_metric_filter_alpha_and_seed(cli: Any, json_out: Any, two_runs: tuple[str, str]) -> None:
    a, b = two_runs
    args = ("compare", a, b, "--store", "s.db", "--format", "json")
    out = json_out(cli(*args, "--metric", "exact-match", "--alpha", "0.1", "--seed", "5"))
    assert [m["metric"] for m in out["metrics"]] == ["exact-match"]
    assert out["level"] == pytest.approx(0.9)
    assert out["seed"] == 5
    both = json_out(cli(*args, "--metric", "exact-match,length"))
    assert [m["metric"] for m in both["metrics"]] == ["exact-match", "length"]
    again = json_out(cli(*args, "--metric", "exact-match", "--metric", "length"))
    assert again == both  # same seed, same numbers
    table = cli("compare", a, b, "--store", "s.db", "--alpha", "0.1")
    assert "90% CI" in table.stdout


def test_params_and_missing_records_are_warnings(
    cli: Any, write_jsonl: Any, json_out: Any, tmp_path: Path
) -> None:
    write_jsonl(tmp_path / "a.jsonl", rows(2))
    write_jsonl(tmp_path / "b.jsonl", rows(2)[5:])
    a = eval_run(cli, json_out, "a.jsonl")
    b = eval_run(cli, json_out, "b.jsonl", "--param", "exact-match.ignore_case=true")
    out = json_out(cli("compare", a, b, "--store", "s.db", "--format", "json"))
    assert f"5 of {N} records of run A are missing from run B: not compared" in out["warnings"]
    assert "evaluator exact-match: params differ (ignore_case: default → True)" in out["warnings"]
    assert all(m["n_paired"] == N - 5 for m in out["metrics"])


def test_unmatched_metrics_are_listed(
    cli: Any, write_jsonl: Any, json_out: Any, tmp_path: Path
) -> None:
    write_jsonl(tmp_path / "a.jsonl", rows(2))
    a = eval_run(cli, json_out, "a.jsonl")
    other = cli(
        "eval", "--data", "a.jsonl", "--evaluators", "exact-match,json-valid", "--store", "s.db"
    )
    assert other.returncode == 0, other.stderr
    out = json_out(cli("compare", a, "latest", "--store", "s.db", "--format", "json"))
    assert [m["metric"] for m in out["metrics"]] == ["exact-match"]
    assert [(u["metric"], u["only_in"]) for u in out["unmatched"]] == [
        ("contains", "a"),
        ("length", "a"),
        ("json-valid", "b"),
    ]
    assert out["warnings"] == []  # same data, same exact-match params


def test_bad_run_ids_exit_2_without_traceback(
    cli: Any, user_error: Any, two_runs: tuple[str, str]
) -> None:
    a, _ = two_runs
    user_error(cli("compare", a, "no-such-run", "--store", "s.db"), "no-such-run")
    user_error(cli("compare", "nope", a, "--store", "s.db", "--format", "json"), "'nope'")


def test_other_bad_input_exits_2(
    cli: Any, write_jsonl: Any, json_out: Any, user_error: Any, tmp_path: Path
) -> None:
    write_jsonl(tmp_path / "a.jsonl", rows(2))
    a = eval_run(cli, json_out, "a.jsonl")
    json_only = cli("eval", "--data", "a.jsonl", "--evaluators", "json-valid", "--store", "s.db")
    assert json_only.returncode == 0, json_only.stderr
    user_error(cli("compare", a, "latest", "--store", "s.db"), "no metric in common")
    user_error(cli("compare", a, a, "--store", "s.db", "--metric", "bogus"), "bogus")
    user_error(cli("compare", a, a, "--store", "s.db", "--alpha", "1.5"), "--alpha")
    user_error(cli("compare", a, a, "--store", "absent.db"), "absent.db")
    user_error(cli("compare", a, a), "no result store")  # nothing under .evalsi/ here
