"""Built-in evaluator packs, and the registry that holds them plus installed plugins.

Example:
    >>> reg = builtin_registry(entry_points=False)
    >>> reg.resolve("exact-match").ref
    'builtin/exact-match@1.0.0'
    >>> BUILTIN_PACKS["text"].extra
    'text'
"""

from collections.abc import Mapping
from types import MappingProxyType, ModuleType

from evalsi.evaluators import Pack, Registry
from evalsi.packs import agent, code, core, judge, ml_classic, ml_monitoring, rag, safety, text


def _pack(name: str, module: ModuleType, extra: str = "") -> Pack:
    doc = (module.__doc__ or "").strip().split("\n\n", 1)[0].replace("\n", " ")
    return Pack(name, doc, module.EVALUATORS, extra)


BUILTIN_PACKS: Mapping[str, Pack] = MappingProxyType(
    {
        p.name: p
        for p in (
            _pack("core", core),
            _pack("judge", judge),
            _pack("ml-classic", ml_classic),
            _pack("ml-monitoring", ml_monitoring),
            _pack("text", text, extra="text"),
            _pack("rag", rag),
            _pack("safety", safety),
            _pack("code", code),
            _pack("agent", agent),
        )
    }
)
"""Pack name → the pack, in catalog order. Every pack ships in the distribution; the heavy
libraries some evaluators need come from the pack's extra."""


def builtin_registry(*, entry_points: bool = True) -> Registry:
    """A new registry with every built-in evaluator, plus installed plugins by default.

    Args:
        entry_points: also load the evaluators that installed distributions publish under the
            ``evalsi.evaluators`` entry-point group (a broken one is an error).
    """
    registry = Registry(ev for pack in BUILTIN_PACKS.values() for ev in pack.evaluators)
    if entry_points:
        registry.load_entry_points()
    return registry


__all__ = ["BUILTIN_PACKS", "builtin_registry"]
