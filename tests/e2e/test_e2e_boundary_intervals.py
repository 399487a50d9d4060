"""Intervals at 0% and 100% through the CLI: never a point, so a gate cannot pass on nothing.

Issue 16: 10 of 10 passing with ``--cluster-by topic`` printed ``[1.000, 1.000]`` and the gate
``metric('exact-match').ci.low >= 0.99`` passed. The references here are statsmodels'
Clopper-Pearson bounds and scipy's t quantile, never evalsi's own output.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from tests.e2e.conftest import RunCli

GATE = "metric('exact-match').ci.low >= 0.99"


def _rows(n: int, passed: bool, topics: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"r{i}",
            "output": "yes" if passed else "no",
            "reference": "yes",
            "metadata": {"topic": f"t{i % topics}"},
        }
        for i in range(n)
    ]


def _json(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """stdout is one JSON object, whatever the exit code (a failed gate exits 1)."""
    assert "Traceback" not in proc.stderr, proc.stderr
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


def _exact_match(out: dict[str, Any]) -> dict[str, Any]:
    (m,) = [m for m in out["metrics"] if m["metric"] == "exact-match"]
    return m


def test_all_passing_clustered_run_fails_a_near_certainty_gate(
    cli: RunCli, write_jsonl: Any, json_out: Any, tmp_path: Path
) -> None:
    write_jsonl(tmp_path / "all.jsonl", _rows(10, True, 10))
    proc = cli(
        "eval",
        "--data",
        "all.jsonl",
        "--evaluators",
        "exact-match",
        "--cluster-by",
        "topic",
        "--gate",
        GATE,
        "--format",
        "json",
    )
    assert proc.returncode == 1, proc.stderr  # the gate failed: 10 records are not certainty
    out = _json(proc)
    m = _exact_match(out)
    assert m["ci_method"] == "cluster-wilson"
    assert m["mean"] == 1.0
    assert m["ci"][1] == 1.0
    # 10 clusters all passing: each counts once, t with 9 degrees of freedom; at 7.5
    # effective records the Clopper-Pearson bound (0.025^(1/n)) is the lower one.
    n_eff = 10 * (stats.norm.ppf(0.975) / stats.t.ppf(0.975, 9)) ** 2
    low, _ = proportion_confint(n_eff, n_eff, method="beta")
    assert m["ci"][0] == pytest.approx(low, abs=1e-9)
    assert m["ci"][0] < 0.99
    (gate,) = out["gates"]
    assert (gate["expr"], gate["passed"]) == (GATE, False)


def test_all_passing_unclustered_fails_the_gate_too(
    cli: RunCli, write_jsonl: Any, json_out: Any, tmp_path: Path
) -> None:
    write_jsonl(tmp_path / "all.jsonl", _rows(10, True, 10))
    proc = cli(
        "eval", "--data", "all.jsonl", "--evaluators", "exact-match", "--gate", GATE, "--format",
        "json",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    m = _exact_match(_json(proc))
    assert m["ci_method"] == "wilson"
    assert m["ci"] == [pytest.approx(0.025 ** (1 / 10), abs=1e-12), 1.0]


@pytest.mark.parametrize("bootstrap", ["percentile", "bca"])
def test_all_failing_bootstrap_is_not_zero_zero(
    cli: RunCli, write_jsonl: Any, json_out: Any, tmp_path: Path, bootstrap: str
) -> None:
    write_jsonl(tmp_path / "none.jsonl", _rows(60, False, 6))
    proc = cli(
        "eval", "--data", "none.jsonl", "--evaluators", "exact-match", "--bootstrap", bootstrap,
        "--format", "json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    m = _exact_match(json_out(proc))
    assert m["ci_method"] == f"bootstrap-{bootstrap}"
    assert m["ci"][0] == 0.0
    _, wilson_high = proportion_confint(0, 60, method="wilson")
    assert m["ci"][1] == pytest.approx(wilson_high, abs=1e-12)  # widened to Wilson's


def test_all_failing_clustered_is_not_zero_zero(
    cli: RunCli, write_jsonl: Any, json_out: Any, tmp_path: Path
) -> None:
    write_jsonl(tmp_path / "none.jsonl", _rows(60, False, 6))
    proc = cli(
        "eval", "--data", "none.jsonl", "--evaluators", "exact-match", "--cluster-by", "topic",
        "--format", "table",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "cluster-wilson" in proc.stdout
    assert "[0.000, 0.000]" not in proc.stdout
