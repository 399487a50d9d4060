"""ml-classic classification records in every shape map() reads: the fast paths (a JSON object,
a plain label, a row) and the careful one (JSON text, chats, odd values) agree, and what cannot
be a label or a probability is an ERROR with its reason."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sklearn import metrics as skm

import evalsi
from evalsi.core import EvaluationResult, Outcome
from evalsi.evaluators import Registry
from evalsi.packs import ml_classic

REG = Registry(ml_classic.EVALUATORS)


def run(rows: list[Any], name: str, **params: Any) -> tuple[EvaluationResult, Any]:
    r = evalsi.evaluate(
        data=rows, evaluators=[name], params={name: params}, registry=REG, store=":memory:"
    )
    (result,) = [x for x in r.results if x.evaluator == name and x.record_id == ""]
    return result, r.metric(name)


def number(rows: list[Any], name: str, **params: Any) -> float:
    result, _ = run(rows, name, **params)
    assert result.outcome is Outcome.SCORED, result.reason
    value = result.scores[0].number
    assert value is not None
    return value


TRUTH = ["1", "0", "1", "1", "0", "0", "1", "0"]
P1 = [0.9, 0.2, 0.4, 0.7, 0.6, 0.1, 0.8, 0.3]
PRED = ["1", "0", "0", "1", "1", "0", "1", "0"]


def shaped(i: int, truth: str, label: str, p1: float) -> dict[str, Any]:
    """Record i in one of the shapes evalsi reads, the same prediction in each."""
    probs = {"0": 1 - p1, "1": p1}
    shapes: list[dict[str, Any]] = [
        {"output": {"label": int(label), "probabilities": probs}, "reference": int(truth)},
        {"output": f'{{"label": "{label}", "probabilities": {{"1": {p1}}}}}', "reference": truth},
        {"output": {"row": {"prediction": label, "probabilities": probs}}, "reference": truth},
        {"output": {"label": float(label), "probabilities": probs}, "reference": f"{truth}"},
    ]
    return shapes[i % len(shapes)]


@pytest.mark.parametrize(
    ("name", "reference"),
    [
        ("accuracy", lambda: skm.accuracy_score(TRUTH, PRED)),
        ("f1", lambda: skm.f1_score(TRUTH, PRED, pos_label="1")),
        ("roc-auc", lambda: skm.roc_auc_score([int(t) for t in TRUTH], P1)),
        ("log-loss", lambda: skm.log_loss([int(t) for t in TRUTH], P1)),
    ],
)
def test_every_shape_gives_the_same_metric(name: str, reference: Any) -> None:
    rows = [shaped(i, t, lab, p) for i, (t, lab, p) in enumerate(zip(TRUTH, PRED, P1, strict=True))]
    assert number(rows, name) == pytest.approx(reference(), abs=1e-12)


def test_true_and_1_are_different_labels_but_1_and_1_0_are_one() -> None:
    rows = [
        {"output": True, "reference": 1},
        {"output": 1.0, "reference": "1"},
        {"output": "true", "reference": True},
        {"output": False, "reference": 0},
    ]
    truth, pred = ["1", "1", "true", "0"], ["true", "1", "true", "false"]
    assert number(rows, "accuracy") == skm.accuracy_score(truth, pred) == 0.5
    result, _ = run(rows, "confusion-matrix")
    assert result.scores[0].structured["labels"] == ["0", "1", "false", "true"]


def test_a_chat_answer_is_a_label() -> None:
    chat = [{"role": "user", "content": "spam?"}, {"role": "assistant", "content": "spam"}]
    rows = [{"output": chat, "reference": "spam"}, {"output": "ham", "reference": "spam"}]
    assert number(rows, "accuracy") == 0.5


@pytest.mark.parametrize(
    ("probabilities", "reason"),
    [
        ({"0": "0.4", "1": "0.6"}, "probability of '0' must be a number, got str"),
        ({"0": None, "1": 0.6}, "probability of '0' must be a number, got NoneType"),
        ({"0": [0.4], "1": 0.6}, "must be a number, got list"),
    ],
)
def test_a_probability_that_is_not_a_number_is_an_error(
    probabilities: dict[str, Any], reason: str
) -> None:
    rows = [
        {"output": {"label": "1", "probabilities": {"0": 0.3, "1": 0.7}}, "reference": "1"},
        {"output": {"label": "0", "probabilities": probabilities}, "reference": "0"},
    ]
    result, _ = run(rows, "log-loss")
    assert result.outcome is Outcome.ERROR
    assert reason in result.reason


def test_booleans_as_probabilities_read_as_one_and_zero() -> None:
    rows = [
        {"output": {"probabilities": {"cat": True, "dog": False}}, "reference": "cat"},
        {"output": {"probabilities": {"cat": 0.2, "dog": 0.8}}, "reference": "cat"},
    ]
    assert number(rows, "brier", positive="cat") == pytest.approx(
        skm.brier_score_loss(["cat", "cat"], [1.0, 0.2], pos_label="cat")
    )


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        ({"label": {"a": 1}}, "a label must be a string or a number, got dict"),
        ([1, 2], "a label must be a string or a number, got list"),
        ({"label": "1", "probabilities": "high"}, "'probabilities' must be a non-empty object"),
    ],
)
def test_a_label_that_is_not_a_label_is_an_error(output: Any, reason: str) -> None:
    result, summary = run([{"output": output, "reference": "1"}], "accuracy")
    if "probabilities" in str(output):  # a label with junk probabilities: the label is enough
        assert result.outcome is Outcome.SCORED
        result, summary = run([{"output": output, "reference": "1"}], "log-loss")
    assert result.outcome is Outcome.ERROR
    assert reason in result.reason
    assert summary.errors == 1


def test_a_reference_that_is_not_a_label_is_an_error() -> None:
    result, _ = run([{"output": "1", "reference": {"label": 1, "extra": 2}}], "accuracy")
    assert result.outcome is Outcome.ERROR
    assert "a label must be a string or a number, got dict" in result.reason


def test_numpy_scalars_in_memory_are_the_numbers_they_hold() -> None:
    rows = [
        {"output": {"label": np.int64(1), "probabilities": {"1": np.float64(0.8)}}, "reference": 1},
        {"output": {"label": np.int64(0), "probabilities": {"1": 0.3}}, "reference": np.int64(0)},
    ]
    assert number(rows, "accuracy") == 1.0
    assert number(rows, "log-loss") == pytest.approx(skm.log_loss([1, 0], [0.8, 0.3]))


def test_labels_from_argmax_when_some_records_have_no_label() -> None:
    rows: list[dict[str, Any]] = [
        {"output": {"probabilities": {"a": 0.7, "b": 0.2, "c": 0.1}}, "reference": "a"},
        {"output": "b", "reference": "b"},
        {"output": {"probabilities": {"a": 0.1, "b": 0.1, "c": 0.8}}, "reference": "b"},
        {"output": {"label": "c"}, "reference": "c"},
    ]
    pred = ["a", "b", "c", "c"]
    truth = [r["reference"] for r in rows]
    assert number(rows, "f1", average="macro") == pytest.approx(
        skm.f1_score(truth, pred, average="macro")
    )
