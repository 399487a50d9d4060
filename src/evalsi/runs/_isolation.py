"""Sandbox isolation in results: per result, per record, and per evaluator for a whole run.

An evaluator that ran code in the sandbox puts what ``evalsi.sandbox.Isolation.to_dict()``
gives on each score it returns: ``metadata["isolation"] = {"driver": "bwrap", "level":
"namespaced", "enforcement": "full" | "partial", "missing": [...]}``. The score's metadata is
stored with the result, so nothing new is persisted; what is derived from it here:

- per result (record x evaluator x trial): the weakest level across its scores;
- per record (``record_isolation``): the weakest level across all of its sandboxed results, as
  the ``IsolationReport`` a record's provenance holds (driver, details ``enforcement`` and
  ``missing``);
- per evaluator (``IsolationTally`` -> ``IsolationSummary``): the weakest level, every driver
  seen, ``partial`` if any result was partially enforced (with the union of what was missing),
  and how many scored results reported isolation (``sandboxed``) or did not (``unreported``).

Weakest wins everywhere: a run is only as isolated as its least isolated execution. A report
this code cannot read (not a mapping, an unknown level) counts as level ``none`` with partial
enforcement, so a malformed report can only make a gate fail, never pass.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from evalsi.core import EvaluationResult, IsolationReport, Outcome, Score

if TYPE_CHECKING:
    from evalsi.store import SqlStore

ISOLATION_KEY = "isolation"
"""The score metadata key an evaluator reports its sandbox isolation under."""

LEVELS: dict[str, int] = {"none": 0, "confined": 1, "namespaced": 2, "kernel": 3, "vm": 4}
"""Isolation level names and ranks, as ``evalsi.sandbox.Level`` has them (a test keeps the two
equal). Kept here rather than imported: importing ``evalsi.sandbox`` costs ~0.15 s (asyncio and
the drivers), which every run would pay for a table of five names."""
LEVEL_NAMES = {rank: name for name, rank in LEVELS.items()}

Enforcement = Literal["full", "partial"]


@dataclass(frozen=True, slots=True)
class ReportedIsolation:
    """One execution's isolation as a score reported it."""

    driver: str
    level: int
    enforcement: Enforcement = "full"
    missing: tuple[str, ...] = ()

    @property
    def level_name(self) -> str:
        return LEVEL_NAMES[self.level]


def parse_isolation(value: Any) -> ReportedIsolation:
    """A score's ``metadata["isolation"]``; what cannot be read counts as ``none``, partial."""
    if not isinstance(value, Mapping):
        return ReportedIsolation(
            "", 0, "partial", (f"unreadable isolation report {_short(value)}",)
        )
    driver = str(value.get("driver") or "")
    missing = value.get("missing") or ()
    gaps = (
        tuple(str(m) for m in missing) if isinstance(missing, (list, tuple)) else (_short(missing),)
    )
    level = value.get("level")
    rank = LEVELS.get(level.strip().lower()) if isinstance(level, str) else None
    if rank is None:
        return ReportedIsolation(
            driver, 0, "partial", (*gaps, f"unknown isolation level {_short(level)}")
        )
    enforcement = value.get("enforcement", "full")
    if enforcement not in ("full", "partial"):
        return ReportedIsolation(
            driver, rank, "partial", (*gaps, f"unknown enforcement {_short(enforcement)}")
        )
    # Something missing is partial enforcement, whatever the report calls it.
    return ReportedIsolation(driver, rank, "partial" if gaps else enforcement, gaps)


def scores_isolation(scores: Iterable[Score]) -> ReportedIsolation | None:
    """The weakest isolation among scores that report one (None when none does)."""
    found: ReportedIsolation | None = None
    for score in scores:
        value = score.metadata.get(ISOLATION_KEY) if score.metadata else None
        if value is None:
            continue
        found = weakest(found, parse_isolation(value))
    return found


def weakest(a: ReportedIsolation | None, b: ReportedIsolation) -> ReportedIsolation:
    """``a`` and ``b`` combined: the lower level (and its driver), partial if either is, and
    the union of what was missing."""
    if a is None:
        return b
    low = a if a.level <= b.level else b
    enforcement: Enforcement = "partial" if "partial" in (a.enforcement, b.enforcement) else "full"
    missing = tuple(dict.fromkeys((*a.missing, *b.missing)))
    if enforcement == low.enforcement and missing == low.missing:
        return low
    return ReportedIsolation(low.driver, low.level, enforcement, missing)


def isolation_report(found: ReportedIsolation) -> IsolationReport:
    """The ``IsolationReport`` a record's provenance holds (details are strings on the wire)."""
    details: dict[str, str] = {"enforcement": found.enforcement}
    if found.missing:
        details["missing"] = ", ".join(found.missing)
    return IsolationReport(level=found.level_name, driver=found.driver, details=details)


def record_isolation(results: Iterable[EvaluationResult]) -> IsolationReport | None:
    """A record's provenance isolation from its results (every evaluator and trial): the
    weakest level across its sandboxed scores, that execution's driver, and the enforcement
    (partial if any was) with what was missing. None when no score reported isolation."""
    found: ReportedIsolation | None = None
    for result in results:
        if result.outcome is not Outcome.SCORED:
            continue
        here = scores_isolation(result.scores)
        if here is not None:
            found = weakest(found, here)
    return isolation_report(found) if found is not None else None


