"""ml-monitoring drift on real data: psi, js-distance and ks equal their references.

Golden vectors: scikit-learn's breast-cancer data split in two (even rows the reference, odd
rows the current data) with a shift put into three features, and the wine data's cultivar as
a categorical feature. KS is ``scipy.stats.ks_2samp``; JS is
``scipy.spatial.distance.jensenshannon`` (base 2) on bins the test builds itself with
``pandas.cut``; PSI is its textbook formula on those bins. Everything runs through the public
``evalsi.evaluate``.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy.spatial.distance import jensenshannon
from scipy.stats import ks_2samp
from sklearn.datasets import load_breast_cancer, load_wine

import evalsi
from evalsi.core import EvaluationResult, Outcome, ParamError, Score, UserError
from evalsi.evaluators import Registry
from evalsi.packs import ml_monitoring

REG = Registry(ml_monitoring.EVALUATORS)
SHIFTED = {"mean radius": 1.1, "mean texture": 1.08, "worst smoothness": 0.93}


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def run(data: Any, name: str, **params: Any) -> EvaluationResult:
    """One evaluator through the public API; its dataset-level result."""
    r = evalsi.evaluate(
        data=data, evaluators=[name], params={name: params}, registry=REG, store=":memory:"
    )
    (result,) = [x for x in r.results if x.evaluator == name and x.record_id == ""]
    return result


def scored(data: Any, name: str, **params: Any) -> dict[str, Score]:
    result = run(data, name, **params)
    assert result.outcome is Outcome.SCORED, result.reason
    return {s.name: s for s in result.scores}


# -- references written independently of the pack ------------------------------------------


def shares(ref: np.ndarray, cur: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Reference and current shares in the stated bins, built with pandas.cut."""
    edges = np.unique(np.quantile(ref, np.arange(1, bins) / bins, method="inverted_cdf"))
    top = ref.max()
    if (edges == top).all():  # the stated fallback: below, equal to, above the one value
        return (
            np.array([np.mean(ref < top), np.mean(ref == top), np.mean(ref > top)]),
            np.array([np.mean(cur < top), np.mean(cur == top), np.mean(cur > top)]),
        )
    cuts = [-np.inf, *edges.tolist(), np.inf]
    r = pd.cut(pd.Series(ref), cuts, right=True).value_counts(sort=False).to_numpy() / ref.size
    c = pd.cut(pd.Series(cur), cuts, right=True).value_counts(sort=False).to_numpy() / cur.size
    return r, c


def psi_of(r: np.ndarray, c: np.ndarray, eps: float = 1e-4) -> float:
    r = np.where(r == 0, eps, r)
    c = np.where(c == 0, eps, c)
    return float(np.sum((c - r) * np.log(c / r)))


def category_shares(ref: list[str], cur: list[str]) -> tuple[np.ndarray, np.ndarray]:
    rc, cc = Counter(ref), Counter(cur)
    cats = sorted(set(rc) | set(cc))
    return (
        np.array([rc[k] / len(ref) for k in cats]),
        np.array([cc[k] / len(cur) for k in cats]),
    )


# -- golden: breast cancer ------------------------------------------------------------------


