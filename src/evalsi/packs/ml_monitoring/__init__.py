"""The ml-monitoring pack: drift, data quality and fairness gaps over a dataset.

All evaluators are dataset-scope. Drift compares the evaluated (current) data with a
reference dataset named by the ``baseline`` param: ``psi``, ``js-distance`` and ``ks`` per
feature. Data quality: ``missing-rate``, ``type-violations``, ``out-of-range``. Fairness
gaps between the groups of a record field: ``demographic-parity-difference`` and
``equalized-odds-difference``. Each equals its reference (scipy, fairlearn), checked in tests.
Guide: docs/guides/packs/ml-monitoring.md.
"""

from evalsi.core import OutputSpec
from evalsi.evaluators import Evaluator
from evalsi.packs._declare import number, passed
from evalsi.packs.ml_monitoring._base import declare, rate
from evalsi.packs.ml_monitoring._drift import JsDistance, Psi
from evalsi.packs.ml_monitoring._fairness import (
    DemographicParityDifference,
    EqualizedOddsDifference,
)
from evalsi.packs.ml_monitoring._ks import Ks
from evalsi.packs.ml_monitoring._quality import MissingRate, OutOfRange, TypeViolations

_DATA = "--data current.jsonl"
_DRIFTED = rate("drifted-share", "share of the judged features that drift")
_NO_DRIFT = passed("no-drift", "passed when no feature drifts")
_DETAIL = OutputSpec("detail", "structured", None, None, "per feature / field / group detail")


def _drift(name: str, cls: type, desc: str, rng: tuple[float, float] | None) -> Evaluator:
    return declare(
        name,
        cls,
        [number(name, desc, rng, False), _DRIFTED, _NO_DRIFT, _DETAIL],
        example=f"evalsi eval {_DATA} --evaluators {name} --param {name}.baseline=reference.jsonl",
    )


psi = _drift("psi", Psi, "largest population stability index over the features, >= 0", None)
js_distance = _drift(
    "js-distance", JsDistance, "largest Jensen-Shannon distance (base 2) over the features", (0, 1)
)
ks = _drift("ks", Ks, "largest two-sample Kolmogorov-Smirnov statistic over the features", (0, 1))


def _quality(name: str, cls: type, desc: str, param: str = "") -> Evaluator:
    example = f"evalsi eval {_DATA} --evaluators {name}" + (
        f" --param '{name}.{param}'" if param else ""
    )
    return declare(name, cls, [rate(name, desc), _DETAIL], example=example)


missing_rate = _quality("missing-rate", MissingRate, "share of records missing the worst field")
type_violations = _quality(
    "type-violations",
    TypeViolations,
    "share of the worst field's values of the wrong type",
    'types={"age": "integer"}',
)
out_of_range = _quality(
    "out-of-range",
    OutOfRange,
    "share of the worst field's values outside its bounds",
    'bounds={"age": [0, 120]}',
)
demographic_parity_difference = declare(
    "demographic-parity-difference",
    DemographicParityDifference,
    [rate("demographic-parity-difference", "largest gap in positive-prediction rate"), _DETAIL],
    requires=("output",),
    example=f"evalsi eval {_DATA} --evaluators demographic-parity-difference "
    "--param demographic-parity-difference.group=metadata.gender",
)
equalized_odds_difference = declare(
    "equalized-odds-difference",
    EqualizedOddsDifference,
    [
        rate("equalized-odds-difference", "larger of the TPR and FPR gaps between groups"),
        rate("tpr-difference", "largest gap in true-positive rate"),
        rate("fpr-difference", "largest gap in false-positive rate"),
        _DETAIL,
    ],
    requires=("output", "reference"),
    example=f"evalsi eval {_DATA} --evaluators equalized-odds-difference "
    "--param equalized-odds-difference.group=metadata.gender",
)

EVALUATORS: tuple[Evaluator, ...] = (
    psi,
    js_distance,
    ks,
    missing_rate,
    type_violations,
    out_of_range,
    demographic_parity_difference,
    equalized_odds_difference,
)
"""Every evaluator of the ml-monitoring pack."""

__all__ = ["EVALUATORS"]
