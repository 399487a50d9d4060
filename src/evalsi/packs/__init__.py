"""Built-in evaluator packs, and the registry that holds them plus installed plugins.

The registry knows every built-in evaluator by name from ``PACK_INDEX`` and imports a pack's
module when one of its evaluators is first resolved: ``exact-match`` imports the core pack only,
not the code pack's sandbox or the ML packs' arrays (start-up, issue 16). ``BUILTIN_PACKS``
imports every pack on first use (the catalog lists them all).

Example:
    >>> reg = builtin_registry(entry_points=False)
    >>> reg.resolve("exact-match").ref
    'builtin/exact-match@1.0.0'
    >>> from evalsi.packs import BUILTIN_PACKS  # built on first use: not in the module yet
    >>> BUILTIN_PACKS["text"].extra
    'text'
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from evalsi.evaluators import Evaluator, Pack, Registry


class PackEntry(NamedTuple):
    """A built-in pack as known before its module is imported."""

    module: str  # defines EVALUATORS
    extra: str  # the pip extra its heavier dependencies come from ("" when none)
    evaluators: tuple[str, ...]  # the names of its evaluators, namespace builtin


PACK_INDEX: Mapping[str, PackEntry] = MappingProxyType(
    {
        "core": PackEntry(
            "evalsi.packs.core",
            "",
            (
                "exact-match",
                "fuzzy-match",
                "contains",
                "starts-with",
                "one-of",
                "regex",
                "json-valid",
                "json-schema",
                "length",
                "latency",
                "tokens",
                "cost",
            ),
        ),
        "judge": PackEntry(
            "evalsi.packs.judge",
            "",
            ("llm-judge", "g-eval", "reference-correctness", "pairwise"),
        ),
        "ml-classic": PackEntry(
            "evalsi.packs.ml_classic",
            "",
            (
                "accuracy",
                "balanced-accuracy",
                "precision",
                "recall",
                "f1",
                "mcc",
                "cohen-kappa",
                "roc-auc",
                "pr-auc",
                "log-loss",
                "brier",
                "ece",
                "confusion-matrix",
                "mae",
                "mse",
                "rmse",
                "r2",
                "mape",
                "ndcg",
                "mrr",
                "map",
                "recall-at-k",
                "precision-at-k",
                "hit-rate",
            ),
        ),
        "ml-monitoring": PackEntry(
            "evalsi.packs.ml_monitoring",
            "",
            (
                "psi",
                "js-distance",
                "ks",
                "missing-rate",
                "type-violations",
                "out-of-range",
                "demographic-parity-difference",
                "equalized-odds-difference",
            ),
        ),
        "text": PackEntry(
            "evalsi.packs.text",
            "text",
            (
                "bleu",
                "sentence-bleu",
                "chrf",
                "ter",
                "rouge-1",
                "rouge-2",
                "rouge-l",
                "rouge-lsum",
                "meteor",
                "edit-distance",
                "perplexity",
                "bertscore",
                "embedding-similarity",
            ),
        ),
        "rag": PackEntry(
            "evalsi.packs.rag",
            "",
            (
                "context-precision",
                "context-recall",
                "context-ndcg",
                "context-mrr",
                "faithfulness",
                "answer-relevance",
                "context-relevance",
                "context-sufficiency",
                "citation-accuracy",
            ),
        ),
        "safety": PackEntry(
            "evalsi.packs.safety",
            "",
            (
                "pii-leakage",
                "secret-leakage",
                "prompt-injection",
                "refusal-correctness",
                "toxicity",
            ),
        ),
        "code": PackEntry(
            "evalsi.packs.code", "", ("code-exec-tests", "compile-check", "lint-check")
        ),
        "agent": PackEntry(
            "evalsi.packs.agent",
            "",
            (
                "tool-call-accuracy",
                "trajectory-match",
                "loop-detection",
                "step-efficiency",
                "session-goal-completion",
                "policy-violations",
                "approval-requests",
                "fault-recovery",
                "tool-called",
                "tool-not-called",
                "tool-order",
                "tool-count",
                "final-answer",
                "no-tool-error",
                "within-budget",
                "task-success",
                "agent-efficiency",
            ),
        ),
        "bench": PackEntry("evalsi.packs.bench", "", ("bfcl-ast", "bfcl-exec")),
    }
)
"""Pack name → its module, extra and evaluator names, in catalog order. A test checks it
against each module's ``EVALUATORS``, and the registry refuses a pack whose module defines
other names than these."""

if TYPE_CHECKING:
    BUILTIN_PACKS: Mapping[str, Pack]
    """Pack name → the pack (its evaluators imported), in catalog order. Every pack ships in
    the distribution; the heavy libraries some evaluators need come from the pack's extra."""


def _evaluators_of(module: str) -> Iterable[Evaluator]:
    evaluators: tuple[Evaluator, ...] = importlib.import_module(module).EVALUATORS
    return evaluators


def _pack(name: str, entry: PackEntry) -> Pack:
    module = importlib.import_module(entry.module)
    doc = (module.__doc__ or "").strip().split("\n\n", 1)[0].replace("\n", " ")
    return Pack(name, doc, tuple(_evaluators_of(entry.module)), entry.extra)


def builtin_registry(*, entry_points: bool = True) -> Registry:
    """A new registry with every built-in evaluator, plus installed plugins by default.

    A built-in pack's module is imported when one of its evaluators is first resolved.

    Args:
        entry_points: also load the evaluators that installed distributions publish under the
            ``evalsi.evaluators`` entry-point group (a broken one is an error).
    """
    registry = Registry()
    for entry in PACK_INDEX.values():
        registry.defer(
            (f"builtin/{name}" for name in entry.evaluators),
            functools.partial(_evaluators_of, entry.module),
        )
    if entry_points:
        registry.load_entry_points()
    return registry


_SUBPACKAGES = {entry.module.rsplit(".", 1)[1] for entry in PACK_INDEX.values()}


def __getattr__(name: str) -> Any:
    if name == "BUILTIN_PACKS":
        packs = MappingProxyType({n: _pack(n, entry) for n, entry in PACK_INDEX.items()})
        globals()[name] = packs  # built once
        return packs
    if name in _SUBPACKAGES:  # `evalsi.packs.core` used as an attribute, as before
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["BUILTIN_PACKS", "PACK_INDEX", "PackEntry", "builtin_registry"]