@pytest.fixture(scope="module")
def cancer(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    data = load_breast_cancer()
    names = [str(n) for n in data.feature_names]
    ref, cur = data.data[::2], data.data[1::2].copy()
    for name, factor in SHIFTED.items():
        cur[:, names.index(name)] *= factor
    rows = [{"input": dict(zip(names, map(float, x), strict=True))} for x in ref]
    path = write_jsonl(tmp_path_factory.mktemp("cancer") / "reference.jsonl", rows)
    current = [{"id": f"c{i}", "input": dict(zip(names, map(float, x), strict=True))}
               for i, x in enumerate(cur)]  # fmt: skip
    return {"names": names, "ref": ref, "cur": cur, "baseline": path, "current": current}


@pytest.fixture(scope="module")
def cancer_runs(cancer: dict[str, Any]) -> dict[str, dict[str, Score]]:
    base = cancer["baseline"]
    return {
        "psi": scored(cancer["current"], "psi", baseline=base),
        "psi-7": scored(cancer["current"], "psi", baseline=base, bins=7, epsilon=1e-6),
        "js": scored(cancer["current"], "js-distance", baseline=base),
        "ks": scored(cancer["current"], "ks", baseline=base),
    }


def test_psi_per_feature_matches_the_formula_on_reference_quantile_bins(
    cancer: dict[str, Any], cancer_runs: dict[str, dict[str, Score]]
) -> None:
    got = cancer_runs["psi"]
    expected = {}
    for j, name in enumerate(cancer["names"]):
        r, c = shares(cancer["ref"][:, j], cancer["cur"][:, j], 10)
        expected[name] = psi_of(r, c)
        assert got[f"psi[{name}]"].number == pytest.approx(expected[name], abs=1e-12), name
    assert got["psi"].number == pytest.approx(max(expected.values()), abs=1e-12)
    drifted = [k for k, v in expected.items() if v >= 0.2]
    assert drifted, "the shift must be visible"
    assert got["drifted-share"].number == pytest.approx(len(drifted) / len(expected))
    assert got["no-drift"].passed is False
    detail = got["detail"].structured
    assert [k for k, v in detail["features"].items() if v["drifted"]] == drifted
    assert (detail["bins"], detail["epsilon"], detail["threshold"]) == (10, 1e-4, 0.2)
    assert detail["baseline"]["records"] == len(cancer["ref"])
    assert detail["baseline"]["version"].startswith("sha256:")


def test_psi_bins_and_epsilon_params(
    cancer: dict[str, Any], cancer_runs: dict[str, dict[str, Score]]
) -> None:
    got = cancer_runs["psi-7"]
    for j, name in enumerate(cancer["names"]):
        r, c = shares(cancer["ref"][:, j], cancer["cur"][:, j], 7)
        assert got[f"psi[{name}]"].number == pytest.approx(psi_of(r, c, 1e-6), abs=1e-12)
        assert got["detail"].structured["features"][name]["bins"] == r.size


def test_js_distance_matches_scipy_base_2(
    cancer: dict[str, Any], cancer_runs: dict[str, dict[str, Score]]
) -> None:
    got = cancer_runs["js"]
    expected = {}
    for j, name in enumerate(cancer["names"]):
        r, c = shares(cancer["ref"][:, j], cancer["cur"][:, j], 10)
        expected[name] = float(jensenshannon(r, c, base=2))
        assert got[f"js-distance[{name}]"].number == pytest.approx(expected[name], abs=1e-12)
    assert got["js-distance"].number == pytest.approx(max(expected.values()), abs=1e-12)
    share = sum(v >= 0.1 for v in expected.values()) / len(expected)
    assert got["drifted-share"].number == pytest.approx(share)


def test_ks_statistic_and_p_value_are_ks_2samp(
    cancer: dict[str, Any], cancer_runs: dict[str, dict[str, Score]]
) -> None:
    got = cancer_runs["ks"]
    stats, drifted = {}, []
    for j, name in enumerate(cancer["names"]):
        res = ks_2samp(cancer["ref"][:, j], cancer["cur"][:, j])
        stats[name] = float(res.statistic)
        assert got[f"ks[{name}]"].number == float(res.statistic), name
        assert got[f"p-value[{name}]"].number == float(res.pvalue), name
        if res.pvalue < 0.05:
            drifted.append(name)
    assert got["ks"].number == max(stats.values())
    assert set(SHIFTED) <= set(drifted)
    assert got["drifted-share"].number == pytest.approx(len(drifted) / len(stats))
    assert "p-value < 0.05" in got["ks"].explanation


@pytest.mark.parametrize("method", ["asymp", "exact"])
def test_ks_method_param_is_scipys(cancer: dict[str, Any], method: str) -> None:
    names = ["mean radius", "mean area", "worst smoothness"]
    cols = [cancer["names"].index(n) for n in names]
    got = scored(cancer["current"], "ks", baseline=cancer["baseline"], features=names,
                 method=method, alpha=0.01)  # fmt: skip
    for name, j in zip(names, cols, strict=True):
        res = ks_2samp(cancer["ref"][:, j], cancer["cur"][:, j], method=method)
        assert got[f"ks[{name}]"].number == float(res.statistic)
        assert got[f"p-value[{name}]"].number == float(res.pvalue)
        assert got["detail"].structured["features"][name]["drifted"] is bool(res.pvalue < 0.01)


def test_unequal_sample_sizes_and_ties(tmp_path: Path) -> None:
    # wine alcohol rounded to one decimal: many ties across two samples of different sizes
    x = np.round(load_wine().data[:, 0], 1)
    ref, cur = x[:110], x[110:] + 0.2
    base = write_jsonl(tmp_path / "ref.jsonl", [{"input": {"alcohol": float(v)}} for v in ref])
    data = [{"input": {"alcohol": float(v)}} for v in cur]
    got = scored(data, "ks", baseline=base)
    res = ks_2samp(ref, cur)
    assert (got["ks"].number, got["p-value[alcohol]"].number) == (res.statistic, res.pvalue)
    r, c = shares(ref, cur, 10)
    assert scored(data, "psi", baseline=base)["psi"].number == pytest.approx(psi_of(r, c))


# -- categorical ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wine(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    data = load_wine()
    cultivar = [str(data.target_names[t]) for t in data.target]
    rows = [
        {"input": {"cultivar": c, "alcohol": float(a)}}
        for c, a in zip(cultivar, data.data[:, 0], strict=True)
    ]
    path = write_jsonl(tmp_path_factory.mktemp("wine") / "reference.jsonl", rows)
    # the current window: most class_0 wines gone, and a cultivar never seen before
    cur = [c for i, c in enumerate(cultivar) if c != "class_0" or i % 5 == 0] + ["class_9"] * 4
    current = [{"input": {"cultivar": c, "alcohol": 13.0}} for c in cur]
    return {"ref": cultivar, "cur": cur, "baseline": path, "current": current}


@pytest.mark.parametrize("name", ["psi", "js-distance"])
def test_categorical_feature_uses_category_shares(wine: dict[str, Any], name: str) -> None:
    got = scored(wine["current"], name, baseline=wine["baseline"], features=["cultivar"])
    r, c = category_shares(wine["ref"], wine["cur"])
    expected = psi_of(r, c) if name == "psi" else float(jensenshannon(r, c, base=2))
    assert got[f"{name}[cultivar]"].number == pytest.approx(expected, abs=1e-12)
    entry = got["detail"].structured["features"]["cultivar"]
    assert entry["type"] == "categorical"
    assert entry["categories"] == 4
    assert entry["new_categories"] == ["class_9"]


def test_ks_leaves_categorical_features_out_and_says_so(wine: dict[str, Any]) -> None:
    got = scored(wine["current"], "ks", baseline=wine["baseline"])
    assert set(got) >= {"ks[alcohol]", "p-value[alcohol]"}
    assert "ks[cultivar]" not in got
    entry = got["detail"].structured["features"]["cultivar"]
    assert entry["judged"] is False
    assert "KS compares numerical distributions" in entry["reason"]
    assert "not judged: cultivar" in got["ks"].explanation


def test_ks_with_only_categorical_features_is_an_error(wine: dict[str, Any]) -> None:
    result = run(wine["current"], "ks", baseline=wine["baseline"], features=["cultivar"])
    assert result.outcome is Outcome.ERROR
    assert "no feature could be compared" in result.reason
    assert "KS compares numerical distributions" in result.reason


def test_categorical_param_forces_a_numeric_code_to_categories(tmp_path: Path) -> None:
    ref = [1, 2, 2, 1, 2, 3, 3, 2, 1, 2]
    cur = [1, 1, 1, 2, 3, 3, 1, 1]
    base = write_jsonl(tmp_path / "ref.jsonl", [{"input": {"grade": g}} for g in ref])
    data = [{"input": {"grade": str(g)}} for g in cur]  # "1" and 1 are one category
    got = scored(data, "psi", baseline=base, categorical=["grade"])
    r, c = category_shares([str(g) for g in ref], [str(g) for g in cur])
    assert got["psi"].number == pytest.approx(psi_of(r, c), abs=1e-12)
    assert got["detail"].structured["features"]["grade"]["type"] == "categorical"


# -- edge cases -----------------------------------------------------------------------------


def test_constant_reference_collapses_to_below_equal_above(tmp_path: Path) -> None:
    ref = [{"input": {"flag": 5.0}} for _ in range(50)]
    base = write_jsonl(tmp_path / "ref.jsonl", ref)
    cur = np.array([5.0] * 30 + [4.0] * 5 + [7.5] * 15)
    got = scored([{"input": {"flag": float(v)}} for v in cur], "psi", baseline=base)
    r, c = shares(np.full(50, 5.0), cur, 10)
    assert r.tolist() == [0.0, 1.0, 0.0]
    assert got["psi"].number == pytest.approx(psi_of(r, c), abs=1e-12)
    entry = got["detail"].structured["features"]["flag"]
    assert (entry["collapsed"], entry["bins"], entry["edges"]) == (True, 3, [5.0])
    assert got["no-drift"].passed is False
    same = scored([{"input": {"flag": 5}} for _ in range(20)], "psi", baseline=base)
    assert (same["psi"].number, same["no-drift"].passed) == (0.0, True)


@pytest.mark.parametrize(
    ("ones", "collapsed"), [(95, True), (85, False)], ids=["mass-at-top", "mass-not-at-top"]
)
def test_heavy_ties_in_the_reference(tmp_path: Path, ones: int, collapsed: bool) -> None:
    ref = np.array([1.0] * ones + [0.0] * (100 - ones))
    base = write_jsonl(tmp_path / "ref.jsonl", [{"input": {"b": float(v)}} for v in ref])
    cur = np.array([1.0] * 60 + [0.0] * 40)
    got = scored([{"input": {"b": float(v)}} for v in cur], "psi", baseline=base)
    r, c = shares(ref, cur, 10)
    assert got["psi[b]"].number == pytest.approx(psi_of(r, c), abs=1e-12)
    entry = got["detail"].structured["features"]["b"]
    assert entry.get("collapsed", False) is collapsed
    assert r[r > 0].size == 2  # zeros and ones never share a bin


def test_missing_values_are_left_out_and_counted(tmp_path: Path) -> None:
    x = load_wine().data[:, 9]  # colour intensity
    ref_rows: list[dict[str, Any]] = [{"input": {"colour": float(v)}} for v in x[:100]]
    ref_rows += [{"input": {"colour": None}}, {"input": {"colour": ""}}, {"input": {}}]
    base = write_jsonl(tmp_path / "ref.jsonl", ref_rows)
    cur_rows: list[dict[str, Any]] = [{"input": {"colour": float(v)}} for v in x[100:]]
    cur_rows += [
        {"input": {"colour": None}},
        {"input": {"colour": "  "}},
        {"input": {"colour": "n/a"}},
    ]
    got = scored(cur_rows, "psi", baseline=base)
    r, c = shares(x[:100], x[100:], 10)
    assert got["psi"].number == pytest.approx(psi_of(r, c), abs=1e-12)
    entry = got["detail"].structured["features"]["colour"]
    assert (entry["reference"], entry["current"]) == (100, len(x) - 100)
    assert (entry["missing"], entry["non_numeric"]) == (2, 1)
    assert entry["reference_missing"] == 3  # null, blank, and the record without the key

    ks = scored(cur_rows, "ks", baseline=base)
    assert ks["p-value[colour]"].number == ks_2samp(x[:100], x[100:]).pvalue


def test_a_feature_without_current_values_is_not_judged(tmp_path: Path) -> None:
    base = write_jsonl(tmp_path / "ref.jsonl", [{"input": {"a": i, "b": i % 3}} for i in range(30)])
    data = [{"input": {"a": i, "b": None}} for i in range(30)]
    got = scored(data, "psi", baseline=base)
    assert got["psi"].number == 0.0  # a is unchanged
    assert "psi[b]" not in got
    assert got["detail"].structured["features"]["b"]["reason"] == "no values in the current data"
    assert "not judged: b" in got["psi"].explanation


def test_a_record_with_none_of_the_features_is_skipped(tmp_path: Path) -> None:
    base = write_jsonl(tmp_path / "ref.jsonl", [{"input": {"a": i}} for i in range(30)])
    data = [{"input": {"a": i}} for i in range(30)] + [{"input": "free text"}, {"output": "x"}]
    r = evalsi.evaluate(data=data, evaluators=["psi"], params={"psi": {"baseline": base}},
                        registry=REG, store=":memory:")  # fmt: skip
    summary = r.metric("psi")
    assert (summary.scored, summary.skipped) == (30, 2)
    assert summary.mean == 0.0


def test_csv_baseline_reads_columns_from_metadata_as_numbers(
    tmp_path: Path, cancer: dict[str, Any]
) -> None:
    names = ["mean radius", "mean texture", "mean smoothness"]
    cols = [cancer["names"].index(n) for n in names]
    ref_csv = tmp_path / "reference.csv"
    cur_csv = tmp_path / "current.csv"
    for path, x in ((ref_csv, cancer["ref"]), (cur_csv, cancer["cur"])):
        lines = [",".join(names)] + [",".join(repr(float(v)) for v in row[cols]) for row in x]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    got = scored(str(cur_csv), "psi", baseline=str(ref_csv))
    for name, j in zip(names, cols, strict=True):
        r, c = shares(cancer["ref"][:, j], cancer["cur"][:, j], 10)
        assert got[f"psi[{name}]"].number == pytest.approx(psi_of(r, c), abs=1e-12)
        assert got["detail"].structured["features"][name]["type"] == "numerical"
    ks = scored(str(cur_csv), "ks", baseline=str(ref_csv), features=["metadata.mean radius"])
    res = ks_2samp(cancer["ref"][:, cols[0]], cancer["cur"][:, cols[0]])
    assert ks["p-value[metadata.mean radius]"].number == res.pvalue


def test_names_read_input_keys_then_metadata(tmp_path: Path) -> None:
    rows = [{"input": {"x": i, "site": "in-input"}, "site": f"s{i % 2}", "w": i}
            for i in range(20)]  # fmt: skip
    base = write_jsonl(tmp_path / "ref.jsonl", rows)
    got = scored(rows, "psi", baseline=base, features=["x", "w", "metadata.site", "input.site"])
    features = got["detail"].structured["features"]
    assert list(features) == ["x", "w", "metadata.site", "input.site"]
    assert features["w"]["type"] == "numerical"  # not in the input: read from metadata
    assert features["metadata.site"]["categories"] == 2
    assert features["input.site"]["categories"] == 1
    assert all(v["value"] == 0.0 for v in features.values())


def test_tabular_row_features_are_read(tmp_path: Path, cancer: dict[str, Any]) -> None:
    j = cancer["names"].index("mean radius")
    ref = [{"input": {"row": {"features": {"r": float(v)}}}} for v in cancer["ref"][:, j]]
    cur = [{"input": {"row": {"features": {"r": float(v)}, "prediction": 1}}}
           for v in cancer["cur"][:, j]]  # fmt: skip
    got = scored(cur, "ks", baseline=write_jsonl(tmp_path / "ref.jsonl", ref))
    res = ks_2samp(cancer["ref"][:, j], cancer["cur"][:, j])
    assert (got["ks[r]"].number, got["p-value[r]"].number) == (res.statistic, res.pvalue)


def test_thresholds_decide_drift(cancer: dict[str, Any], cancer_runs: dict[str, Any]) -> None:
    values = {k[4:-1]: s.number for k, s in cancer_runs["psi"].items() if k.startswith("psi[")}
    cut = sorted(values.values())[-5]  # exactly five features at or above it
    got = scored(cancer["current"], "psi", baseline=cancer["baseline"], threshold=cut)
    assert got["drifted-share"].number == pytest.approx(5 / len(values))
    high = scored(cancer["current"], "psi", baseline=cancer["baseline"], threshold=100.0)
    assert (high["no-drift"].passed, high["drifted-share"].number) == (True, 0.0)


# -- refusals -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "params", "error", "message"),
    [
        ("psi", {"bins": 1}, ParamError, "'bins' must be >= 2"),
        ("psi", {"epsilon": 0.0}, ParamError, "'epsilon' must be between 0 and 1"),
        ("psi", {"threshold": -1.0}, ParamError, "'threshold'"),
        ("js-distance", {"threshold": 1.5}, ParamError, "'threshold'"),
        ("ks", {"alpha": 0.0}, ParamError, "'alpha'"),
        ("ks", {"method": "fast"}, ParamError, "'method'"),
        ("psi", {"features": []}, ParamError, "'features' is empty"),
        ("psi", {"features": ["a", "a"]}, ParamError, "names 'a' twice"),
        ("psi", {"categorical": ["zzz"]}, ParamError, "'zzz', not among the features"),
        ("psi", {"features": ["bmi_typo"]}, UserError, "feature 'bmi_typo' has no value"),
        ("psi", {"baseline": "missing.jsonl"}, UserError, "'baseline': missing.jsonl: no such"),
        ("psi", {"baseline": " "}, ParamError, "'baseline' is empty"),
    ],
)
def test_bad_params_fail_before_any_work(
    tmp_path: Path, name: str, params: dict[str, Any], error: type[Exception], message: str
) -> None:
    base = write_jsonl(tmp_path / "ref.jsonl", [{"input": {"a": i}} for i in range(10)])
    given = {"baseline": base, **params}
    with pytest.raises(error, match=message.replace("(", r"\(").replace("[", r"\[")):
        evalsi.evaluate(data=[{"input": {"a": 1}}], evaluators=[name], params={name: given},
                        registry=REG, store=":memory:")  # fmt: skip


def test_a_baseline_is_required_and_must_hold_records(tmp_path: Path) -> None:
    with pytest.raises(ParamError, match="missing required param"):
        evalsi.evaluate(data=[{"input": {"a": 1}}], evaluators=["psi"], registry=REG,
                        store=":memory:")  # fmt: skip
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(UserError, match="holds no records"):
        run([{"input": {"a": 1}}], "psi", baseline=str(empty))
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"input": {"a": 1}}\n{oops\n', encoding="utf-8")
    with pytest.raises(UserError, match=r"psi: param 'baseline': .*broken.jsonl:2") as caught:
        run([{"input": {"a": 1}}], "psi", baseline=str(broken))
    assert caught.value.hint == "fix that row of the baseline file"
    text_only = write_jsonl(tmp_path / "text.jsonl", [{"input": "hello"}])
    with pytest.raises(UserError, match="has no features"):
        run([{"input": {"a": 1}}], "psi", baseline=text_only)
