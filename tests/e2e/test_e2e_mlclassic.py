"""The ml-classic guide's commands, run as written on the example files, give scikit-learn's
numbers (docs/guides/packs/ml-classic.md)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn import metrics as skm
from sklearn.calibration import calibration_curve

from tests.support.guides import guide_commands, load_jsonl, means, run_json

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guides" / "packs" / "ml-classic.md"


def command(*needles: str) -> list[str]:
    (args,) = [c for c in guide_commands(GUIDE) if all(n in " ".join(c) for n in needles)]
    return args


def load(name: str) -> list[dict[str, Any]]:
    return load_jsonl(ROOT / "examples" / "ml-classic" / name)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "examples" / "ml-classic", tmp_path / "examples" / "ml-classic")
    return tmp_path


def classification() -> dict[str, Any]:
    rows = load("classification.jsonl")
    return {
        "y": np.array([r["reference"] for r in rows]),
        "pred": np.array([r["output"]["label"] for r in rows]),
        "p1": np.array([r["output"]["probabilities"]["1"] for r in rows]),
        "p0": np.array([r["output"]["probabilities"]["0"] for r in rows]),
    }


def test_the_guide_lists_the_commands_this_test_runs() -> None:
    cmds = [" ".join(c) for c in guide_commands(GUIDE)]
    assert (
        "eval --data examples/ml-classic/classification.jsonl --evaluators roc-auc,f1,brier "
        "--format json" in cmds
    )
    assert len(cmds) == 5


def test_roc_auc_f1_brier_as_the_guide_shows(run_evalsi: Callable[..., Any], workdir: Path) -> None:
    out = run_json(run_evalsi, workdir, command("roc-auc,f1,brier"))
    got, c = means(out), classification()
    assert got["roc-auc"] == pytest.approx(skm.roc_auc_score(c["y"], c["p1"]), abs=1e-9)
    assert got["f1"] == pytest.approx(skm.f1_score(c["y"], c["pred"]), abs=1e-9)
    assert got["brier"] == pytest.approx(skm.brier_score_loss(c["y"], c["p1"]), abs=1e-9)
    for m in out["metrics"]:  # dataset metrics get a bootstrap interval around the value
        assert m["ci_method"] == "bootstrap-percentile"
        assert m["ci"][0] <= m["mean"] <= m["ci"][1]


def _ece(y: Any, p: Any, bins: int = 10) -> float:
    prob_true, prob_pred = calibration_curve(y, p, n_bins=bins, strategy="uniform")
    counts = np.bincount(np.searchsorted(np.linspace(0, 1, bins + 1)[1:-1], p), minlength=bins)
    counts = counts[counts > 0]
    return float(np.sum(counts / len(p) * np.abs(prob_true - prob_pred)))


def test_the_other_classification_metrics(run_evalsi: Callable[..., Any], workdir: Path) -> None:
    args = command("accuracy,balanced-accuracy")
    assert run_evalsi(workdir, *args).returncode == 0  # the table, as written
    got, c = means(run_json(run_evalsi, workdir, args)), classification()
    proba = np.c_[c["p0"], c["p1"]]
    expected = {
        "accuracy": skm.accuracy_score(c["y"], c["pred"]),
        "balanced-accuracy": skm.balanced_accuracy_score(c["y"], c["pred"]),
        "mcc": skm.matthews_corrcoef(c["y"], c["pred"]),
        "pr-auc": skm.average_precision_score(c["y"], c["p1"]),
        "log-loss": skm.log_loss(c["y"], proba),
        "ece": _ece(c["y"], c["p1"]),
    }
    for name, value in expected.items():
        assert got[name] == pytest.approx(value, abs=1e-9), name


def test_positive_and_average_params(run_evalsi: Callable[..., Any], workdir: Path) -> None:
    got, c = means(run_json(run_evalsi, workdir, command("f1.positive=0"))), classification()
    assert got["f1"] == pytest.approx(skm.f1_score(c["y"], c["pred"], pos_label=0), abs=1e-9)
    assert got["recall"] == pytest.approx(
        skm.recall_score(c["y"], c["pred"], average="macro"), abs=1e-9
    )


def test_regression(run_evalsi: Callable[..., Any], workdir: Path) -> None:
    got = means(run_json(run_evalsi, workdir, command("regression.jsonl")))
    rows = load("regression.jsonl")
    y, pred = [r["reference"] for r in rows], [r["output"] for r in rows]
    expected = {
        "mae": skm.mean_absolute_error(y, pred),
        "mse": skm.mean_squared_error(y, pred),
        "rmse": skm.root_mean_squared_error(y, pred),
        "r2": skm.r2_score(y, pred),
        "mape": skm.mean_absolute_percentage_error(y, pred),
    }
    for name, value in expected.items():
        assert got[name] == pytest.approx(value, rel=1e-12, abs=1e-9), name


def sklearn_ndcg_at_5() -> float:
    """scikit-learn's NDCG@5 of the ranking example: ranked ids score 10, 9, …, the others 0
    (below every ranked one, so outside the top 5)."""
    rows = load("ranking.jsonl")
    pool = sorted({i for r in rows for i in r["output"] + r["reference"]})
    y_true = np.array([[float(i in r["reference"]) for i in pool] for r in rows])
    y_score = np.array(
        [[10.0 - r["output"].index(i) if i in r["output"] else 0.0 for i in pool] for r in rows]
    )
    return float(skm.ndcg_score(y_true, y_score, k=5))


def test_ranking(run_evalsi: Callable[..., Any], workdir: Path) -> None:
    out = run_json(run_evalsi, workdir, command("ranking.jsonl"))
    got = means(out)
    rows = load("ranking.jsonl")
    assert got["ndcg"] == pytest.approx(sklearn_ndcg_at_5(), abs=1e-9)
    hits = [np.isin(r["output"], r["reference"]) for r in rows]
    n_rel = [len(r["reference"]) for r in rows]
    ap = [
        float((np.cumsum(h) / np.arange(1, h.size + 1) * h).sum() / n)
        for h, n in zip(hits, n_rel, strict=True)
    ]
    rr = [1.0 / (int(np.argmax(h)) + 1) if h.any() else 0.0 for h in hits]
    expected = {
        "map": np.mean(ap),
        "mrr": np.mean(rr),
        "recall-at-k": np.mean([h[:5].sum() / n for h, n in zip(hits, n_rel, strict=True)]),
        "precision-at-k": np.mean([h[:5].sum() / 5 for h in hits]),
        "hit-rate": np.mean([float(h[:1].any()) for h in hits]),
    }
    for name, value in expected.items():
        assert got[name] == pytest.approx(float(value), abs=1e-12), name
    assert {m["ci_method"] for m in out["metrics"]} == {"t"}  # means over queries


def test_the_python_example_runs_as_written(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (code,) = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.DOTALL)
    monkeypatch.chdir(workdir)
    exec(compile(code, str(GUIDE), "exec"), {})
    f1, ndcg = capsys.readouterr().out.splitlines()
    assert float(f1) == pytest.approx(skm.f1_score([1, 1, 0], [1, 0, 0]))
    assert float(ndcg.split()[0]) == pytest.approx(sklearn_ndcg_at_5(), abs=1e-12)
