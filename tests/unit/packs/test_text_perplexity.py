"""perplexity from given token logprobs equals the geometric mean of 1/p (scipy), reads every
documented shape and place, and refuses impossible logprobs with a reason."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import gmean

import evalsi
from evalsi.core import Outcome
from evalsi.evaluators import Registry
from evalsi.packs import text
from evalsi.packs.text._perplexity import NO_LOGPROBS

REG = Registry(text.EVALUATORS)
EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "text"

# Token probabilities from a softmax over random logits: what a model would report.
_RNG = np.random.default_rng(11)
PROBS = []
for length in (1, 3, 8, 20, 50):
    logits = _RNG.normal(0, 2.5, (length, 30))
    soft = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    PROBS.append(soft[np.arange(length), _RNG.integers(0, 30, length)])


def results(rows: list[dict[str, Any]]) -> list[Any]:
    r = evalsi.evaluate(data=rows, evaluators=["perplexity"], registry=REG, store=":memory:")
    by_id = {x.record_id: x for x in r.results}
    return [by_id[row["id"]] for row in rows]


def test_perplexity_is_the_geometric_mean_of_inverse_probabilities() -> None:
    rows = [
        {"id": f"r{i}", "output": {"text": "…", "logprobs": np.log(p).tolist()}}
        for i, p in enumerate(PROBS)
    ]
    for p, result in zip(PROBS, results(rows), strict=True):
        assert result.outcome is Outcome.SCORED, result.reason
        assert result.scores[0].number == pytest.approx(float(gmean(1.0 / p)), rel=1e-12)
        assert f"{len(p)} tokens" in result.scores[0].explanation


def test_every_documented_shape_and_place() -> None:
    lp = np.log(PROBS[2]).tolist()
    expected = float(gmean(1.0 / PROBS[2]))
    openai_chat = {"content": [{"token": f"t{i}", "logprob": v} for i, v in enumerate(lp)]}
    rows = [
        {"id": "output-list", "output": {"text": "x", "logprobs": lp}},
        {"id": "metadata-list", "output": "x", "metadata": {"logprobs": lp}},
        {"id": "chat-object", "output": "x", "metadata": {"logprobs": openai_chat}},
        {"id": "chat-list", "output": {"text": "x", "logprobs": openai_chat["content"]}},
        {"id": "completions", "metadata": {"logprobs": {"token_logprobs": [None, *lp]}}},
        {"id": "no-output", "metadata": {"logprobs": lp}},
    ]  # fmt: skip
    for row, result in zip(rows, results(rows), strict=True):
        assert result.outcome is Outcome.SCORED, (row["id"], result.reason)
        assert result.scores[0].number == pytest.approx(expected, rel=1e-12), row["id"]


def test_missing_or_impossible_logprobs() -> None:
    rows = [
        {"id": "none", "output": "no logprobs"},
        {"id": "empty", "output": {"text": "x", "logprobs": []}},
        {"id": "positive", "output": {"text": "x", "logprobs": [-0.1, 0.7]}},
        {"id": "nan", "output": "x", "metadata": {"logprobs": [-0.1, float("nan")]}},
        {"id": "zero-prob", "output": "x", "metadata": {"logprobs": [-0.1, -math.inf]}},
        {"id": "text", "output": "x", "metadata": {"logprobs": ["-0.1"]}},
        {"id": "object", "output": "x", "metadata": {"logprobs": {"tokens": [-0.1]}}},
        {"id": "huge", "output": "x", "metadata": {"logprobs": [-800.0, -900.0]}},
    ]
    got = {r.record_id: r for r in results(rows)}
    assert (got["none"].outcome, got["none"].reason) == (Outcome.SKIPPED, NO_LOGPROBS)
    assert got["empty"].outcome is Outcome.SKIPPED
    for key, words in [
        ("positive", "logprobs[1] = 0.7 is above 0"),
        ("nan", "logprobs[1] is NaN"),
        ("zero-prob", "probability 0"),
        ("text", "logprobs[0] is not a number"),
        ("object", "without a 'content' or 'token_logprobs' list"),
        ("huge", "perplexity overflows"),
    ]:
        assert got[key].outcome is Outcome.ERROR, key
        assert words in got[key].reason, got[key].reason


def test_the_example_file() -> None:
    r = evalsi.evaluate(EXAMPLES / "logprobs.jsonl", ["perplexity"], registry=REG, store=":memory:")
    summary = r.metric("perplexity")
    assert (summary.scored, summary.skipped) == (4, 1)
    lp1 = [-0.21, -0.05, -0.01, -0.3, -0.02, -0.11, -0.04]
    first = next(x for x in r.results if x.record_id == "lp1")
    assert first.scores[0].number == pytest.approx(math.exp(-sum(lp1) / len(lp1)), rel=1e-12)


def test_logprobs_whose_sum_overflows_are_an_error_with_a_reason() -> None:
    import evalsi

    rows = [{"output": {"text": "x", "logprobs": [-1e308, -1e308]}}]
    (result,) = evalsi.evaluate(rows, ["perplexity"], store=":memory:").results
    assert result.reason == "ValueError: perplexity overflows: the 2 logprobs sum beyond a float"
