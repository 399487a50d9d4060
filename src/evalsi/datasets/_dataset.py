"""``Dataset``: a named, versioned, streaming source of records, and the state of one pass."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Generator, Iterator
from typing import Final, Literal

from evalsi.core import DatasetError, Record, UserError
from evalsi.datasets._fields import FieldMap, Plan, plan_of

OnBadRecord = Literal["fail", "skip"]

MAX_BAD_MESSAGES: Final = 100
"""How many bad-record messages a pass keeps; all of them are counted."""

_SKIP_HINT = (
    'to count and skip bad records instead: --on-bad-record skip (Python: on_bad_record="skip")'
)


class ReadState:
    """What one pass over a source knows: the compiled field map and what went wrong so far.

    Readers call ``bad`` for every row that cannot become a record, and set ``version`` (the
    content hash) and ``last_line`` when they reach the end of their file.
    """

    __slots__ = ("bad_count", "bad_records", "id_offset", "last_line", "plan", "skip", "version")

    def __init__(self, plan: Plan, on_bad_record: OnBadRecord) -> None:
        self.plan = plan
        self.skip = on_bad_record == "skip"
        self.bad_records: list[tuple[int, str]] = []
        self.bad_count = 0
        self.id_offset = 0
        self.last_line = 0
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
        if len(self.bad_records) < MAX_BAD_MESSAGES:
            self.bad_records.append((line, reason))


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
            raise UserError(
                f"on_bad_record must be 'fail' or 'skip', not {on_bad_record!r}",
            )
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

    def iter_batches(self, batch_size: int = 1024) -> Generator[list[Record], None, None]:
        """Read the source from the start, yielding lists of at most ``batch_size`` records.

        With ``on_bad_record="fail"`` a bad row raises ``DatasetError`` naming its line; with
        ``"skip"`` it is counted in ``bad_count`` and reading goes on. Closing the generator
        early closes the file; ``version`` then stays ``None``.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}")
        state = ReadState(self._plan, self.on_bad_record)
        self._state = state
        self._version = None
        batch: list[Record] = []
        append = batch.append
        for record in self._records(state):
            append(record)
            if len(batch) >= batch_size:
                yield batch
                batch = []
                append = batch.append
        if batch:
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
