"""The ml-classic pack: classification, regression and ranking metrics.

Classification and regression metrics are dataset scope (map → prepare → weighted reduce,
whole-array numpy, with bootstrap weights); ranking metrics are record scope, one query per
record, so the run's mean is the dataset figure. Every metric equals scikit-learn's (or the
standard IR definition, stated in ``_ranking``), checked in tests. Registered as
``builtin/<name>@1.0.0``; record shapes in docs/guides/packs/ml-classic.md.
"""

from evalsi.evaluators import Evaluator
from evalsi.packs.ml_classic._base import declare
from evalsi.packs.ml_classic._extract import label_of, read_output, read_truth
from evalsi.packs.ml_classic._labels import (
    F1,
    Accuracy,
    BalancedAccuracy,
    CohenKappa,
    ConfusionMatrix,
    Mcc,
    Precision,
    Recall,
)
from evalsi.packs.ml_classic._probs import Brier, Ece, LogLoss, PrAuc, RocAuc
from evalsi.packs.ml_classic._ranking import (
    AveragePrecision,
    HitRate,
    Mrr,
    Ndcg,
    PrecisionAtK,
    RecallAtK,
)
from evalsi.packs.ml_classic._regression import R2, Mae, Mape, Mse, Rmse

accuracy = declare("accuracy", Accuracy, "fraction of correct labels, 0..1")
balanced_accuracy = declare("balanced-accuracy", BalancedAccuracy, "mean per-class recall, 0..1")
precision = declare("precision", Precision, "precision, 0..1 (param average)")
recall = declare("recall", Recall, "recall, 0..1 (param average)")
f1 = declare("f1", F1, "F1, 0..1 (param average)")
mcc = declare("mcc", Mcc, "Matthews correlation, -1..1", bounds=(-1.0, 1.0))
cohen_kappa = declare("cohen-kappa", CohenKappa, "Cohen's kappa, -1..1", bounds=(-1.0, 1.0))
roc_auc = declare("roc-auc", RocAuc, "area under the ROC curve, 0..1")
pr_auc = declare("pr-auc", PrAuc, "average precision, 0..1")
log_loss = declare(
    "log-loss", LogLoss, "mean negative log-likelihood, >= 0", bounds=None, higher=False
)
brier = declare(
    "brier", Brier, "Brier score, 0..1 (0..2 for 3+ classes)", bounds=(0.0, 2.0), higher=False
)
ece = declare("ece", Ece, "expected calibration error, 0..1", higher=False)
confusion_matrix = declare(
    "confusion-matrix",
    ConfusionMatrix,
    "{labels, matrix}: rows reference, columns prediction",
    output="structured",
    bounds=None,
    higher=None,
)


def _error(name: str, cls: type, desc: str, higher: bool = False) -> Evaluator:
    example = f"evalsi eval --data examples/ml-classic/regression.jsonl --evaluators {name}"
    return declare(name, cls, desc, bounds=None, higher=higher, example=example)


mae = _error("mae", Mae, "mean absolute error, >= 0")
mse = _error("mse", Mse, "mean squared error, >= 0")
rmse = _error("rmse", Rmse, "root mean squared error, >= 0")
r2 = _error("r2", R2, "coefficient of determination, <= 1", higher=True)
mape = _error("mape", Mape, "mean absolute percentage error as a fraction, >= 0")


def _ranked(name: str, cls: type, desc: str, k: bool = False) -> Evaluator:
    example = f"evalsi eval --data examples/ml-classic/ranking.jsonl --evaluators {name}"
    example += f" --param {name}.k=5" if k else ""
    return declare(name, cls, desc, scope="record", example=example)


ndcg = _ranked("ndcg", Ndcg, "NDCG of the ranking (param k: cutoff, default none), 0..1")
mrr = _ranked("mrr", Mrr, "reciprocal rank of the first relevant id, 0..1 (mean: MRR)")
map_ = _ranked("map", AveragePrecision, "average precision of the ranking, 0..1 (mean: MAP)")
recall_at_k = _ranked(
    "recall-at-k", RecallAtK, "relevant ids in the top k / relevant ids, 0..1", k=True
)
precision_at_k = _ranked(
    "precision-at-k", PrecisionAtK, "relevant ids in the top k / k, 0..1", k=True
)
hit_rate = _ranked(
    "hit-rate", HitRate, "1 if a relevant id is in the top k (mean: hit rate)", k=True
)

EVALUATORS: tuple[Evaluator, ...] = (
    accuracy,
    balanced_accuracy,
    precision,
    recall,
    f1,
    mcc,
    cohen_kappa,
    roc_auc,
    pr_auc,
    log_loss,
    brier,
    ece,
    confusion_matrix,
    mae,
    mse,
    rmse,
    r2,
    mape,
    ndcg,
    mrr,
    map_,
    recall_at_k,
    precision_at_k,
    hit_rate,
)
"""Every evaluator of the ml-classic pack."""

__all__ = ["EVALUATORS", "label_of", "read_output", "read_truth"]
