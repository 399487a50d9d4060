"""ml-monitoring fairness gaps equal fairlearn's on real data.

Golden vectors: scikit-learn's diabetes data; a logistic regression fitted on half the
patients predicts "progression above 140" for the other half; groups are the recorded sex
(two groups) and age bands (four). References: fairlearn's ``demographic_parity_difference``
and ``equalized_odds_difference`` (also with ``sample_weight``), and for ``undefined=exclude``
the per-group rates computed here from scikit-learn confusion matrices.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fairlearn.metrics import demographic_parity_difference, equalized_odds_difference
from sklearn.datasets import load_diabetes
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import confusion_matrix
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import evalsi
from evalsi.core import EvaluationResult, Outcome, ParamError, Score
from evalsi.evaluators import Registry
from evalsi.packs import ml_monitoring

REG = Registry(ml_monitoring.EVALUATORS)
DP, EO = "demographic-parity-difference", "equalized-odds-difference"


def run(data: Any, name: str, **params: Any) -> EvaluationResult:
    r = evalsi.evaluate(
        data=data, evaluators=[name], params={name: params}, registry=REG, store=":memory:"
    )
    (result,) = [x for x in r.results if x.evaluator == name and x.record_id == ""]
    return result


def scored(data: Any, name: str, **params: Any) -> dict[str, Score]:
    result = run(data, name, **params)
    assert result.outcome is Outcome.SCORED, result.reason
    return {s.name: s for s in result.scores}


@pytest.fixture(scope="module")
def diabetes() -> dict[str, Any]:
    x, target = load_diabetes(return_X_y=True, scaled=False)
    y = (target > 140).astype(int)
    model = make_pipeline(StandardScaler(), LogisticRegression())
    model.fit(x[::2], y[::2])
    xt, yt = x[1::2], y[1::2]
    pred = model.predict(xt)
    sex = np.where(xt[:, 1] == 1, "F", "M")  # the coding's meaning is not documented: a label
    band = np.select([xt[:, 0] < 40, xt[:, 0] < 50, xt[:, 0] < 60], ["<40", "40s", "50s"], "60+")
    rows = [
        {"id": f"p{i}", "input": {"age": float(xt[i, 0])}, "output": int(pred[i]),
         "reference": int(yt[i]), "metadata": {"sex": str(sex[i]), "band": str(band[i])}}
        for i in range(len(yt))
    ]  # fmt: skip
    return {"rows": rows, "y": yt, "pred": pred, "sex": sex, "band": band}


@pytest.mark.parametrize("group", ["sex", "band"])
def test_gaps_equal_fairlearn(diabetes: dict[str, Any], group: str) -> None:
    d = diabetes
    g = d[group]
    dp = scored(d["rows"], DP, group=f"metadata.{group}")
    eo = scored(d["rows"], EO, group=group)  # a bare name falls back to metadata
    assert dp[DP].number == pytest.approx(
        demographic_parity_difference(d["y"], d["pred"], sensitive_features=g), abs=1e-12
    )
    assert eo[EO].number == pytest.approx(
        equalized_odds_difference(d["y"], d["pred"], sensitive_features=g), abs=1e-12
    )
    for name in np.unique(g):
        mask = g == name
        assert dp[f"selection-rate[{name}]"].number == pytest.approx(d["pred"][mask].mean())
        tn, fp, fn, tp = confusion_matrix(d["y"][mask], d["pred"][mask], labels=[0, 1]).ravel()
        assert eo[f"tpr[{name}]"].number == pytest.approx(tp / (tp + fn))
        assert eo[f"fpr[{name}]"].number == pytest.approx(fp / (fp + tn))
    tpr = [eo[k].number for k in eo if k.startswith("tpr[")]
    assert eo["tpr-difference"].number == pytest.approx(max(tpr) - min(tpr))
    assert eo[EO].number == max(eo["tpr-difference"].number, eo["fpr-difference"].number)
    assert dp["detail"].structured["positive"] == "1"
    assert len(eo["detail"].structured["groups"]) == len(np.unique(g))


def test_string_labels_and_the_positive_param(diabetes: dict[str, Any]) -> None:
    d = diabetes
    names = np.array(["low", "high"])
    rows = [
        {**r, "output": str(names[p]), "reference": str(names[t])}
        for r, p, t in zip(d["rows"], d["pred"], d["y"], strict=True)
    ]
    # no "1": the greatest label ("low") is positive by default
    got = scored(rows, DP, group="metadata.sex")
    assert got["detail"].structured["positive"] == "low"
    assert got[DP].number == pytest.approx(
        demographic_parity_difference(d["y"] == 0, d["pred"] == 0, sensitive_features=d["sex"]),
        abs=1e-12,
    )
    got = scored(rows, EO, group="metadata.sex", positive="high")
    assert got[EO].number == pytest.approx(
        equalized_odds_difference(d["y"], d["pred"], sensitive_features=d["sex"]), abs=1e-12
    )


def test_weighted_reduce_equals_fairlearn_sample_weight(diabetes: dict[str, Any]) -> None:
    d = diabetes
    rng = np.random.default_rng(3)
    counts = np.bincount(rng.integers(0, len(d["y"]), len(d["y"])), minlength=len(d["y"]))
    for name, fn in ((DP, demographic_parity_difference), (EO, equalized_odds_difference)):
        inst = REG.resolve(name).bind({"group": "metadata.band"}).instance
        values = [inst.map(evalsi_record(r)) for r in d["rows"]]
        got = inst.reduce_weighted(inst.prepare(values), counts.astype(float))
        expected = fn(d["y"], d["pred"], sensitive_features=d["band"], sample_weight=counts)
        assert got[0].number == pytest.approx(expected, abs=1e-12)


def evalsi_record(row: dict[str, Any]) -> Any:
    from evalsi.datasets import FieldMap, record_from_dict

    return record_from_dict(row, FieldMap(), line=1, path="<test>")


# -- edge cases -----------------------------------------------------------------------------


def test_a_group_of_one_has_an_undefined_rate(diabetes: dict[str, Any]) -> None:
    d = diabetes
    g = d["sex"].copy()
    lone = int(np.flatnonzero(d["y"] == 1)[0])  # a positive: its FPR is undefined
    g[lone] = "X"
    rows = [{**r, "metadata": {"sex": str(s)}} for r, s in zip(d["rows"], g, strict=True)]
    zero = scored(rows, EO, group="metadata.sex")
    assert zero[EO].number == pytest.approx(
        equalized_odds_difference(d["y"], d["pred"], sensitive_features=g), abs=1e-12
    )
    assert zero["fpr[X]"].number == 0.0  # fairlearn's convention
    assert zero["detail"].structured["undefined_groups"] == ["X"]
    assert zero["detail"].structured["groups"]["X"]["fpr"] is None
    assert "undefined rates counted as 0 for 'X'" in zero[EO].explanation
    assert scored(rows, DP, group="metadata.sex")[DP].number == pytest.approx(
        demographic_parity_difference(d["y"], d["pred"], sensitive_features=g), abs=1e-12
    )
    # exclude: the lone member's FPR leaves the gap; its TPR (0 or 1) stays
    excl = scored(rows, EO, group="metadata.sex", undefined="exclude")
    assert "fpr[X]" not in excl
    fpr, tpr = {}, {}
    for name in ("F", "M", "X"):
        tn, fp, fn, tp = confusion_matrix(
            d["y"][g == name], d["pred"][g == name], labels=[0, 1]
        ).ravel()
        tpr[name] = tp / (tp + fn)
        if fp + tn:
            fpr[name] = fp / (fp + tn)
    expected = max(max(tpr.values()) - min(tpr.values()), max(fpr.values()) - min(fpr.values()))
    assert excl[EO].number == pytest.approx(expected, abs=1e-12)


def test_a_single_class_in_the_reference(diabetes: dict[str, Any]) -> None:
    d = diabetes
    y = np.zeros_like(d["y"])  # nobody progressed: every TPR is undefined
    rows = [{**r, "reference": 0} for r in d["rows"]]
    got = scored(rows, EO, group="metadata.band", positive="1")
    assert got[EO].number == pytest.approx(
        equalized_odds_difference(y, d["pred"], sensitive_features=d["band"]),
        abs=1e-12,
    )
    assert got["tpr-difference"].number == 0.0
    excl = scored(rows, EO, group="metadata.band", positive="1", undefined="exclude")
    assert excl["tpr-difference"].number == 0.0
    assert excl[EO].number == got["fpr-difference"].number


def test_one_group_only_has_no_gap(diabetes: dict[str, Any]) -> None:
    rows = [{**r, "metadata": {"sex": "F"}} for r in diabetes["rows"]]
    got = scored(rows, DP, group="metadata.sex")
    assert got[DP].number == 0.0
    assert "fewer than two groups" in got[DP].explanation


def test_records_without_group_or_label_are_skipped(diabetes: dict[str, Any]) -> None:
    rows = list(diabetes["rows"][:50])
    rows += [{"output": 1, "reference": 0}]  # no group
    rows += [{"output": {"probabilities": {"1": 0.8}}, "reference": 1, "metadata": {"sex": "F"}}]
    rows += [{"output": 1, "metadata": {"sex": "F"}}]  # no reference: EO skips, DP keeps it
    params = {DP: {"group": "metadata.sex"}, EO: {"group": "metadata.sex"}}
    r = evalsi.evaluate(data=rows, evaluators=[DP, EO], params=params, registry=REG,
                        store=":memory:")  # fmt: skip
    assert (r.metric(DP).scored, r.metric(DP).skipped) == (51, 2)
    assert (r.metric(EO).scored, r.metric(EO).skipped) == (50, 3)
    inst = REG.resolve(DP).bind({"group": "metadata.sex"}).instance
    from evalsi.evaluators import Skip

    with pytest.raises(Skip, match="probabilities but no predicted label"):
        inst.map(evalsi_record(rows[-2]))
    with pytest.raises(Skip, match=r"record has no metadata\.sex"):
        inst.map(evalsi_record(rows[-3]))


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        (DP, {"group": " "}, "'group' is empty"),
        (EO, {"group": "sex", "undefined": "skip"}, "'undefined' must be one of"),
        (DP, {}, "missing required param"),
    ],
)
def test_bad_params(name: str, params: dict[str, Any], message: str) -> None:
    with pytest.raises(ParamError, match=message):
        run([{"output": 1, "reference": 1, "metadata": {"sex": "F"}}], name, **params)
