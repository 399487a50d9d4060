"""The weighted-resampling protocol of the corpus metrics (bleu, chrf, ter): weights of one
give ``reduce``, resample counts give ``reduce`` of the repeated sentences, and both equal
sacrebleu's corpus score of the repeated corpus. Property-tested with hypothesis."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sacrebleu.metrics import BLEU, CHRF, TER

import evalsi
from evalsi.core import Content, Record
from evalsi.evaluators import Registry
from evalsi.packs import text

REG = Registry(text.EVALUATORS)
EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "text"
PAIRS = [json.loads(line) for line in (EXAMPLES / "translations.jsonl").read_text().splitlines()]
# a few rows with two references, so that TER's averaged reference lengths are fractional
for i in (0, 5, 11):
    PAIRS[i] = {**PAIRS[i], "reference": [PAIRS[i]["reference"], PAIRS[i + 1]["reference"]]}
RECORDS = [
    Record(
        id=p["id"],
        output=Content.from_value(p["output"]),
        reference=Content.from_value(p["reference"]),
    )
    for p in PAIRS
]

METRICS: dict[str, tuple[dict[str, Any], Any]] = {
    "bleu": ({}, lambda: BLEU()),
    "bleu-floor": ({"smooth_method": "floor"}, lambda: BLEU(smooth_method="floor")),
    "chrf": ({}, lambda: CHRF()),
    "chrf++": ({"word_order": 2}, lambda: CHRF(word_order=2)),
    "ter": ({}, lambda: TER()),
}


def instance(case: str) -> Any:
    params, _ = METRICS[case]
    name = case.split("-")[0].rstrip("+")
    return REG.resolve(name).bind(params).instance


def sacre(case: str, indexes: list[int]) -> float:
    rows = [PAIRS[i] for i in indexes]
    refs = [r["reference"] if isinstance(r["reference"], list) else [r["reference"]] for r in rows]
    streams = [[x[k] if k < len(x) else None for x in refs] for k in range(2)]
    return float(METRICS[case][1]().corpus_score([r["output"] for r in rows], streams).score)


counts_strategy = st.lists(st.integers(0, 3), min_size=len(PAIRS), max_size=len(PAIRS)).filter(
    lambda c: sum(c) > 0
)


@pytest.mark.parametrize("case", METRICS)
def test_unit_weights_equal_reduce_and_sacrebleu(case: str) -> None:
    ev = instance(case)
    values = [ev.map(r) for r in RECORDS]
    weighted = ev.reduce_weighted(ev.prepare(values), np.ones(len(values)))
    assert weighted.number == ev.reduce(values).number
    assert weighted.number == pytest.approx(sacre(case, list(range(len(PAIRS)))), abs=1e-9)


@pytest.mark.parametrize("case", METRICS)
@settings(max_examples=25, deadline=None)
@given(counts=counts_strategy)
def test_resample_counts_equal_the_repeated_corpus(case: str, counts: list[int]) -> None:
    ev = instance(case)
    values = [ev.map(r) for r in RECORDS]
    repeated = [i for i, c in enumerate(counts) for _ in range(c)]
    weighted = ev.reduce_weighted(ev.prepare(values), np.array(counts, dtype=np.float64))
    plain = ev.reduce([ev.map(RECORDS[i]) for i in repeated])
    assert weighted.number == pytest.approx(plain.number, rel=1e-12, abs=1e-12)
    assert weighted.number == pytest.approx(sacre(case, repeated), rel=1e-12, abs=1e-9)
    if not case.startswith("ter"):  # integer statistics: the sums are exact
        assert weighted.number == plain.number


@pytest.mark.parametrize("name", ["bleu", "chrf", "ter"])
def test_corpus_metrics_get_a_bootstrap_interval(name: str) -> None:
    r = evalsi.evaluate(data=PAIRS, evaluators=[name], registry=REG, store=":memory:", seed=3)
    summary = r.metric(name)
    assert summary.ci.method.startswith("bootstrap")
    assert summary.ci.low is not None
    assert summary.ci.high is not None
    assert summary.ci.low < summary.mean < summary.ci.high
    assert summary.ci.high - summary.ci.low < 60  # an interval, not the whole 0-100 scale
