"""Packs as values, and which packs a project turns on.

A pack groups evaluators under a name users see (``evalsi catalog list --pack text``). A
project opts in with ``evaluators.packs`` in ``evalsi.yaml``; only ``core`` is on by default.
The opt-in governs what may run *implicitly* (an online policy that picks evaluators by pack);
naming an evaluator explicitly — in ``evalsi eval --evaluators``, a run spec or an API call —
is itself the opt-in.

Example:
    >>> opt_in = PackOptIn(("core", "text"))
    >>> opt_in.enabled("text"), opt_in.enabled("safety")
    (True, False)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from evalsi.core import UserError
from evalsi.evaluators._decorator import BoundEvaluator, Evaluator

DEFAULT_PACKS = ("core",)
"""The packs on when a project names none."""


@dataclass(frozen=True, slots=True)
class Pack:
    """A named group of evaluators.

    Attributes:
        name: the pack's stable, kebab-case name (``ml-classic``).
        description: one line for the catalog.
        evaluators: its evaluators.
        extra: the ``pip install 'evalsi[<extra>]'`` its heavier dependencies come from ("" when
            the core install is enough).
    """

    name: str
    description: str
    evaluators: tuple[Evaluator, ...]
    extra: str = ""


def pack_of(ev: Evaluator | BoundEvaluator) -> str:
    """The pack an evaluator belongs to: its declared pack, else its namespace (plugins)."""
    manifest = ev.manifest
    return manifest.pack or manifest.ref.namespace


class PackOptIn:
    """The packs a project has turned on, checked before an evaluator runs implicitly."""

    def __init__(self, packs: Iterable[str] = DEFAULT_PACKS) -> None:
        self.packs = tuple(dict.fromkeys(packs))

    def enabled(self, pack: str) -> bool:
        return pack in self.packs

    def allows(self, ev: Evaluator | BoundEvaluator, *, explicit: bool) -> bool:
        """An explicitly named evaluator always runs; otherwise its pack must be on."""
        return explicit or self.enabled(pack_of(ev))

    def check(self, ev: Evaluator | BoundEvaluator, *, explicit: bool, where: str) -> None:
        """Raise a ``UserError`` naming the pack to enable when ``ev`` may not run."""
        if self.allows(ev, explicit=explicit):
            return
        pack = pack_of(ev)
        raise UserError(
            f"{where}: evaluator {ev.manifest.ref.name!r} is in pack {pack!r}, which this "
            f"project has not turned on (on: {', '.join(self.packs) or 'none'})",
            hint=f"add {pack!r} to evaluators.packs in evalsi.yaml, or name the evaluator "
            "explicitly",
        )

    def __repr__(self) -> str:
        return f"PackOptIn({list(self.packs)!r})"
