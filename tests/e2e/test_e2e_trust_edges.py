"""Issue 16, found by a new user's review: a mistyped --cluster-by key, an evaluator that judged
nothing, infrastructure failures in the table, a busy port, and small CLI consistencies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
QA = REPO / "examples" / "qa.jsonl"


def test_mistyped_cluster_key_exits_2_with_did_you_mean(cli: Any, user_error: Any) -> None:
    proc = cli("eval", "--data", QA, "--evaluators", "exact-match", "--cluster-by", "topc")
    user_error(proc, "cluster key 'topc'", "'topic'", "did you mean 'topic'?")


def test_cluster_key_some_records_lack_warns(cli: Any, write_jsonl: Any, tmp_path: Path) -> None:
    data = [
        {"id": str(i), "output": "a", "reference": "a", "metadata": {"topic": f"t{i % 2}"}}
        for i in range(4)
    ] + [{"id": "x", "output": "a", "reference": "a"}]
    write_jsonl(tmp_path / "d.jsonl", data)
    args = ("eval", "--data", "d.jsonl", "--evaluators", "exact-match", "--cluster-by", "topic")
    proc = cli(*args)
    assert proc.returncode == 0, proc.stderr
    assert "warning: 1 of 5 record(s) have no metadata 'topic'" in proc.stderr
    out = json.loads(cli(*args, "--format", "json").stdout)
    assert [w["kind"] for w in out["warnings"]] == ["cluster_key_missing"]
    assert out["metrics"][0]["ci_method"] == "cluster-wilson"
