"""The numbers of a calibration: agreement with the humans, position bias, length bias.

Pure functions over the compared records (the judge's value and the humans' ratings of each),
returning the JSON blocks of ``CalibrationResult``. Every statistic is a ``{"value", "ci",
"ci_method"}`` object (plus ``"p_value"`` where one exists); ``value`` is null when the
statistic is undefined on these data, and the block's ``notes`` say why.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.special as sc

from evalsi.core import Interval
from evalsi.runs.calibration._labels import LabelKind, LabelValue
from evalsi.stats import (
    AlphaLevel,
    alpha_interval,
    cohen_kappa,
    kappa_interval,
    krippendorff_alpha,
    pearson,
    spearman,
    t_interval,
    wilson,
)

PAIRWISE_WIN = {"output": 1.0, "tie": 0.5, "baseline": 0.0}
"""``pairwise``'s labels as the output's win (its ``pairwise-win`` score)."""


def stat(
    value: float | None, ci: Interval | None = None, p_value: float | None = None
) -> dict[str, Any]:
    """The JSON form of one statistic."""
    out: dict[str, Any] = {
        "value": value,
        "ci": [ci.low, ci.high] if ci is not None and ci.low is not None else None,
        "ci_method": ci.method if ci is not None else None,
    }
    if p_value is not None:
        out["p_value"] = p_value
    return out


def consensus(kind: LabelKind, ratings: dict[str, LabelValue]) -> LabelValue | None:
    """The humans' verdict on one record: the mean for numbers, else the majority label
    (None when the most frequent labels tie)."""
    values = list(ratings.values())
    if kind == "number":
        return float(np.mean([float(v) for v in values]))
    top = Counter(values).most_common()
    if len(top) > 1 and top[0][1] == top[1][1]:
        return None
    return top[0][0]


def as_number(kind: LabelKind, value: LabelValue) -> float | None:
    """A value on a numeric scale for correlations: numbers, pass = 1, and pairwise's labels."""
    if kind == "label":
        return PAIRWISE_WIN.get(str(value))
    return float(value)


# ---------------------------------------------------------------------------------------------
# Agreement


def agreement(
    kind: LabelKind,
    judge: Sequence[LabelValue],
    ratings: Sequence[dict[str, LabelValue]],
    raters: Sequence[str],
    *,
    level: AlphaLevel,
    seed: int = 0,
) -> dict[str, Any]:
    """Judge vs the humans' consensus (accuracy and kappa, or r, rho and MAE) and
    Krippendorff's alpha among the humans alone and with the judge as one more rater."""
    notes: list[str] = []
    pairs = [(j, consensus(kind, r)) for j, r in zip(judge, ratings, strict=True)]
    kept = [(j, h) for j, h in pairs if h is not None]  # pairs with a human verdict
    if len(kept) < len(pairs):
        notes.append(
            f"{len(pairs) - len(kept)} record(s) without a majority label among the raters "
            "are left out of accuracy and kappa (alpha uses them)"
        )
    out: dict[str, Any] = {"n": len(kept), "against": _against(raters)}
    if kind == "number":
        out.update(_numeric(kept, seed, notes))
    else:
        out.update(_categorical(kept, seed, notes))
    out["krippendorff_alpha"] = _alpha(kind, judge, ratings, raters, level, seed, notes)
    out["notes"] = notes
    return out


def _against(raters: Sequence[str]) -> str:
    if len(raters) == 1:
        return "the single rater's label"
    return f"the consensus of {len(raters)} raters (majority label, or mean score)"


def _categorical(
    kept: list[tuple[LabelValue, LabelValue]], seed: int, notes: list[str]
) -> dict[str, Any]:
    judge = [j for j, _ in kept]
    human = [h for _, h in kept]
    if not kept:
        return {"accuracy": stat(None), "cohen_kappa": stat(None), "confusion": None}
    hits = sum(j == h for j, h in kept)
    kappa = cohen_kappa(human, judge)
    if kappa is None:
        notes.append("Cohen's kappa is undefined: the judge and the humans used one same label")
    labels = sorted({*judge, *human}, key=str)
    index = {v: i for i, v in enumerate(labels)}
    matrix = [[0] * len(labels) for _ in labels]
    for j, h in kept:
        matrix[index[h]][index[j]] += 1
    unseen = sorted({str(j) for j in judge} - {str(h) for h in human})
    if unseen:
        notes.append(f"the judge gave label(s) no human gave: {', '.join(unseen)}")
    return {
        "accuracy": stat(hits / len(kept), wilson(hits, len(kept))),
        "cohen_kappa": stat(
            kappa, kappa_interval(human, judge, seed=seed) if kappa is not None else None
        ),
        "confusion": {
            "labels": [_json_label(v) for v in labels],
            "rows": "humans",
            "columns": "judge",
            "matrix": matrix,
        },
    }


def _json_label(value: LabelValue) -> Any:
    return value if isinstance(value, (bool, str)) else float(value)


