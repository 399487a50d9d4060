"""Shared map() and param checks for the ml-classic dataset-scope evaluators."""

from __future__ import annotations

from evalsi.core import OutputSpec, OutputType, ParamError, Record
from evalsi.evaluators import Evaluator, evaluator
from evalsi.packs.ml_classic._extract import Mapped, map_record

AVERAGES = ("binary", "micro", "macro", "weighted")


class LabelMetric:
    """map(): (truth, predicted label, probabilities); the label comes from argmax when absent."""

    needs_probs = False

    def map(self, record: Record) -> Mapped:
        return map_record(record, needs_probs=self.needs_probs)


class ProbMetric(LabelMetric):
    """map(): as LabelMetric, but a record without probabilities is SKIPPED."""

    needs_probs = True


def check_choice(metric: str, param: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ParamError(
            f"{metric}: param {param!r} must be one of {', '.join(allowed)}, got {value!r}"
        )


def declare(name: str, cls: type, desc: str, *, output: OutputType = "number") -> Evaluator:
    """Register ``cls`` as ``builtin/<name>@1.0.0``, a dataset-scope ml-classic evaluator."""
    return evaluator(
        name=f"builtin/{name}",
        version="1.0.0",
        scope="dataset",
        pack="ml-classic",
        requires=("output", "reference"),
        outputs=[OutputSpec(name, output, None, None, desc)],
        example=f"evalsi eval --data predictions.jsonl --evaluators {name}",
    )(cls)
