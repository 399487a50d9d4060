"""`evalsi eval --format json`: one JSON object on stdout, the contract's keys, exit 0; and
every shipped example dataset grades cleanly."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.jsonl"))

METRIC_KEYS = {"evaluator", "metric", "n", "mean", "ci", "ci_method", "scored", "skipped", "errors"}
TOP_KEYS = {"run_id", "status", "records", "metrics", "gates"}


def _rows() -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for i in range(12):
        rows.append(
            {
                "id": f"r{i}",
                "input": f"question {i}",
                "output": "yes" if i % 3 else "no",
                "reference": "yes",
                "usage": {"latency_ms": 100 + 7 * i, "input_tokens": 10, "output_tokens": i},
                "metadata": {"topic": f"t{i % 4}"},
            }
        )
    return rows


def test_eval_json_is_one_object_with_the_contract_keys(cli, write_jsonl, json_out, tmp_path):
    write_jsonl(tmp_path / "data.jsonl", _rows())
    proc = cli(
        "eval", "--data", "data.jsonl", "--evaluators", "exact-match,latency", "--format", "json"
    )
    out = json_out(proc)  # exit 0 and the whole of stdout parses as one object
    assert proc.stdout.lstrip().startswith("{")
    assert proc.stdout.rstrip().endswith("}")
    assert set(out) >= TOP_KEYS, sorted(out)
    assert isinstance(out["run_id"], str)
    assert out["run_id"]
    assert out["status"] == "done"
    assert out["records"] == 12
    assert out["gates"] == []
    assert isinstance(out["metrics"], list)
    by_name = {(m["evaluator"], m["metric"]): m for m in out["metrics"]}
    assert set(by_name) >= {("exact-match", "exact-match"), ("latency", "latency")}
    for m in out["metrics"]:
        assert set(m) >= METRIC_KEYS, sorted(m)
        for key in ("n", "scored", "skipped", "errors"):
            assert type(m[key]) is int, (key, m)
        assert isinstance(m["ci"], list)
        assert len(m["ci"]) == 2
        assert isinstance(m["ci_method"], str)
        assert m["ci_method"]
    em = by_name[("exact-match", "exact-match")]
    assert em["n"] == em["scored"] == 12
    assert (em["skipped"], em["errors"]) == (0, 0)
    assert em["mean"] == pytest.approx(8 / 12)
    assert em["ci_method"] == "wilson"
    lo, hi = em["ci"]
    assert 0.0 <= lo < em["mean"] < hi <= 1.0
    lat = by_name[("latency", "latency")]
    assert lat["ci_method"] == "t"
    assert lat["mean"] == pytest.approx(100 + 7 * 5.5)
    assert lat["ci"][0] < lat["mean"] < lat["ci"][1]
    # Nothing but the object: no progress line, no log line, no second document.
    assert proc.stdout.count('"run_id"') == 1


def test_eval_json_values_are_finite_json_numbers(cli, write_jsonl, json_out, tmp_path):
    """n=1 has no t interval: it must still be valid JSON (null), never NaN or Infinity."""
    write_jsonl(tmp_path / "one.jsonl", [{"output": "a", "usage": {"latency_ms": 5}}])
    proc = cli("eval", "--data", "one.jsonl", "--evaluators", "latency", "--format", "json")
    out = json_out(proc)
    assert "NaN" not in proc.stdout
    assert "Infinity" not in proc.stdout
    (lat,) = [m for m in out["metrics"] if m["metric"] == "latency"]
    assert lat["n"] == 1
    assert lat["mean"] == 5
    assert all(v is None or math.isfinite(v) for v in lat["ci"])


def test_eval_table_and_markdown_formats(cli, write_jsonl, tmp_path):
    write_jsonl(tmp_path / "data.jsonl", _rows())
    table = cli("eval", "--data", "data.jsonl", "--evaluators", "exact-match")
    assert table.returncode == 0, table.stderr
    assert "exact-match" in table.stdout
    assert "wilson" in table.stdout
    assert "0.667" in table.stdout
    md = cli("eval", "--data", "data.jsonl", "--evaluators", "exact-match", "--format", "md")
    assert md.returncode == 0, md.stderr
    assert "| evaluator |" in md.stdout
    assert "| exact-match | exact-match | 12 |" in md.stdout


def test_examples_exist():
    assert REPO / "examples" / "qa.jsonl" in EXAMPLES


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_every_example_dataset_grades(example, cli, json_out):
    lines = [ln for ln in example.read_text(encoding="utf-8").splitlines() if ln.strip()]
    proc = cli(
        "eval",
        "--data",
        example,
        "--evaluators",
        "exact-match,json-valid,length",
        "--format",
        "json",
        "--store",
        "examples.db",
    )
    out = json_out(proc)
    assert out["status"] == "done"
    assert out["records"] == len(lines)
    assert out["bad_records"] == 0
    for m in out["metrics"]:
        assert m["errors"] == 0, m
        assert m["scored"] + m["skipped"] == len(lines), m
    assert json.loads(example.read_text(encoding="utf-8").splitlines()[0])  # it is JSONL
