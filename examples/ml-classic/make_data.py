"""Rebuild the three ml-classic example files from scikit-learn's bundled datasets.

- ``classification.jsonl``: a logistic regression fitted on half of the breast-cancer data
  (569 tumours) predicts 60 tumours of the other half: label and probabilities per record,
  reference 1 for benign, 0 for malignant (scikit-learn's coding).
- ``regression.jsonl``: a ridge regression fitted on half of the diabetes data predicts disease
  progression one year on for 40 patients of the other half.
- ``ranking.jsonl``: a nearest-neighbour search over 30 wines returns, for each of 12 query
  wines, the 10 closest (standardised chemistry); the relevant wines are those of the query's
  cultivar.

    python examples/ml-classic/make_data.py
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.datasets import load_breast_cancer, load_diabetes, load_wine
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

HERE = Path(__file__).resolve().parent


def write(name: str, rows: list[dict[str, Any]]) -> None:
    with (HERE / name).open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def classification() -> list[dict[str, Any]]:
    x, y = load_breast_cancer(return_X_y=True)
    model = make_pipeline(StandardScaler(), LogisticRegression(C=0.01, max_iter=1000))
    model.fit(x[::2], y[::2])
    xt, yt = x[1::2][:60], y[1::2][:60]
    p1 = np.round(model.predict_proba(xt)[:, 1], 4)
    return [
        {
            "id": f"t{i:02d}",
            "output": {
                "label": int(p >= 0.5),
                "probabilities": {"0": round(1 - float(p), 4), "1": float(p)},
            },
            "reference": int(t),
        }
        for i, (t, p) in enumerate(zip(yt, p1, strict=True))
    ]


def regression() -> list[dict[str, Any]]:
    x, y = load_diabetes(return_X_y=True)
    model = Ridge(alpha=0.5).fit(x[::2], y[::2])
    xt, yt = x[1::2][:40], y[1::2][:40]
    pred = np.round(model.predict(xt), 1)
    return [
        {"id": f"p{i:02d}", "output": float(p), "reference": float(t)}
        for i, (t, p) in enumerate(zip(yt, pred, strict=True))
    ]


def ranking() -> list[dict[str, Any]]:
    x, y = load_wine(return_X_y=True)
    z = StandardScaler().fit_transform(x)
    order = np.random.default_rng(3).permutation(len(y))
    pool, queries = order[:30], order[30:42]
    rows = []
    for q in queries:
        dist = np.linalg.norm(z[pool] - z[q], axis=1)
        top = pool[np.argsort(dist, kind="stable")[:10]]
        rows.append(
            {
                "id": f"q{q:03d}",
                "input": f"wines like w{q:03d}",
                "output": [f"w{i:03d}" for i in top],
                "reference": sorted(f"w{i:03d}" for i in pool if y[i] == y[q]),
            }
        )
    return rows


def main() -> None:
    write("classification.jsonl", classification())
    write("regression.jsonl", regression())
    write("ranking.jsonl", ranking())


if __name__ == "__main__":
    main()
