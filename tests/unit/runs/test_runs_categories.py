"""Per-category metrics of a Run (``RunResult.categories``, ``run_categories``): the run's own
statistics over each category's samples, pass@k / pass^k checked against the combinatorial
formula computed here, and the edges (no key, one category, one sample, 0% and 100%)."""

from __future__ import annotations

import asyncio
import math
import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest

from evalsi.core import UserError
from evalsi.runs import RunResult, run_categories
from evalsi.runs._execute import execute_run
from evalsi.specs import DatasetSpec, EvaluatorEntry, RunSpec, TargetSpec
from evalsi.store import SqlStore
from tests.support.registry import BUILTINS

_calls: Counter[str] = Counter()
_lock = threading.Lock()
RIGHT: dict[str, int] = {}
"""How many of its calls each sample answers right (the first ones): c out of the trials."""


def answer(text: str) -> str:
    with _lock:
        j = _calls[text]
        _calls[text] += 1
    return "right" if j < RIGHT[text] else "wrong"


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    _calls.clear()
    RIGHT.clear()
    yield
    _calls.clear()
    RIGHT.clear()


def _run(
    tmp: Path, samples: list[tuple[int, Any]], *, trials: int, key: str = "category"
) -> tuple[SqlStore, RunResult]:
    """A run of ``samples`` (c right answers, category or None), graded by exact-match."""
    lines = []
    for i, (right, category) in enumerate(samples):
        RIGHT[f"q{i}"] = right
        row: dict[str, Any] = {"id": f"s{i}", "input": f"q{i}", "reference": "right"}
        if category is not None:
            row["metadata"] = {key: category}
        lines.append(orjson.dumps(row))
    data = tmp / "data.jsonl"
    data.write_bytes(b"\n".join(lines) + b"\n")
    spec = RunSpec(
        name="cats",
        target=TargetSpec(kind="python", python=f"{__name__}:answer"),
        dataset=DatasetSpec(source=str(data)),
        evaluators=(EvaluatorEntry(ref="exact-match"),),
        trials=trials,
        max_concurrency=1,
    )
    db = SqlStore.open(tmp / "s.db")
    result = asyncio.run(execute_run(spec, store=db, registry=BUILTINS))
    assert result.status == "done"
    return db, result


def _expected(rights: list[int], n: int) -> tuple[dict[str, float], dict[str, float]]:
    """pass@k and pass^k by hand: per sample 1 - C(n-c,k)/C(n,k) and C(c,k)/C(n,k), averaged."""
    at = {
        str(k): sum(1 - math.comb(n - c, k) / math.comb(n, k) for c in rights) / len(rights)
        for k in range(1, n + 1)
    }
    hat = {
        str(k): sum(math.comb(c, k) / math.comb(n, k) for c in rights) / len(rights)
        for k in range(1, n + 1)
    }
    return at, hat


def _by_value(result: RunResult, key: str = "category") -> Mapping[str, Any]:
    return {c.value: c for c in result.categories(key)}


def test_three_trials_per_category_match_the_formula(tmp_path: Path) -> None:
    samples = [(3, "easy"), (2, "easy"), (1, "hard"), (0, "hard"), (2, "hard")]
    db, result = _run(tmp_path, samples, trials=3)
    found = _by_value(result)
    assert list(found) == ["easy", "hard"]  # sorted
    for value, rights in (("easy", [3, 2]), ("hard", [1, 0, 2])):
        [m] = found[value].metrics
        at, hat = _expected(rights, 3)
        assert m.n == 3 * len(rights)
        assert m.mean == pytest.approx(sum(rights) / (3 * len(rights)))
        assert m.pass_at_k == pytest.approx(at)
        assert m.pass_hat_k == pytest.approx(hat)
        assert m.ci.method == "cluster-wilson"  # trials of one sample are clustered, as overall
        assert m.ci.low is not None
        assert m.ci.low <= m.mean <= (m.ci.high or 0)
        shown = found[value].to_dict()
        assert shown["key"] == "category"
        assert shown["metrics"][0]["pass_k_samples"] == len(rights)
        assert shown["metrics"][0]["pass_hat_k"] == pytest.approx(hat)
    db.close()


