"""What a pass over a dataset noticed without stopping: structured warnings, and repeated ids.

A dataset that reads cleanly can still be wrong in ways that change the figures a run reports:
bad rows skipped, two samples under one id. Each becomes a ``DatasetWarning`` that the run
layer prints on stderr, stores with the run and puts in ``--format json``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Final, Literal

from evalsi.core import Record

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

WarningKind = Literal["bad_records", "duplicate_ids"]

_ID: Final = attrgetter("id")

MAX_EXAMPLES: Final = 5
"""Examples a warning names; its count covers them all."""


@dataclass(frozen=True, slots=True)
class DatasetWarning:
    """One thing a pass noticed: ``kind``, a sentence, how many rows it concerns, examples."""

    kind: WarningKind
    message: str
    count: int
    examples: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "examples": list(self.examples)}


class RepeatedIds:
    """Finds record ids seen earlier in the same pass, in 8 bytes per record.

    An exact check has to remember every id of the pass. A set of the id strings would cost
    about 80 bytes a record, five times what this does: each batch's ids are hashed
    (``hash(str)``, 64 bits: the chance of one false repeat among a million distinct ids is
    about 3e-8) into sorted numpy levels that merge like a log-structured tree, so a lookup is
    a few binary searches and the work stays O(n log² n) (a million ids: about 0.2 s). A merge
    briefly holds its levels twice, so the peak is up to 16 bytes a record.
    """

    __slots__ = ("_levels", "examples", "repeats")

    def __init__(self) -> None:
        self._levels: list[npt.NDArray[np.int64]] = []
        self.repeats = 0
        """Records whose id an earlier record of the pass already had."""
        self.examples: list[tuple[str, int]] = []
        """(id, line) of the first repeats."""

    def add(self, records: Sequence[Record], first_position: int) -> None:
        """Check one batch; ``first_position`` is the 1-based position of ``records[0]``,
        the line named for a record without a provenance line."""
        import numpy as np

        n = len(records)
        if not n:
            return
        hashes = np.fromiter(map(hash, map(_ID, records)), dtype=np.int64, count=n)
        order = np.argsort(hashes, kind="stable")
        ordered = hashes[order]
        # Repeats inside the batch: equal neighbours after a stable sort, the first one kept.
        seen = np.zeros(n, dtype=bool)
        seen[1:] = ordered[1:] == ordered[:-1]
        for level in self._levels:  # sorted needles: the binary searches share cache lines
            at = np.searchsorted(level, ordered)
            found = at < len(level)
            found[found] = level[at[found]] == ordered[found]
            seen |= found
        if seen.any():
            repeat = np.zeros(n, dtype=bool)
            repeat[order[seen]] = True
            hits = np.flatnonzero(repeat)
            self.repeats += len(hits)
            for j in hits[: max(MAX_EXAMPLES - len(self.examples), 0)]:
                record = records[int(j)]
                p = record.provenance
                line = p.line if p is not None and p.line else first_position + int(j)
                self.examples.append((record.id, line))
            ordered = np.unique(hashes[~repeat])
        self._push(ordered)

    def _push(self, hashes: npt.NDArray[np.int64]) -> None:
        if not len(hashes):
            return
        import numpy as np

        levels = self._levels
        levels.append(hashes)
        while len(levels) >= 2 and 2 * len(levels[-1]) >= len(levels[-2]):
            merged = np.concatenate((levels.pop(), levels.pop()))
            merged.sort(kind="stable")  # two sorted runs: timsort merges them in O(n)
            levels.append(merged)

    def warning(self, *, kind_of_position: str = "line") -> DatasetWarning | None:
        if not self.repeats:
            return None
        examples = tuple(f"id {rid!r} at {kind_of_position} {line}" for rid, line in self.examples)
        message = (
            f"{self.repeats} record(s) repeat an earlier record's id (first: {examples[0]}); "
            "each is graded under its own position, but whatever pairs or looks up records "
            "by id (evalsi compare, calibration labels) cannot tell them apart"
        )
        return DatasetWarning("duplicate_ids", message, self.repeats, examples)


def bad_records_warning(
    count: int, bad: Sequence[tuple[int, str]], *, physical: bool
) -> DatasetWarning | None:
    """The warning of a pass that skipped ``count`` bad rows (``bad``: the first few)."""
    if not count:
        return None
    examples = tuple(_where(line, msg, physical) for line, msg in bad[:MAX_EXAMPLES])
    first = f" (first: {examples[0]})" if examples else ""
    message = f"skipped {count} bad record(s){first}"
    return DatasetWarning("bad_records", message, count, examples)


def _where(line: int, message: str, physical: bool) -> str:
    return f"line {line}: {message}" if physical else f"record {line}: {message}"