@dataclass(frozen=True, slots=True)
class RecordIsolation:
    """One record's isolation, read back from a run's stored results."""

    seq: int  # the record's position in the dataset
    record_id: str
    isolation: IsolationReport


def iter_record_isolation(db: SqlStore, run_id: str) -> Iterator[RecordIsolation]:
    """Every record of ``run_id`` that has sandboxed results, in dataset order, with its
    provenance isolation (``record_isolation`` over its results of every evaluator and trial)."""
    # Dataset-scope results (seq -1) belong to no record.
    per_record = ((seq, r) for seq, _index, r in db.iter_results(run_id) if seq >= 0)
    for seq, group in itertools.groupby(per_record, key=lambda item: item[0]):
        results = [r for _, r in group]
        report = record_isolation(results)
        if report is not None:
            yield RecordIsolation(seq, results[0].record_id, report)


# ---------------------------------------------------------------------------------------------
# Per evaluator


@dataclass(frozen=True, slots=True)
class IsolationSummary:
    """How one evaluator's scored results were isolated over a whole run.

    ``level`` is the weakest level any of them ran at and ``driver`` the driver of that
    execution; ``drivers`` every driver seen. ``enforcement`` is ``partial`` when at least one
    result (``partial`` counts them) lacked a limit it asked for; ``missing`` is the union of
    what was missing. ``sandboxed`` counts the scored results that reported isolation and
    ``unreported`` those that did not: a gate on the level cannot judge while any did not.
    """

    evaluator: str
    level: str
    driver: str
    drivers: tuple[str, ...]
    enforcement: Enforcement
    missing: tuple[str, ...]
    sandboxed: int
    partial: int = 0
    unreported: int = 0

    @property
    def rank(self) -> int:
        return LEVELS.get(self.level, 0)

    @property
    def complete(self) -> bool:
        """Every scored result reported its isolation."""
        return self.sandboxed > 0 and self.unreported == 0

    def describe(self) -> str:
        """``confined (landlock)``, with the enforcement when partial."""
        text = f"{self.level} ({self.driver})" if self.driver else self.level
        if self.enforcement == "partial":
            gaps = f": missing {', '.join(self.missing)}" if self.missing else ""
            text += f", enforcement partial{gaps}"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "drivers": list(self.drivers), "missing": list(self.missing)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> IsolationSummary:
        """The inverse of ``to_dict`` (stored summaries, the wire's run details)."""
        enforcement = d.get("enforcement")
        level = str(d.get("level") or "none")
        return cls(
            evaluator=str(d.get("evaluator") or ""),
            level=level if level in LEVELS else "none",
            driver=str(d.get("driver") or ""),
            drivers=tuple(str(x) for x in d.get("drivers") or ()),
            enforcement="full" if enforcement == "full" else "partial",
            missing=tuple(str(x) for x in d.get("missing") or ()),
            sandboxed=int(d.get("sandboxed") or 0),
            partial=int(d.get("partial") or 0),
            unreported=int(d.get("unreported") or 0),
        )


def summaries_from_dicts(items: Any) -> list[IsolationSummary]:
    """Stored ``isolation`` entries (anything that is not a list of mappings reads as none)."""
    if not isinstance(items, list):
        return []
    return [IsolationSummary.from_dict(d) for d in items if isinstance(d, Mapping)]


@dataclass(slots=True)
class IsolationTally:
    """Folds one evaluator's results, one at a time, into an ``IsolationSummary``."""

    weakest: ReportedIsolation | None = None
    drivers: dict[str, None] = field(default_factory=dict)
    sandboxed: int = 0
    partial: int = 0

    def add(self, scores: Iterable[Score]) -> None:
        """One scored result's scores (nothing happens when none reports isolation)."""
        found = scores_isolation(scores)
        if found is None:
            return
        self.sandboxed += 1
        if found.enforcement == "partial":
            self.partial += 1
        if found.driver:
            self.drivers[found.driver] = None
        self.weakest = weakest(self.weakest, found)

    def summary(self, evaluator: str, scored: int) -> IsolationSummary | None:
        """The summary over ``scored`` scored results, or None when none was sandboxed."""
        w = self.weakest
        if w is None:
            return None
        return IsolationSummary(
            evaluator=evaluator,
            level=w.level_name,
            driver=w.driver,
            drivers=tuple(self.drivers),
            enforcement=w.enforcement,
            missing=w.missing,
            sandboxed=self.sandboxed,
            partial=self.partial,
            unreported=max(scored - self.sandboxed, 0),
        )


def summarize_results(results: Iterable[EvaluationResult]) -> list[IsolationSummary]:
    """Per evaluator (first-seen order), the isolation of its scored results: what a client
    works out from results it fetched, as the aggregator does while grading."""
    tallies: dict[str, tuple[IsolationTally, list[int]]] = {}
    for result in results:
        tally, scored = tallies.setdefault(result.evaluator, (IsolationTally(), [0]))
        if result.outcome is Outcome.SCORED:
            scored[0] += 1
            tally.add(result.scores)
    found = (tally.summary(name, scored[0]) for name, (tally, scored) in tallies.items())
    return [s for s in found if s is not None]


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


__all__ = [
    "ISOLATION_KEY",
    "LEVELS",
    "IsolationSummary",
    "IsolationTally",
    "RecordIsolation",
    "ReportedIsolation",
    "isolation_report",
    "iter_record_isolation",
    "parse_isolation",
    "record_isolation",
    "scores_isolation",
    "summarize_results",
    "weakest",
]