def _numeric(
    kept: list[tuple[LabelValue, LabelValue]], seed: int, notes: list[str]
) -> dict[str, Any]:
    judge = np.array([float(j) for j, _ in kept])
    human = np.array([float(h) for _, h in kept])
    out: dict[str, Any] = {"pearson": stat(None), "spearman": stat(None), "mae": stat(None)}
    if judge.size >= 1:
        errors = np.abs(judge - human)
        out["mae"] = stat(float(errors.mean()), t_interval(errors) if errors.size > 1 else None)
    if judge.size >= 2:
        r = pearson(human, judge)
        rho = spearman(human, judge, seed=seed)
        out["pearson"] = stat(r.value, r.ci, r.p_value)
        out["spearman"] = stat(rho.value, rho.ci, rho.p_value)
        if r.value is None:
            notes.append(
                "correlations are undefined: the judge's or the humans' scores are constant"
            )
    return out


def _alpha(
    kind: LabelKind,
    judge: Sequence[LabelValue],
    ratings: Sequence[dict[str, LabelValue]],
    raters: Sequence[str],
    level: AlphaLevel,
    seed: int,
    notes: list[str],
) -> dict[str, Any]:
    codes: dict[LabelValue, float] = {}
    if kind != "number":
        every = {*judge, *(v for r in ratings for v in r.values())}
        codes = {v: float(i) for i, v in enumerate(sorted(every, key=str))}

    def code(value: LabelValue) -> float:
        return codes[value] if kind != "number" else float(value)

    humans = np.full((len(raters), len(ratings)), np.nan)
    row = {name: i for i, name in enumerate(raters)}
    for unit, given in enumerate(ratings):
        for name, value in given.items():
            humans[row[name], unit] = code(value)
    with_judge = np.vstack([humans, [[code(j) for j in judge]]])
    out: dict[str, Any] = {"level": level, "humans": None, "with_judge": None}
    for key, data in (("humans", humans), ("with_judge", with_judge)):
        if key == "humans" and np.sum(np.sum(~np.isnan(humans), axis=0) >= 2) == 0:
            continue  # one rating per record: no agreement among humans to measure
        alpha = krippendorff_alpha(data, level=level)
        ci: Interval | None = None
        if alpha is not None:
            try:
                ci = alpha_interval(data, level=level, seed=seed)
            except ValueError as e:
                notes.append(f"no interval for alpha ({key}): {e}")
        out[key] = stat(alpha, ci)
    if out["humans"] is None and len(raters) > 1:
        notes.append("alpha among the humans needs records rated by two raters or more")
    return out


# ---------------------------------------------------------------------------------------------
# Biases


def position_bias(verdicts: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """From ``pairwise``'s two verdicts per pair (output shown first, baseline shown first):
    how often the verdict flips with the order, and how often the judge picks whichever
    response is shown first (0.5 = no position preference; ties are left out)."""
    n = len(verdicts)
    flips = sum(a != b for a, b in verdicts)
    first = second = ties = 0
    for straight, swapped in verdicts:
        for verdict, shown_first in ((straight, "output"), (swapped, "baseline")):
            if verdict == "tie":
                ties += 1
            elif verdict == shown_first:
                first += 1
            else:
                second += 1
    decided = first + second
    return {
        "pairs": n,
        "flip_rate": stat(flips / n if n else None, wilson(flips, n) if n else None),
        "position_a_rate": stat(
            first / decided if decided else None,
            wilson(first, decided) if decided else None,
            _binomial_p(first, decided) if decided else None,
        ),
        "position_a": first,
        "position_b": second,
        "ties": ties,
    }


def _binomial_p(k: int, n: int) -> float:
    """Two-sided exact binomial test of k successes in n against p = 0.5."""
    low = float(sc.bdtr(k, n, 0.5))
    high = 1.0 - float(sc.bdtr(k - 1, n, 0.5)) if k > 0 else 1.0
    return min(1.0, 2.0 * min(low, high))


def length_bias(
    lengths: Sequence[float],
    judge: Sequence[float | None],
    humans: Sequence[float | None],
    *,
    measure: str,
    seed: int = 0,
) -> dict[str, Any]:
    """Correlation of the judge's score with the output's length, beside the humans' own."""
    out: dict[str, Any] = {"length": measure}
    for key, values in (("judge", judge), ("humans", humans)):
        pairs = [(x, y) for x, y in zip(lengths, values, strict=True) if y is not None]
        block: dict[str, Any] = {"n": len(pairs), "pearson": stat(None), "spearman": stat(None)}
        if len(pairs) >= 2:
            x = np.array([p[0] for p in pairs], dtype=np.float64)
            y = np.array([p[1] for p in pairs], dtype=np.float64)
            r, rho = pearson(x, y), spearman(x, y, seed=seed)
            block["pearson"] = stat(r.value, r.ci, r.p_value)
            block["spearman"] = stat(rho.value, rho.ci, rho.p_value)
        out[key] = block
    judge_rho, human_rho = out["judge"]["spearman"]["value"], out["humans"]["spearman"]["value"]
    out["excess_spearman"] = (
        None if judge_rho is None or human_rho is None else judge_rho - human_rho
    )
    return out


__all__ = [
    "PAIRWISE_WIN",
    "agreement",
    "as_number",
    "consensus",
    "length_bias",
    "position_bias",
    "stat",
]
