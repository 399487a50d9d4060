"""Built-in evaluator packs, and the registry that holds them plus installed plugins.

Example:
    >>> reg = builtin_registry(entry_points=False)
    >>> reg.resolve("exact-match").ref
    'builtin/exact-match@1.0.0'
"""

from collections.abc import Mapping
from types import MappingProxyType

from evalsi.evaluators import Evaluator, Registry
from evalsi.packs import core, judge, ml_classic, ml_monitoring, rag, safety, text

BUILTIN_PACKS: Mapping[str, tuple[Evaluator, ...]] = MappingProxyType(
    {
        "core": core.EVALUATORS,
        "judge": judge.EVALUATORS,
        "ml-classic": ml_classic.EVALUATORS,
        "ml-monitoring": ml_monitoring.EVALUATORS,
        "text": text.EVALUATORS,
        "rag": rag.EVALUATORS,
        "safety": safety.EVALUATORS,
    }
)
"""Pack name → its evaluators."""


def builtin_registry(*, entry_points: bool = True) -> Registry:
    """A new registry with every built-in evaluator, plus installed plugins by default.

    Args:
        entry_points: also load the evaluators that installed distributions publish under the
            ``evalsi.evaluators`` entry-point group (a broken one is an error).
    """
    registry = Registry(ev for pack in BUILTIN_PACKS.values() for ev in pack)
    if entry_points:
        registry.load_entry_points()
    return registry


__all__ = ["BUILTIN_PACKS", "builtin_registry"]
