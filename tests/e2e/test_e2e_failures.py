"""Failures explain themselves where the user looks: the table after the metrics, `"failures"`
in `--format json`, Markdown, and the report's failures, each with expected vs got or value vs
budget."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROWS = [
    {"id": "q1", "output": "paris.", "reference": "Paris", "usage": {"latency_ms": 2310}},
    {"id": "q2", "output": "4", "reference": "4", "usage": {"latency_ms": 20}},
    {"id": "q3", "output": "Lyon", "reference": "Rome", "usage": {"latency_ms": 30}},
    {"id": "q4", "output": "x" * 400, "reference": "short", "usage": {"latency_ms": 40}},
]
ARGS = ["--evaluators", "exact-match,latency", "--param", "latency.max_ms=2000"]


def _data(tmp_path: Path) -> Path:
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps({"input": "q", **r}) + "\n" for r in ROWS))
    return path


def test_json_lists_the_failures_with_their_reasons(
    run_evalsi: Callable[..., Any], tmp_path: Path
) -> None:
    _data(tmp_path)
    proc = run_evalsi(tmp_path, "eval", "--data", "qa.jsonl", *ARGS, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert {"run_id", "status", "records", "metrics", "gates"} <= set(data)  # JSON contract intact
    reasons = [(f["record_id"], f["metric"], f["detail"]) for f in data["failures"]]
    assert reasons[:4] == [
        ("q1", "exact-match", 'expected "Paris", got "paris."'),
        ("q1", "latency-within-budget", "latency 2310 ms > budget 2000 ms"),
        ("q3", "exact-match", 'expected "Rome", got "Lyon"'),
        ("q4", "exact-match", 'expected "short", got "' + "x" * 119 + '…"'),
    ]
    assert len(data["failures"]) == 4
    assert all(f["outcome"] == "failed" and f["trial"] == 0 for f in data["failures"])

    fewer = run_evalsi(
        tmp_path, "eval", "--data", "qa.jsonl", *ARGS, "--format", "json", "--show-failures", "1"
    )
    assert [f["record_id"] for f in json.loads(fewer.stdout)["failures"]] == ["q1"]
    none = run_evalsi(
        tmp_path, "eval", "--data", "qa.jsonl", *ARGS, "--format", "json", "--show-failures", "0"
    )
    assert json.loads(none.stdout)["failures"] == []


def test_the_table_and_markdown_show_a_failures_section(
    run_evalsi: Callable[..., Any], tmp_path: Path
) -> None:
    _data(tmp_path)
    table = run_evalsi(tmp_path, "eval", "--data", "qa.jsonl", *ARGS, "--show-failures", "2")
    assert table.returncode == 0, table.stderr
    after = table.stdout.split("failures (the first 2; --show-failures N lists more)\n", 1)[1]
    lines = after.splitlines()
    assert lines[0].split() == ["record", "metric", "reason"]
    assert lines[2].split(None, 2) == ["q1", "exact-match", 'expected "Paris", got "paris."']
    assert "latency 2310 ms > budget 2000 ms" in lines[3]
    assert len(lines) == 4  # the two asked for, nothing more

    md = run_evalsi(tmp_path, "eval", "--data", "qa.jsonl", *ARGS, "--format", "md")
    assert '| q3 | exact-match | expected "Rome", got "Lyon" |' in md.stdout
    passing = run_evalsi(tmp_path, "eval", "--data", "qa.jsonl", "--evaluators", "latency")
    assert "failures" not in passing.stdout  # nothing failed: no section


def test_the_report_shows_the_reason(run_evalsi: Callable[..., Any], tmp_path: Path) -> None:
    _data(tmp_path)
    proc = run_evalsi(tmp_path, "eval", "--data", "qa.jsonl", *ARGS, "--format", "json")
    run_id = json.loads(proc.stdout)["run_id"]
    md = run_evalsi(tmp_path, "report", run_id, "--format", "md", "-o", "r.md")
    assert md.returncode == 0, md.stderr
    text = (tmp_path / "r.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `q1` |"))
    assert 'failed exact-match: expected "Paris", got "paris."' in row
    assert "latency 2310 ms &gt; budget 2000 ms" in row  # Markdown escapes the >
    html = run_evalsi(tmp_path, "report", run_id, "--format", "html", "-o", "r.html")
    assert html.returncode == 0, html.stderr
    page = (tmp_path / "r.html").read_text()
    assert "expected &#34;Paris&#34;, got &#34;paris.&#34;" in page or (
        "expected &quot;Paris&quot;, got &quot;paris.&quot;" in page
    )
    assert "latency 2310 ms &gt; budget 2000 ms" in page