def test_one_category_equals_the_runs_own_metrics(tmp_path: Path) -> None:
    db, result = _run(tmp_path, [(3, "all"), (1, "all"), (0, "all")], trials=3)
    [only] = result.categories()
    assert only.value == "all"
    assert only.to_dict()["metrics"] == result.to_dict()["metrics"]
    db.close()


def test_one_trial_has_no_pass_k_and_no_clustering(tmp_path: Path) -> None:
    db, result = _run(tmp_path, [(1, "a"), (0, "a"), (1, "b")], trials=1)
    found = _by_value(result)
    [a] = found["a"].metrics
    assert (a.n, a.mean, a.pass_at_k, a.pass_hat_k) == (2, 0.5, {}, {})
    assert a.ci.method == "wilson"
    assert "pass_at_k" not in found["a"].to_dict()["metrics"][0]
    [b] = found["b"].metrics  # a category with one sample still has an interval
    assert (b.n, b.mean) == (1, 1.0)
    assert b.ci.low is not None
    assert b.ci.high == pytest.approx(1.0)
    db.close()


def test_zero_and_full_pass_rates(tmp_path: Path) -> None:
    db, result = _run(tmp_path, [(0, "never"), (0, "never"), (3, "always")], trials=3)
    found = _by_value(result)
    [never] = found["never"].metrics
    [always] = found["always"].metrics
    assert never.mean == 0.0
    assert never.pass_at_k == {"1": 0.0, "2": 0.0, "3": 0.0}
    assert never.pass_hat_k == {"1": 0.0, "2": 0.0, "3": 0.0}
    assert always.mean == 1.0
    assert always.pass_at_k == {"1": 1.0, "2": 1.0, "3": 1.0}
    assert always.pass_hat_k == {"1": 1.0, "2": 1.0, "3": 1.0}
    db.close()


def test_samples_without_the_key_are_none_only_when_some_have_it(tmp_path: Path) -> None:
    db, result = _run(tmp_path, [(1, "x"), (0, None), (1, 7)], trials=1)
    assert [c.value for c in result.categories()] == ["7", "x", "(none)"]  # (none) last
    [none] = _by_value(result)["(none)"].metrics
    assert (none.n, none.mean) == (1, 0.0)
    assert result.categories("level") == []  # no sample has it: nothing at all
    db.close()


def test_no_sample_has_the_key(tmp_path: Path) -> None:
    db, result = _run(tmp_path, [(1, None), (0, None)], trials=1)
    assert result.categories() == []
    db.close()


def test_a_stored_run_reads_the_same_as_its_result(tmp_path: Path) -> None:
    db, result = _run(tmp_path, [(2, "a"), (1, "b"), (0, "a")], trials=2)
    again = run_categories(db, result.run_id, "category", registry=BUILTINS)
    assert [c.to_dict() for c in again] == [c.to_dict() for c in result.categories()]
    db.close()


def test_a_changed_dataset_is_refused(tmp_path: Path) -> None:
    db, result = _run(tmp_path, [(1, "a"), (0, "b")], trials=1)
    (tmp_path / "data.jsonl").write_text('{"id": "other", "input": "q0", "reference": "right"}\n')
    with pytest.raises(
        UserError, match=r"changed since run \S+ ran \(position 0 holds sample 'other'"
    ):
        result.categories()
    (tmp_path / "data.jsonl").write_text("")
    with pytest.raises(UserError, match="shorter than when run"):
        result.categories()
    db.close()


def test_an_empty_key_and_a_score_run_are_refused(tmp_path: Path) -> None:
    db, result = _run(tmp_path, [(1, "a")], trials=1)
    with pytest.raises(UserError, match="--by: expected a metadata key"):
        result.categories("")
    from evalsi.runs import score_async

    scored = asyncio.run(
        score_async(
            [{"id": "1", "output": "a", "reference": "a"}],
            ["exact-match"],
            store=db,
            registry=BUILTINS,
        )
    )
    with pytest.raises(UserError, match="is a score run"):
        run_categories(db, scored.run_id, "category")
    db.close()
