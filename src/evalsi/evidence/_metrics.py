"""A bundle's metrics recomputed from its score lines, to set beside ``summary.json``'s:
each metric's n and mean, its skipped and error counts, and the value of a dataset-scope
result. ``validate_bundle`` folds every score line in once, streaming."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import evalsi.evidence._format as fmt

Find = Callable[[str, str], None]
"""Called with (file, what is wrong)."""


class Metrics:
    """Each metric's n, mean and counts folded from the score lines, to set beside the
    summary's."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.sums: dict[tuple[str, str], list[float]] = {}  # n, sum
        self.outcomes: dict[str, dict[str, int]] = {}
        self.dataset: dict[tuple[str, str], float | None] = {}

    def add(self, index: int, outcome: str, scores: list[Any]) -> None:
        name = self.names[index]
        counts = self.outcomes.get(name)
        if counts is None:
            counts = self.outcomes[name] = {}
        counts[outcome] = counts.get(outcome, 0) + 1
        if outcome != "scored":
            return
        sums = self.sums
        for s in scores:  # the hot loop of validate: one pass, no abstract type checks
            if type(s) is not dict:
                continue
            key = (name, s.get("name") or name)
            entry = sums.get(key)
            if entry is None:
                entry = sums[key] = [0, 0.0]
            value: Any = s.get("passed")
            if value is None:
                value = s.get("number")
            kind = type(value)
            if kind is bool or kind is int or kind is float:
                entry[0] += 1
                entry[1] += value
            elif "label" in s or "structured" in s:
                entry[0] += 1

    def add_dataset(self, row: Mapping[str, Any], find: Find) -> None:
        index = row.get("evaluator")
        if type(index) is not int or not 0 <= index < len(self.names):
            find(fmt.SCORES, f"a dataset-scope result for evaluator {index!r}")
            return
        name = self.names[index]
        for s in row.get("scores") or ():
            if isinstance(s, dict):
                value = s.get("passed", s.get("number"))
                self.dataset[(name, str(s.get("name") or name))] = (
                    float(value) if isinstance(value, bool | int | float) else None
                )

    def compare(self, metrics: Any, find: Find) -> None:
        if not isinstance(metrics, list):
            find(fmt.SUMMARY, "metrics is not a list")
            return
        for m in metrics:
            if not isinstance(m, dict):
                find(fmt.SUMMARY, "a metric is not an object")
                continue
            key = (str(m.get("evaluator")), str(m.get("metric")))
            mean = m.get("mean")
            if key in self.dataset:
                if not _close(mean, self.dataset[key]):
                    find(
                        fmt.SUMMARY,
                        f"metric {key[0]}/{key[1]}: mean {mean} is not the "
                        f"dataset-scope result {self.dataset[key]}",
                    )
                continue
            n, total = self.sums.get(key, [0, 0.0])
            if m.get("n") != n:
                find(fmt.SUMMARY, f"metric {key[0]}/{key[1]}: n {m.get('n')}, the scores give {n}")
            elif n and mean is not None and not _close(mean, total / n):
                find(
                    fmt.SUMMARY,
                    f"metric {key[0]}/{key[1]}: mean {mean}, the scores give {total / n}",
                )
            counts = self.outcomes.get(key[0], {})
            for field_name, outcome in (("skipped", "skipped"), ("errors", "error")):
                if field_name in m and m[field_name] != counts.get(outcome, 0):
                    find(
                        fmt.SUMMARY,
                        f"metric {key[0]}/{key[1]}: {field_name} "
                        f"{m[field_name]}, the scores give {counts.get(outcome, 0)}",
                    )


def _close(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if not isinstance(a, int | float) or isinstance(a, bool):
        return False
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)


__all__ = ["Metrics"]
