"""Issue 16: `evalsi compare A B`, `evalsi compare B --baseline A`, `evalsi report B --compare A`
and `evalsi report B --baseline A` all take A as the baseline and give the same Δ = B − A (same
sign, same value), and every one of them says which run is the baseline.

The expected Δ is counted by hand from the data, not read back from our own output: the baseline
is right on 15 of 60 questions, the candidate on 54 of 60, so Δ = 39/60 = +0.650.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

N = 60
DELTA = 39 / 60  # candidate 54/60 right minus baseline 15/60 right


def _rows(right: set[int]) -> list[dict[str, Any]]:
    return [
        {"id": f"q{i}", "output": "Paris" if i in right else "Lyon", "reference": "Paris"}
        for i in range(N)
    ]


@pytest.fixture
def runs(cli: Any, write_jsonl: Any, json_out: Any, tmp_path: Path) -> tuple[str, str]:
    """(baseline, candidate): right on every 4th question, and on all but every 10th."""
    write_jsonl(tmp_path / "a.jsonl", _rows({i for i in range(N) if i % 4 == 0}))
    write_jsonl(tmp_path / "b.jsonl", _rows({i for i in range(N) if i % 10 != 0}))
    ids = []
    for data in ("a.jsonl", "b.jsonl"):
        out = json_out(
            cli(
                "eval",
                "--data",
                data,
                "--evaluators",
                "exact-match",
                "--store",
                "s.db",
                "--format",
                "json",
            )
        )
        ids.append(str(out["run_id"]))
    return ids[0], ids[1]


def _compare_json(cli: Any, json_out: Any, *args: str) -> dict[str, Any]:
    out: dict[str, Any] = json_out(cli("compare", *args, "--store", "s.db", "--format", "json"))
    return out


def _report_delta(cli: Any, run: str, *args: str) -> tuple[str, str]:
    """(Δ cell, the sentence naming the baseline) of the Markdown report's comparison."""
    proc = cli("report", run, *args, "--format", "md", "-o", "-", "--store", "s.db")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    section = proc.stdout.split("## Comparison with run", 1)[1]
    intro = next(line for line in section.splitlines() if "Δ = B − A" in line)
    row = next(line for line in section.splitlines() if line.startswith("| exact-match |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    return cells[5], intro  # evaluator, metric, pairs, A, B, Δ


def test_compare_and_report_agree_on_the_baseline(
    cli: Any, json_out: Any, runs: tuple[str, str]
) -> None:
    a, b = runs
    plain = _compare_json(cli, json_out, a, b)
    flagged = _compare_json(cli, json_out, b, "--baseline", a)
    both = _compare_json(cli, json_out, b, a, "--baseline", a)
    for out in (plain, flagged, both):
        assert (out["baseline"], out["candidate"]) == (a, b)
        (m,) = out["metrics"]
        assert m["mean_a"] == pytest.approx(15 / 60)
        assert m["mean_b"] == pytest.approx(54 / 60)
        assert m["delta"] == pytest.approx(DELTA)
        assert m["verdict"] == "improved"
        assert m["ci"] == plain["metrics"][0]["ci"]  # the same pairs, the same seed
    for args in (("--compare", a), ("--baseline", a), ("--compare", a, "--baseline", a)):
        delta, intro = _report_delta(cli, b, *args)
        assert delta == f"+{DELTA:.3f}"
        assert f"Baseline A is `{a}`, B is this run" in intro
    # Reversed, both flip together.
    assert _compare_json(cli, json_out, b, a)["metrics"][0]["delta"] == pytest.approx(-DELTA)
    assert _report_delta(cli, a, "--compare", b)[0] == f"-{DELTA:.3f}"


def test_the_table_and_html_name_the_baseline(
    cli: Any, runs: tuple[str, str], tmp_path: Path
) -> None:
    a, b = runs
    table = cli("compare", b, "--baseline", a, "--store", "s.db")
    assert table.returncode == 0, table.stderr
    assert f"baseline: A = {a}; candidate: B = {b}; Δ = B − A" in table.stdout
    row = next(line for line in table.stdout.splitlines() if line.startswith("exact-match"))
    assert f"+{DELTA:.3f}" in row
    md = cli("compare", a, b, "--store", "s.db", "--format", "md")
    assert f"- baseline: A = {a}; candidate: B = {b}" in md.stdout
    proc = cli("report", b, "--baseline", a, "-o", "r.html", "--store", "s.db")
    assert proc.returncode == 0, proc.stderr
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert re.search(rf'Baseline A is <span class="mono">{a}</span>.*, B is this run', html)
    assert f"+{DELTA:.3f}" in html


def test_conflicting_or_missing_baselines_are_user_errors(
    cli: Any, runs: tuple[str, str], user_error: Any
) -> None:
    a, b = runs
    user_error(cli("compare", a, "--store", "s.db"), "compare needs two runs")
    user_error(
        cli("compare", a, b, "--baseline", "latest", "--store", "s.db"),
        "--baseline latest is neither",
    )
    user_error(
        cli("report", b, "--compare", a, "--baseline", b, "-o", "r.md", "--store", "s.db"),
        "name two baselines",
    )
