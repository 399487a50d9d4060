"""The ml-classic pack: classification metrics over a whole dataset (map → reduce).

Records carry ``output`` as a label or ``{"label": …, "probabilities": {label: p}}`` and
``reference`` as the true label. Every metric equals scikit-learn's (checked in tests) and
is computed with whole-array numpy. Registered as ``builtin/<name>@1.0.0``.
"""

from evalsi.evaluators import Evaluator
from evalsi.packs.ml_classic._base import declare
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

accuracy = declare("accuracy", Accuracy, "fraction of correct labels, 0..1")
balanced_accuracy = declare("balanced-accuracy", BalancedAccuracy, "mean per-class recall, 0..1")
precision = declare("precision", Precision, "precision, 0..1 (param average)")
recall = declare("recall", Recall, "recall, 0..1 (param average)")
f1 = declare("f1", F1, "F1, 0..1 (param average)")
mcc = declare("mcc", Mcc, "Matthews correlation, -1..1")
cohen_kappa = declare("cohen-kappa", CohenKappa, "Cohen's kappa, -1..1")
roc_auc = declare("roc-auc", RocAuc, "area under the ROC curve, 0..1")
pr_auc = declare("pr-auc", PrAuc, "average precision, 0..1")
log_loss = declare("log-loss", LogLoss, "mean negative log-likelihood, >= 0")
brier = declare("brier", Brier, "Brier score, >= 0 (lower is better)")
ece = declare("ece", Ece, "expected calibration error, 0..1 (lower is better)")
confusion_matrix = declare(
    "confusion-matrix",
    ConfusionMatrix,
    "{labels, matrix}: rows reference, columns prediction",
    output="structured",
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
)
"""Every evaluator of the ml-classic pack."""

__all__ = ["EVALUATORS"]
