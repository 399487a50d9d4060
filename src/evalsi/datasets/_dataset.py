"""``Dataset``: a named, versioned, streaming source of records, and the state of one pass."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Generator, Iterator
from itertools import islice
from typing import Any, Final, Literal

from evalsi.core import DatasetError, Record, UserError
from evalsi.datasets._fields import FieldMap, Plan, RowError, build_record, plan_of
from evalsi.datasets._warnings import DatasetWarning, RepeatedIds, bad_records_warning

OnBadRecord = Literal["fail", "skip"]

MAX_BAD_MESSAGES: Final = 100
"""How many bad-record messages a pass keeps; all of them are counted."""

_EMPTY: Final = {
    "memory": "no rows were given",
    "csv": "the file has a header row and no data rows",
    "json": "the file holds an empty array",
    "parquet": "the file has no rows",
    "hf": "the dataset's files hold no rows",
}
"""Why a pass read no record, by format (JSONL says whether the file had lines)."""

_SKIP_HINT = (
    'to count and skip bad records instead: --on-bad-record skip (Python: on_bad_record="skip")'
)


class ReadState:
    """What one pass over a source knows: the compiled field map and what went wrong so far.

    Readers call ``bad`` for every row that cannot become a record, and set ``version`` (the
    content hash) and ``last_line`` when they reach the end of their file.
    """

    __slots__ = (
        "bad_count",
        "bad_records",
        "id_offset",
        "ids",
        "last_line",
        "physical",
        "plan",
        "records",
        "skip",
        "version",
    )

    def __init__(self, plan: Plan, on_bad_record: OnBadRecord) -> None:
        self.plan = plan
        self.skip = on_bad_record == "skip"
        self.bad_records: list[tuple[int, str]] = []
        self.bad_count = 0
        self.physical = True  # whether bad_records name lines of a file or positions
        self.id_offset = 0
        self.last_line = 0
        self.records = 0
        self.ids = RepeatedIds()
        self.version: str | None = None

    def bad(self, path: str, line: int, reason: str, *, physical: bool = True) -> None:
        """Record (or, when failing, raise) a bad row.

        ``physical`` says whether ``line`` is a line of the file; otherwise it is the row's
        position (JSON array element, Parquet row, in-memory item) and the message says so.
        """
        if not self.skip:
            if physical:
                raise DatasetError(reason, path=path, line=line, hint=_SKIP_HINT)
            raise DatasetError(f"record {line}: {reason}", path=path, hint=_SKIP_HINT)
        self.bad_count += 1
        self.physical = physical
        if len(self.bad_records) < MAX_BAD_MESSAGES:
            self.bad_records.append((line, reason))

    def record(
        self, row: dict[str, Any], line: int, path: str, *, physical: bool = True
    ) -> Record | None:
        """The record ``row`` makes, or None when it makes none (then ``bad`` has seen it)."""
        try:
            return build_record(row, self.plan, line, path, self.id_offset)
        except RowError as e:
            self.bad(path, line, str(e), physical=physical)
            return None


class Dataset(ABC):
    """A source of records, read in batches, with a content version.

    Every call to ``iter_batches`` is a fresh pass over the source; it streams, so memory stays
    bounded whatever the size of the file (JSON files are the exception: they are parsed whole).
    ``version`` is the content hash (``sha256:<hex>``) of what the last pass read; it is ``None``
    until a pass has run to the end. ``bad_records`` and ``bad_count`` describe the current or
    last pass.

    Example:
        >>> from evalsi.datasets import open_dataset
        >>> ds = open_dataset([{"input": "2+2?", "output": "4"}])
        >>> [r.output.text for batch in ds.iter_batches() for r in batch]
        ['4']
        >>> ds.bad_count
        0
    """

    format: str = ""
    """``jsonl``, ``json``, ``csv``, ``parquet``, ``hf`` or ``memory``."""

    def __init__(self, name: str, *, fields: FieldMap, on_bad_record: OnBadRecord) -> None:
        if on_bad_record not in ("fail", "skip"):
            raise UserError(f"on_bad_record must be 'fail' or 'skip', not {on_bad_record!r}")
        self.name = name
        self.fields = fields
        self.on_bad_record: OnBadRecord = on_bad_record
        self._plan = plan_of(fields)
        self._state = ReadState(self._plan, on_bad_record)
        self._version: str | None = None

    @property
    def version(self) -> str | None:
        """The content hash of the last complete pass, or ``None`` before one has finished."""
        return self._version

    @property
    def bad_records(self) -> list[tuple[int, str]]:
        """(line, message) of the first bad records of the pass (at most 100)."""
        return self._state.bad_records

    @property
    def bad_count(self) -> int:
        """How many rows the pass skipped as bad."""
        return self._state.bad_count

    @property
    def records_read(self) -> int:
        """How many records the current or last pass yielded."""
        return self._state.records

    @property
    def warnings(self) -> list[DatasetWarning]:
        """What the current or last pass noticed without stopping: bad rows skipped (with
        ``on_bad_record="skip"``) and ids that repeat an earlier record's."""
        state = self._state
        found = [
            bad_records_warning(state.bad_count, state.bad_records, physical=state.physical),
            state.ids.warning(kind_of_position=self._position_word()),
        ]
        return [w for w in found if w is not None]

    def nothing_read(self) -> DatasetError:
        """The error of a pass that yielded no record: nothing can be graded, so a run stops
        with it (exit 2) instead of reporting metrics over nothing."""
        state = self._state
        if state.bad_count:
            first = ""
            if state.bad_records:
                line, message = state.bad_records[0]
                where = "line" if state.physical else "record"
                first = f" (first: {where} {line}: {message})"
            return DatasetError(
                f"all {state.bad_count} record(s) were bad and skipped{first}",
                path=self.name,
                hint="fix the rows (--on-bad-record fail stops at the first one and names it)",
            )
        return DatasetError(f"no records ({self._why_empty()})", path=self.name)

    def _why_empty(self) -> str:
        lines = "the file holds only blank lines" if self._state.last_line else "the file is empty"
        return _EMPTY.get(self.format, lines)

    def _position_word(self) -> str:
        return "line" if self.format in ("jsonl", "csv") else "record"

    def iter_batches(self, batch_size: int = 1024) -> Generator[list[Record], None, None]:
        """Read the source from the start, yielding lists of at most ``batch_size`` records.

        With ``on_bad_record="fail"`` a bad row raises ``DatasetError`` naming its line; with
        ``"skip"`` it is counted in ``bad_count`` and reading goes on. Records whose id repeats
        an earlier one's are yielded and named in ``warnings``. Closing the generator early
        closes the file; ``version`` then stays ``None``.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}")
        state = ReadState(self._plan, self.on_bad_record)
        self._state = state
        self._version = None
        records = self._records(state)
        while batch := list(islice(records, batch_size)):
            state.ids.add(batch, state.records + 1)
            state.records += len(batch)
            yield batch
        self._version = state.version

    def __iter__(self) -> Iterator[Record]:
        """Records one by one (a pass of ``iter_batches``)."""
        for batch in self.iter_batches():
            yield from batch

    @abstractmethod
    def _records(self, state: ReadState) -> Iterator[Record]:
        """One pass: yield records, report bad rows to ``state``, set its ``version`` at the end."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} format={self.format}>"
