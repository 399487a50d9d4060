"""Rebuild reference.jsonl and current.jsonl from scikit-learn's diabetes data (442 patients).

The rows are split at random into two halves. A logistic regression fitted on the reference
half predicts "progression above 140" (label 1) for every row. The current half then gets
what a production window might bring: body-mass index up by 2.5 (drift), six blood
pressures lost (null), three recorded as 0 (a sensor fault) and two ages typed as text.

    python examples/ml-monitoring/make_data.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

HERE = Path(__file__).resolve().parent
FEATURES = ["age", "sex", "bmi", "bp", "s5"]


def main() -> None:
    frame = load_diabetes(scaled=False, as_frame=True).frame
    x = frame[FEATURES].to_numpy()
    y = (frame["target"].to_numpy() > 140).astype(int)
    order = np.random.default_rng(7).permutation(len(frame))
    ref, cur = np.sort(order[: len(order) // 2]), np.sort(order[len(order) // 2 :])
    model = make_pipeline(StandardScaler(), LogisticRegression())
    model.fit(x[ref], y[ref])
    shifted = x.copy()
    shifted[cur, 2] += 2.5
    pred = model.predict(shifted)
    rows = {
        i: {
            "id": f"p{i:03d}",
            "input": {
                "age": int(x[i, 0]),
                "sex": int(x[i, 1]),
                "bmi": round(float(shifted[i, 2]), 1),
                "bp": float(x[i, 3]),
                "s5": float(x[i, 4]),
            },
            "output": int(pred[i]),
            "reference": int(y[i]),
        }
        for i in range(len(frame))
    }
    for i in cur[5:11]:
        rows[i]["input"]["bp"] = None
    for i in cur[20:23]:
        rows[i]["input"]["bp"] = 0.0
    for i in cur[40:42]:
        rows[i]["input"]["age"] = "unknown"
    for name, part in (("reference", ref), ("current", cur)):
        with (HERE / f"{name}.jsonl").open("w", encoding="utf-8") as f:
            for i in part:
                f.write(json.dumps(rows[i]) + "\n")


if __name__ == "__main__":
    main()
