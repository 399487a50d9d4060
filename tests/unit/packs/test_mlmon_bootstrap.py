"""The weighted bootstrap protocol holds for every ml-monitoring evaluator.

For mapped values ``v`` and resample counts ``c``:
``reduce(v) == reduce_weighted(prepare(v), ones)`` and
``reduce_weighted(prepare(v), c) == reduce(v repeated by c)``, score for score (names, values,
explanations and the structured detail), or both refuse with the same error. Drift
evaluators resample the current rows only: the baseline is fixed when they are bound.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_wine

import evalsi
from evalsi.core import Score
from evalsi.evaluators import DatasetRunner, Registry, make_runner
from evalsi.packs import ml_monitoring

REG = Registry(ml_monitoring.EVALUATORS)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(fn: Any, *args: Any) -> Any:
    """The scores as comparable tuples, or the error a reduction raised."""
    try:
        scores: list[Score] = fn(*args)
    except ValueError as e:
        return ("ValueError", str(e))
    return [(s.name, s.number, s.passed, s.structured, s.explanation) for s in scores]


def check_protocol(instance: Any, values: list[Any], counts: list[int]) -> None:
    ones = np.ones(len(values))
    assert outcome(instance.reduce, values) == outcome(
        instance.reduce_weighted, instance.prepare(values), ones
    )
    repeated = [v for v, c in zip(values, counts, strict=True) for _ in range(c)]
    weights = np.array(counts, dtype=np.float64)
    assert outcome(instance.reduce_weighted, instance.prepare(values), weights) == outcome(
        instance.reduce, repeated
    )


def with_counts(values: st.SearchStrategy[list[Any]]) -> st.SearchStrategy[Any]:
    """(values, resample counts with at least one drawn)."""
    return values.flatmap(
        lambda v: st.tuples(
            st.just(v),
            st.lists(st.integers(0, 3), min_size=len(v), max_size=len(v)).filter(any),
        )
    )


# -- drift -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> str:
    alcohol = load_wine().data[:60, 0]
    rows = [
        {"input": {"num": float(a), "cat": "abc"[i % 3], "const": 1.0,
                   "sparse": None if i % 4 else float(i)}}
        for i, a in enumerate(alcohol)
    ]  # fmt: skip
    path = tmp_path_factory.mktemp("base") / "reference.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


NUMS = st.one_of(
    st.sampled_from([11.0, 12.5, 13.0, 13.2, 14.1, 1.0, 0.5]),
    st.floats(10, 15, allow_nan=False).map(lambda x: round(x, 1)),
    st.sampled_from([None, "", "n/a", "12.5"]),
)
CATS = st.sampled_from(["a", "b", "c", "d", None, 3])
ROWS = st.lists(st.tuples(NUMS, CATS, NUMS, NUMS), min_size=1, max_size=25)


@pytest.mark.parametrize("name", ["psi", "js-distance", "ks"])
def test_drift_protocol(baseline: str, name: str) -> None:
    instance = REG.resolve(name).bind({"baseline": baseline}).instance

    @SETTINGS
    @given(with_counts(ROWS))
    def check(case: tuple[list[Any], list[int]]) -> None:
        check_protocol(instance, *case)

    check()


# -- data quality ----------------------------------------------------------------------------

RAW = st.sampled_from([None, "", " ", 0, 1, 2.5, 150, -3, "3", "4.5", "x", True, [1], {"k": 1}])
FIELD_ROWS = st.lists(
    st.dictionaries(st.sampled_from(["a", "b", "c"]), RAW, max_size=3), min_size=1, max_size=20
)
QUALITY = [
    ("missing-rate", {}),
    ("missing-rate", {"features": ["a", "zzz"]}),
    ("type-violations", {"types": {"a": "number", "b": "integer", "c": "string"}}),
    ("type-violations", {"types": {"a": "boolean", "b": "array"}, "strict": False}),
    ("out-of-range", {"bounds": {"a": [0, 100], "b": [None, 2], "c": [1, None]}}),
]


@pytest.mark.parametrize(("name", "params"), QUALITY)
def test_quality_protocol(name: str, params: dict[str, Any]) -> None:
    instance = REG.resolve(name).bind(params).instance

    @SETTINGS
    @given(with_counts(FIELD_ROWS))
    def check(case: tuple[list[Any], list[int]]) -> None:
        check_protocol(instance, *case)

    check()


# -- fairness --------------------------------------------------------------------------------

MAPPED = st.lists(
    st.tuples(st.sampled_from(["F", "M", "X"]), st.sampled_from(["0", "1", "2"]),
              st.sampled_from(["0", "1", "2"])),
    min_size=1, max_size=25,
)  # fmt: skip
FAIRNESS = [
    ("demographic-parity-difference", {"group": "g"}),
    ("demographic-parity-difference", {"group": "g", "positive": "2"}),
    ("equalized-odds-difference", {"group": "g"}),
    ("equalized-odds-difference", {"group": "g", "undefined": "exclude"}),
]


@pytest.mark.parametrize(("name", "params"), FAIRNESS)
def test_fairness_protocol(name: str, params: dict[str, Any]) -> None:
    instance = REG.resolve(name).bind(params).instance

    @SETTINGS
    @given(with_counts(MAPPED))
    def check(case: tuple[list[Any], list[int]]) -> None:
        check_protocol(instance, *case)

    check()


# -- the runner takes the weighted path ------------------------------------------------------


def test_every_evaluator_gets_a_weighted_bootstrap_interval(baseline: str, tmp_path: Path) -> None:
    params = {
        "psi": {"baseline": baseline},
        "js-distance": {"baseline": baseline},
        "ks": {"baseline": baseline},
        "type-violations": {"types": {"num": "number"}},
        "out-of-range": {"bounds": {"num": [12, 14]}},
        "demographic-parity-difference": {"group": "metadata.g"},
        "equalized-odds-difference": {"group": "metadata.g"},
    }
    alcohol = load_wine().data[60:160, 0]
    rows = [
        {"input": {"num": float(a), "cat": "abcd"[i % 4]}, "output": int(a > 13),
         "reference": int(i % 3 == 0), "metadata": {"g": "FM"[i % 2]}}
        for i, a in enumerate(alcohol)
    ]  # fmt: skip
    names = [ev.name for ev in ml_monitoring.EVALUATORS]
    for name in names:
        runner = make_runner(REG.resolve(name).bind(params.get(name, {})))
        assert isinstance(runner, DatasetRunner)
        assert runner.weighted, name
    r = evalsi.evaluate(data=rows, evaluators=names, params=params, registry=REG,
                        store=str(tmp_path / "s.db"))  # fmt: skip
    for name in names:
        m = r.metric(name)
        assert m.ci.method == "bootstrap-percentile", name
        if name in ("missing-rate", "type-violations"):
            # No value is missing or of the wrong type: every resample agrees on 0, and a
            # bootstrap of identical replicates gives no interval rather than [0, 0].
            assert (m.mean, m.ci.low, m.ci.high) == (0.0, None, None), name
            continue
        assert m.ci.low is not None
        assert m.ci.high is not None
        assert m.ci.low < m.ci.high
