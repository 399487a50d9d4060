"""``evalsi run`` per category, as a user runs it: a table per ``metadata.category`` after the
run's own, with pass@k / pass^k under trials; ``"categories"`` in ``--format json`` with the
top-level metric shape; ``--by KEY``; nothing at all when no sample has the key; and
``evalsi runs show RUN --by KEY`` giving the same for the stored run."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

# Sample i answers right on its first RIGHT[i] calls (of 3 trials), wrong after.
TARGET = """\
from collections import Counter
import threading

RIGHT = {"q0": 3, "q1": 2, "q2": 0, "q3": 1, "q4": 3, "q5": 0}
calls = Counter()
lock = threading.Lock()

def answer(text):
    with lock:
        j = calls[text]
        calls[text] += 1
    return "yes" if j < RIGHT[text] else "no"
"""
RIGHT = [3, 2, 0, 1, 3, 0]
CATEGORY = ["easy", "easy", "hard", "hard", "easy", None]
LEVEL = [1, 2, 1, 2, 1, 2]

SPEC = """\
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: categories}}
spec:
  target: {{python: "cat_target:answer"}}
  dataset: {{path: {data}}}
  trials: {trials}
  maxConcurrency: 1
  evaluators:
    - ref: exact-match
"""


def _setup(
    tmp: Path, write_jsonl: Any, *, trials: int = 3, categories: bool = True
) -> dict[str, str]:
    (tmp / "cat_target.py").write_text(TARGET)
    rows = []
    for i, (category, level) in enumerate(zip(CATEGORY, LEVEL, strict=True)):
        row: dict[str, Any] = {"id": f"s{i}", "input": f"q{i}", "reference": "yes"}
        if categories:
            row["metadata"] = {"level": level, **({"category": category} if category else {})}
        rows.append(row)
    write_jsonl(tmp / "qa.jsonl", rows)
    (tmp / "run.yaml").write_text(SPEC.format(data="qa.jsonl", trials=trials))
    return {"PYTHONPATH": os.pathsep.join([str(tmp), os.environ.get("PYTHONPATH", "")])}


def _hand(rights: list[int], n: int) -> tuple[dict[str, float], dict[str, float]]:
    at = {str(k): sum(1 - math.comb(n - c, k) / math.comb(n, k) for c in rights) for k in (1, 2, 3)}
    hat = {str(k): sum(math.comb(c, k) / math.comb(n, k) for c in rights) for k in (1, 2, 3)}
    return (
        {k: v / len(rights) for k, v in at.items()},
        {k: v / len(rights) for k, v in hat.items()},
    )


def test_json_has_a_metric_object_per_category(cli, write_jsonl, json_out, tmp_path):
    env = _setup(tmp_path, write_jsonl)
    data = json_out(cli("run", "-f", "run.yaml", "--format", "json", "-q", env=env))
    top = data["metrics"][0]
    assert "pass_hat_k" in top  # the existing contract is unchanged
    cats = data["categories"]
    assert [(c["key"], c["value"]) for c in cats] == [
        ("category", "easy"),
        ("category", "hard"),
        ("category", "(none)"),
    ]
    for c in cats:
        [m] = c["metrics"]
        assert list(m) == list(top)  # the same shape, key for key
        members = [
            r for r, cat in zip(RIGHT, CATEGORY, strict=True) if (cat or "(none)") == c["value"]
        ]
        at, hat = _hand(members, 3)
        assert m["n"] == 3 * len(members)
        assert abs(m["mean"] - sum(members) / (3 * len(members))) < 1e-12
        for k in ("1", "2", "3"):
            assert abs(m["pass_at_k"][k] - at[k]) < 1e-12
            assert abs(m["pass_hat_k"][k] - hat[k]) < 1e-12
    shown = json_out(cli("runs", "show", data["run_id"], "--by", "category", "--format", "json"))
    assert shown["categories"] == cats  # the stored run reads the same


def test_table_per_category_and_by_another_key(cli, write_jsonl, tmp_path):
    env = _setup(tmp_path, write_jsonl)
    out = cli("run", "-f", "run.yaml", "-q", "--by", "level", env=env)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "level = 1" in text
    assert "level = 2" in text
    assert "category =" not in text
    assert text.index("level = 1") > text.index("exact-match")  # after the run's own table
    header = next(
        line
        for line in text.splitlines()[text.splitlines().index("level = 1") :]
        if "pass^k" in line
    )
    assert header.split()[:5] == ["evaluator", "metric", "n", "mean", "95%"]
    # level 1 holds samples 0, 2, 4: c = 3, 0, 3 of 3 -> pass^3 = 2/3
    assert "3=0.667" in text


def test_one_trial_has_no_pass_k_columns(cli, write_jsonl, json_out, tmp_path):
    env = _setup(tmp_path, write_jsonl, trials=1)
    out = cli("run", "-f", "run.yaml", "-q", env=env)
    assert "category = easy" in out.stdout
    assert "pass^k" not in out.stdout
    data = json_out(cli("run", "-f", "run.yaml", "--format", "json", "-q", env=env))
    assert all("pass_at_k" not in c["metrics"][0] for c in data["categories"])


def test_no_sample_with_the_key_prints_nothing(cli, write_jsonl, json_out, tmp_path):
    env = _setup(tmp_path, write_jsonl, categories=False)
    out = cli("run", "-f", "run.yaml", "-q", env=env)
    assert out.returncode == 0, out.stderr
    assert "category =" not in out.stdout
    data = json_out(cli("run", "-f", "run.yaml", "--format", "json", "-q", env=env))
    assert "categories" not in data
    out = cli("run", "-f", "run.yaml", "-q", "--by", "topic", env=env)
    assert "no sample has metadata.topic" in out.stderr
