"""The packs over a real loopback server: Evaluate with ml-classic, text, rag, safety and
ml-monitoring evaluators answers exactly what the embedded ``evalsi.evaluate`` does (metrics,
bootstrap intervals, dataset results), and a drift baseline outside the server's datasets_dir is
refused as bad input, never read."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import evalsi
from evalsi.core import UserError
from tests.support.server_state import server_state, serving

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

CASES: list[tuple[str, list[str], dict[str, Any]]] = [
    ("text/translations.jsonl", ["bleu", "chrf", "ter", "rouge-l"], {}),
    ("safety/safety.jsonl", ["pii-leakage", "secret-leakage", "prompt-injection"], {}),
    ("rag/rag.jsonl", ["context-precision", "context-recall", "context-ndcg"], {}),
]


def _rows(path: Path) -> list[Any]:
    import orjson

    return [orjson.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _classification() -> list[dict[str, Any]]:
    rng = __import__("random").Random(4)
    rows = []
    for i in range(300):
        truth = rng.random() < 0.4
        p = min(max(rng.gauss(0.65 if truth else 0.35, 0.2), 0.0), 1.0)
        rows.append(
            {
                "id": str(i),
                "output": {"label": int(p >= 0.5), "probabilities": {"1": p, "0": 1 - p}},
                "reference": int(truth),
            }
        )
    return rows


def _same(remote: Any, local: Any) -> None:
    assert remote.metrics == local.metrics
    assert [r.scores for r in remote.dataset_results] == [r.scores for r in local.dataset_results]


@pytest.mark.parametrize(("path", "names", "params"), CASES, ids=[c[0] for c in CASES])
def test_pack_evaluators_answer_the_same_on_the_server(
    tmp_path: Path, path: str, names: list[str], params: dict[str, Any]
) -> None:
    rows = _rows(EXAMPLES / path)
    local = evalsi.evaluate(rows, names, params=params, store=":memory:")
    with serving(server_state(tmp_path, runs=False)) as srv, evalsi.Client(srv.url) as client:
        remote = client.evaluate(rows, names, params=params)
    _same(remote, local)


def test_ml_classic_dataset_metrics_and_their_intervals_match(tmp_path: Path) -> None:
    rows = _classification()
    names = ["roc-auc", "f1", "brier", "log-loss", "confusion-matrix"]
    local = evalsi.evaluate(rows, names, store=":memory:", seed=3)
    with serving(server_state(tmp_path, runs=False)) as srv, evalsi.Client(srv.url) as client:
        remote = client.evaluate(rows, names, seed=3)
    _same(remote, local)
    assert remote.metric("roc-auc").ci.method == "bootstrap-percentile"
    (matrix,) = [r for r in remote.dataset_results if r.evaluator == "confusion-matrix"]
    assert matrix.scores[0].structured["labels"] == ["0", "1"]


def test_drift_baseline_is_confined_to_datasets_dir(tmp_path: Path) -> None:
    datasets = tmp_path / "datasets"
    datasets.mkdir()
    shutil.copy(EXAMPLES / "ml-monitoring/reference.jsonl", datasets / "reference.jsonl")
    current = _rows(EXAMPLES / "ml-monitoring/current.jsonl")
    inside = {"psi": {"baseline": "reference.jsonl", "features": ["bmi", "age"]}}
    local = evalsi.evaluate(
        current,
        ["psi"],
        params={"psi": {**inside["psi"], "baseline": str(datasets / "reference.jsonl")}},
        store=":memory:",
    )
    state = server_state(tmp_path, runs=False, datasets_dir=datasets)
    with serving(state) as srv, evalsi.Client(srv.url) as client:
        remote = client.evaluate(current, ["psi"], params=inside)
        assert remote.metrics == local.metrics
        (got,), (want,) = remote.dataset_results, local.dataset_results
        for a, b in zip(got.scores, want.scores, strict=True):
            if isinstance(a.structured, dict):  # the baseline as named: relative on the server
                assert a.structured["baseline"].pop("source") == "reference.jsonl"
                b.structured["baseline"].pop("source")
            assert a == b
        secret = tmp_path / "secret.jsonl"
        secret.write_text('{"input": {"bmi": 1}}\n', encoding="utf-8")
        for outside in (str(secret), "../secret.jsonl"):
            with pytest.raises(UserError, match="baseline") as e:
                client.evaluate(current, ["psi"], params={"psi": {"baseline": outside}})
            assert "datasets_dir" in str(e.value)


def test_cluster_by_gives_the_same_cluster_bootstrap_on_the_server(tmp_path: Path) -> None:
    rows = [{**row, "metadata": {"grp": int(row["id"]) % 12}} for row in _classification()]
    local = evalsi.evaluate(rows, ["roc-auc"], store=":memory:", cluster_by="grp", seed=5)
    with serving(server_state(tmp_path, runs=False)) as srv, evalsi.Client(srv.url) as client:
        remote = client.evaluate(rows, ["roc-auc"], cluster_by="grp", seed=5)
    assert remote.metrics == local.metrics
    assert remote.metric("roc-auc").ci.method == "cluster-bootstrap-percentile"
