"""Inspect AI's built-in scorers as evalsi evaluators (``inspect/includes``, ``inspect/match``,
``inspect/exact``, ``inspect/f1``), for ``evalsi plugin install``: Inspect and its pins live
in this plugin's venv, never in evalsi's."""

from __future__ import annotations

from inspect_ai.scorer import exact, f1, includes, match

from evalsi.adapters import from_inspect_scorer

_NEEDS = ("output", "reference")

EVALUATORS = (
    from_inspect_scorer(includes(), name="inspect/includes", requires=_NEEDS),
    from_inspect_scorer(match(), name="inspect/match", requires=_NEEDS),
    from_inspect_scorer(exact(), name="inspect/exact", requires=_NEEDS),
    from_inspect_scorer(f1(), name="inspect/f1", requires=_NEEDS),
)
