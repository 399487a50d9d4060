"""Judge calibration end to end in the library: the judge pack's evaluators ask the stub LLM
server (over real HTTP) for verdicts the tests choose, and the agreement, position bias and
length bias are checked against scikit-learn, scipy, statsmodels and the krippendorff package
computed from those same verdicts and labels."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import krippendorff
import numpy as np
import pytest
from scipy import stats as scipy_stats
from sklearn.metrics import cohen_kappa_score, confusion_matrix

from evalsi.runs import CalibrationResult, calibrate_async
from evalsi.store import CalibrationKey, SqlStore, latest_calibration, list_calibrations
from tests.support.proportions import wilson_reference
from tests.support.registry import BUILTINS
from tests.support.stub_llm import OPENAI_PATH, StubLLM
from tests.unit.runs.calibration.calibration_support import (
    PAIRS,
    QA,
    RATINGS,
    RUBRIC,
    UNSCRIPTED,
    judges_for,
    pair_answers,
    pair_rows,
    qa_answers,
    qa_rows,
    rating_answers,
    rating_rows,
    write_jsonl,
)

SCALE = [1, 2, 3, 4, 5]


def calibrate(*args: Any, **kwargs: Any) -> CalibrationResult:
    return asyncio.run(calibrate_async(*args, **{"registry": BUILTINS, **kwargs}))


@pytest.fixture
def store(tmp_path: Path) -> Any:
    db = SqlStore.open(tmp_path / "evalsi.db")
    yield db
    db.close()


def test_pass_fail_judge_agreement_equals_sklearn(tmp_path: Path, store: SqlStore) -> None:
    write_jsonl(tmp_path / "labels.jsonl", qa_rows())
    with StubLLM(answers=qa_answers(), default=UNSCRIPTED) as stub:
        result = calibrate(
            tmp_path / "labels.jsonl",
            "reference-correctness",
            judges=judges_for(stub.openai_url),
            store=store,
        )
        assert stub.calls(OPENAI_PATH) == len(QA)
    human = [h for *_, h, _ in QA]
    judge = [j for *_, j in QA]
    assert result.exit_code == 0
    assert (result.counts["records"], result.counts["compared"]) == (16, 16)
    a = result.agreement
    assert a is not None
    hits = sum(h == j for h, j in zip(human, judge, strict=True))
    assert a["accuracy"]["value"] == pytest.approx(hits / 16)
    low, high = wilson_reference(hits, 16)
    assert a["accuracy"]["ci"] == pytest.approx([low, high], abs=1e-12)
    assert a["cohen_kappa"]["value"] == pytest.approx(cohen_kappa_score(human, judge), abs=1e-12)
    kappa_ci = a["cohen_kappa"]["ci"]
    assert kappa_ci[0] <= a["cohen_kappa"]["value"] <= kappa_ci[1]
    assert a["confusion"]["labels"] == [False, True]
    expected = confusion_matrix(human, judge, labels=[False, True]).tolist()
    assert a["confusion"]["matrix"] == expected
    alpha = krippendorff.alpha(
        reliability_data=[[float(h) for h in human], [float(j) for j in judge]],
        level_of_measurement="nominal",
    )
    assert a["krippendorff_alpha"]["humans"] is None  # one rater: no human agreement to measure
    assert a["krippendorff_alpha"]["with_judge"]["value"] == pytest.approx(alpha, abs=1e-12)
    assert result.position_bias is None
    lengths = [len(out) for _, _, out, _, _ in QA]
    bias = result.length_bias
    assert bias is not None
    ref = scipy_stats.spearmanr(lengths, [float(j) for j in judge])
    assert bias["judge"]["spearman"]["value"] == pytest.approx(ref.statistic, abs=1e-12)
    ref_h = scipy_stats.pearsonr(lengths, [float(h) for h in human])
    assert bias["humans"]["pearson"]["value"] == pytest.approx(ref_h.statistic, abs=1e-12)
    assert bias["excess_spearman"] == pytest.approx(
        ref.statistic - scipy_stats.spearmanr(lengths, [float(h) for h in human]).statistic
    )
    # stored under the judge, the evaluator, the template and the params
    assert result.judge["template"] == "reference-correctness/v1"
    key = CalibrationKey.of(
        result.judge["identity"],
        "builtin/reference-correctness@1.0.0",
        result.judge["template_hash"],
        {},
    )
    stored = latest_calibration(store, key)
    assert stored is not None
    assert stored.id == result.calibration_id
    assert (stored.n, stored.run_id, stored.metric) == (16, result.run_id, "reference-correctness")
    assert stored.summary["agreement"] == result.to_dict()["agreement"]
    assert stored.labels_version == result.labels["version"]
    assert store.get_run(result.run_id).records == 16  # the judge's scores are a stored run


def test_numeric_judge_with_three_raters_equals_scipy_and_krippendorff(store: SqlStore) -> None:
    with StubLLM(answers=rating_answers(SCALE), default=UNSCRIPTED) as stub:
        result = calibrate(
            rating_rows(),
            "llm-judge",
            params={"rubric": RUBRIC, "scale": SCALE},
            judges=judges_for(stub.openai_url),
            store=store,
        )
    judge = np.array([j for *_, j in RATINGS], dtype=float)  # on the judge's 1-5 scale
    ratings = [r for _, _, r, _ in RATINGS]
    human = np.array([np.mean([v for v in r.values() if v is not None]) for r in ratings])
    a = result.agreement
    assert a is not None
    assert result.labels["raters"] == ["ann", "bo", "cy"]
    ref = scipy_stats.pearsonr(human, judge)
    assert a["pearson"]["value"] == pytest.approx(ref.statistic, abs=1e-12)
    assert a["pearson"]["p_value"] == pytest.approx(ref.pvalue, rel=1e-9)
    ci = ref.confidence_interval()
    assert a["pearson"]["ci"] == pytest.approx([ci.low, ci.high], abs=1e-12)
    rho = scipy_stats.spearmanr(human, judge)
    assert a["spearman"]["value"] == pytest.approx(rho.statistic, abs=1e-12)
    assert a["spearman"]["p_value"] == pytest.approx(rho.pvalue, rel=1e-9)
    assert a["mae"]["value"] == pytest.approx(np.mean(np.abs(judge - human)), abs=1e-12)
    humans = np.array(
        [[np.nan if r[k] is None else r[k] for r in ratings] for k in ("ann", "bo", "cy")],
        dtype=float,
    )
    alpha = a["krippendorff_alpha"]
    assert alpha["level"] == "interval"
    expected = krippendorff.alpha(reliability_data=humans, level_of_measurement="interval")
    assert alpha["humans"]["value"] == pytest.approx(expected, abs=1e-12)
    both = krippendorff.alpha(
        reliability_data=np.vstack([humans, judge]), level_of_measurement="interval"
    )
    assert alpha["with_judge"]["value"] == pytest.approx(both, abs=1e-12)
    lengths = [len(out) for _, out, _, _ in RATINGS]
    bias = result.length_bias
    assert bias is not None
    assert bias["judge"]["spearman"]["value"] == pytest.approx(
        scipy_stats.spearmanr(lengths, judge).statistic, abs=1e-12
    )
    assert bias["humans"]["spearman"]["value"] == pytest.approx(
        scipy_stats.spearmanr(lengths, human).statistic, abs=1e-12
    )
    ordinal = calibrate(
        rating_rows(),
        "llm-judge",
        params={"rubric": RUBRIC, "scale": SCALE},
        judges=judges_for(stub.openai_url),
        store=store,
        level="ordinal",
    )  # every answer cached now: no judge call, same judge scores
    assert ordinal.agreement is not None
    expected = krippendorff.alpha(reliability_data=humans, level_of_measurement="ordinal")
    assert ordinal.agreement["krippendorff_alpha"]["humans"]["value"] == pytest.approx(expected)


def test_pairwise_position_and_length_bias(store: SqlStore) -> None:
    with StubLLM(answers=pair_answers(), default=UNSCRIPTED) as stub:
        result = calibrate(pair_rows(), "pairwise", judges=judges_for(stub.openai_url), store=store)
        assert stub.calls(OPENAI_PATH) == 2 * len(PAIRS)  # each pair asked in both orders
    straight = [{"A": "output", "B": "baseline", "tie": "tie"}[p[4]] for p in PAIRS]
    swapped = [{"A": "baseline", "B": "output", "tie": "tie"}[p[5]] for p in PAIRS]
    flips = sum(s != w for s, w in zip(straight, swapped, strict=True))
    shown_first = [p[4] for p in PAIRS] + [p[5] for p in PAIRS]
    picks_a, picks_b = shown_first.count("A"), shown_first.count("B")
    bias = result.position_bias
    assert bias is not None
    assert bias["pairs"] == len(PAIRS)
    assert bias["flip_rate"]["value"] == pytest.approx(flips / len(PAIRS))
    assert (bias["position_a"], bias["position_b"], bias["ties"]) == (picks_a, picks_b, 2)
    rate = picks_a / (picks_a + picks_b)
    assert bias["position_a_rate"]["value"] == pytest.approx(rate)
    test = scipy_stats.binomtest(picks_a, picks_a + picks_b, 0.5)
    assert bias["position_a_rate"]["p_value"] == pytest.approx(test.pvalue, rel=1e-9)
    # agreement on the pairwise label: a tie when the two orders disagree
    judge = [s if s == w else "tie" for s, w in zip(straight, swapped, strict=True)]
    human = [p[3] for p in PAIRS]
    a = result.agreement
    assert a is not None
    assert a["cohen_kappa"]["value"] == pytest.approx(cohen_kappa_score(human, judge), abs=1e-12)
    # length bias: the output's win against the length difference with the baseline
    win = {"output": 1.0, "tie": 0.5, "baseline": 0.0}
    diffs = [len(p[1]) - len(p[2]) for p in PAIRS]
    length = result.length_bias
    assert length is not None
    assert "minus" in length["length"]
    assert length["judge"]["spearman"]["value"] == pytest.approx(
        scipy_stats.spearmanr(diffs, [win[j] for j in judge]).statistic, abs=1e-12
    )
    assert length["humans"]["pearson"]["value"] == pytest.approx(
        scipy_stats.pearsonr(diffs, [win[h] for h in human]).statistic, abs=1e-12
    )


def test_zero_one_labels_count_as_pass_fail_and_a_metric_can_be_chosen(store: SqlStore) -> None:
    rows = [dict(r, label=int(r["label"])) for r in qa_rows()]
    with StubLLM(answers=qa_answers(), default=UNSCRIPTED) as stub:
        result = calibrate(
            rows, "reference-correctness", judges=judges_for(stub.openai_url), store=store
        )
        assert result.kind == "passed"
        assert result.agreement is not None
        assert result.agreement["n"] == len(QA)
        # llm-judge-passed (pass_threshold) is the pass/fail view of a numeric judge
        graded = [dict(row, label=RATINGS[i][3] >= 4) for i, row in enumerate(rating_rows())]
        for row in graded:
            row.pop("labels")
        stub.configure({"answers": rating_answers(SCALE)})
        passed = calibrate(
            graded,
            "llm-judge",
            params={"rubric": RUBRIC, "scale": SCALE, "pass_threshold": 0.75},
            metric="llm-judge-passed",
            judges=judges_for(stub.openai_url),
            store=store,
        )
    assert passed.metric == "llm-judge-passed"
    assert passed.agreement is not None
    assert passed.agreement["accuracy"]["value"] == pytest.approx(1.0)


def test_records_the_judge_cannot_grade_are_counted_not_compared(store: SqlStore) -> None:
    rows = qa_rows()
    answers = qa_answers()
    answers.pop(next(iter(answers)))  # the first record's prompt is not scripted
    with StubLLM(answers=answers, default=UNSCRIPTED) as stub:
        result = calibrate(
            rows, "reference-correctness", judges=judges_for(stub.openai_url), store=store
        )
    assert (result.counts["compared"], result.counts["errors"]) == (len(QA) - 1, 1)
    assert result.agreement is not None
    assert result.agreement["n"] == len(QA) - 1
    assert len(result.warnings) == 1
    assert "1 of 16 records were not compared" in result.warnings[0]
    assert "did not answer in the format" in result.warnings[0]
    assert result.exit_code == 0


def test_an_unreachable_judge_is_an_infrastructure_failure(store: SqlStore) -> None:
    from tests.support.stub_llm import Fault

    rows = qa_rows()[:2]
    with StubLLM(default=UNSCRIPTED) as stub:
        stub.schedule(*[Fault(status=503, retry_after="0")] * 60, path=OPENAI_PATH)
        judges = judges_for(stub.openai_url)
        judges["default"]["maxConcurrency"] = 1
        result = calibrate(rows, "reference-correctness", judges=judges, store=store)
    assert (result.counts["compared"], result.counts["infra_errors"]) == (0, 2)
    assert result.agreement is None
    assert result.calibration_id is None
    assert result.exit_code == 3
    assert list_calibrations(store) == []


def test_calibrations_are_keyed_by_judge_template_and_params(store: SqlStore) -> None:
    with StubLLM(answers=rating_answers(SCALE), default='{"score": 3, "explanation": "."}') as stub:
        judges = judges_for(stub.openai_url)
        first = calibrate(
            rating_rows(), "llm-judge", params={"rubric": RUBRIC, "scale": SCALE},
            judges=judges, store=store,
        )  # fmt: skip
        other = calibrate(
            rating_rows(), "llm-judge", params={"rubric": "Is it short?", "scale": SCALE},
            judges=judges, store=store,
        )  # fmt: skip
    ids = [c.id for c in list_calibrations(store)]
    assert ids == [other.calibration_id, first.calibration_id]  # newest first
    key = CalibrationKey.of(
        first.judge["identity"],
        "builtin/llm-judge@1.0.0",
        first.judge["template_hash"],
        {"rubric": RUBRIC, "scale": SCALE, "judge": "default"},  # the judge's name is not keyed
    )
    found = latest_calibration(store, key)
    assert found is not None
    assert found.id == first.calibration_id
    renamed = dict(first.judge["identity"], name="strict", secret_ref="env:KEY")
    same = CalibrationKey.of(renamed, key.evaluator_ref, first.judge["template_hash"], {})
    assert same.judge_key == key.judge_key  # the judge's name and secret do not matter
    moved = dict(first.judge["identity"], model="another-model")
    assert CalibrationKey.of(moved, key.evaluator_ref, "h", {}).judge_key != key.judge_key


def test_a_metric_the_evaluator_did_not_give_is_named(store: SqlStore) -> None:
    rows = [
        {k: v for k, v in row.items() if k != "labels"} | {"label": True} for row in rating_rows()
    ]
    with StubLLM(answers=rating_answers(SCALE), default=UNSCRIPTED) as stub:
        result = calibrate(
            rows,
            "llm-judge",
            params={"rubric": RUBRIC, "scale": SCALE},  # no pass_threshold: no pass/fail score
            metric="llm-judge-passed",
            judges=judges_for(stub.openai_url),
            store=store,
        )
    assert (result.counts["compared"], result.counts["skipped"]) == (0, len(RATINGS))
    assert "llm-judge gave no 'llm-judge-passed' score" in result.warnings[0]
    assert result.exit_code == 2
