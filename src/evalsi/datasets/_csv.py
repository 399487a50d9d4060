"""CSV with a header row, through ``csv.DictReader``.

Cells are strings, except in the columns of the structured fields (``context``, ``reference``,
``usage``, ``metadata``, ``trajectory``), where a cell that looks like a JSON array or object is
parsed. An empty cell in the ``id``, ``context``, ``usage``, ``metadata`` or ``trajectory``
column means the field is absent; empty ``input``/``output``/``reference`` cells stay empty text.
"""

from __future__ import annotations

import contextlib
import csv
import io
import zlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO

import orjson

from evalsi.core import DatasetError, Hasher, Record
from evalsi.datasets._dataset import ReadState
from evalsi.datasets._fields import Plan
from evalsi.datasets._files import CHUNK_SIZE, find_utf8_error, open_binary, read_error

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

# Positions in Plan.names / Plan.paths.
_ID, _REFERENCE, _CONTEXT, _METADATA, _USAGE, _TRAJECTORY = 0, 3, 4, 5, 6, 7


def read_csv(path: str, state: ReadState) -> Iterator[Record]:
    """Yield a record per data row; ``line`` is the physical line where the row ends.

    A quoted cell never closed swallows the rest of the file (the csv module reads on to the
    end without complaint): that row is a bad record named at the line where the quote opened.
    """
    hasher = Hasher()
    plan = state.plan
    with open_binary(path) as raw:
        text = _Lines(
            io.TextIOWrapper(
                io.BufferedReader(_HashingReader(raw, hasher), CHUNK_SIZE),
                encoding="utf-8-sig",
                newline="",
            )
        )
        reader = csv.DictReader(text)
        try:
            header = reader.fieldnames
        except (csv.Error, UnicodeDecodeError, OSError, EOFError, zlib.error) as e:
            raise _read_failure(path, reader.line_num + 1, e) from e
        if not header:
            raise DatasetError(
                "no header row", path=path, hint="the first line of a CSV file names its columns"
            )
        _check_header(header, path)
        json_cols, optional_cols = _special_columns(header, plan)
        width = len(header)
        rows = iter(reader)
        while True:
            try:
                row = next(rows)
            except StopIteration:
                break
            except (csv.Error, UnicodeDecodeError, OSError, EOFError, zlib.error) as e:
                raise _read_failure(path, reader.line_num + 1, e) from e
            line = reader.line_num
            if text.ended:
                # A row handed back after the text ran out was cut by the end of the file: only
                # an open quote makes the reader ask for a line after a row has begun.
                state.bad(path, _quote_line(row, line), _unclosed_quote(line))
                continue
            if None in row:
                cells = width + len(row[None])
                state.bad(path, line, f"{cells} cells, but the header names {width} columns")
                continue
            for col in optional_cols:
                if row.get(col) == "":
                    del row[col]
            for col in json_cols:
                cell = row.get(col)
                if cell and cell[0] in "[{":
                    with contextlib.suppress(orjson.JSONDecodeError):  # else it stays text
                        row[col] = orjson.loads(cell)
            record = state.record(row, line, path)
            if record is not None:
                yield record
        state.last_line = reader.line_num
    state.version = hasher.hexdigest()


def _read_failure(path: str, line: int, e: Exception) -> DatasetError:
    if isinstance(e, csv.Error):
        return DatasetError(f"not valid CSV: {e}", path=path, line=line)
    if isinstance(e, UnicodeDecodeError):
        # The text layer decodes a block ahead of the row being parsed, so neither its offset
        # nor the reader's line says where the bad byte is: look for it from the start.
        found = find_utf8_error(path)
        if found is not None:
            return DatasetError(
                found.message(), path=path, line=found.line, hint="save the file as UTF-8"
            )
        return DatasetError(
            f"not UTF-8 text ({e.reason})", path=path, line=line, hint="save the file as UTF-8"
        )
    return read_error(path, e)


def _quote_line(row: dict[str | None, Any], end: int) -> int:
    """The line where the unclosed quote of a row cut by the end of the file opened.

    The open cell is the last the reader filled; it holds every line break from the quote to
    the end of the file (a final line without one still counts as a line).
    """
    cells: list[Any] = [v for k, v in row.items() if k is not None]
    cells.extend(row.get(None) or [])
    last = next((c for c in reversed(cells) if isinstance(c, str)), "")
    breaks = last.count("\n") + last.count("\r") - last.count("\r\n")
    ends_with_break = last.endswith(("\n", "\r"))
    return max(end - breaks + (1 if ends_with_break else 0), 1)


def _unclosed_quote(end: int) -> str:
    return (
        f"a quote opens a cell here and is never closed: every line from here to the end of "
        f"the file (line {end}) would be one cell; close it (a quote inside a quoted cell is "
        'written twice: "")'
    )


def _check_header(header: Sequence[str], path: str) -> None:
    seen: set[str] = set()
    for name in header:
        if name in seen:
            raise DatasetError(f"column {name!r} appears twice in the header", path=path, line=1)
        seen.add(name)


def _special_columns(header: Sequence[str], plan: Plan) -> tuple[list[str], list[str]]:
    """The header's columns that may hold JSON, and those whose empty cells mean "absent"."""

    def columns(positions: tuple[int, ...]) -> set[str]:
        names = set()
        for i in positions:
            name = plan.names[i]
            if name:
                names.add(name)
                names.add(name.split(".", 1)[0])
        return names

    json_names = columns((_REFERENCE, _CONTEXT, _METADATA, _USAGE, _TRAJECTORY))
    if plan.ref_fallback:
        json_names.add("expected")
    optional_names = columns((_ID, _CONTEXT, _METADATA, _USAGE, _TRAJECTORY))
    return (
        [c for c in header if c in json_names],
        [c for c in header if c in optional_names],
    )


class _Lines:
    """The text's lines, noting when they have run out (``ended``)."""

    __slots__ = ("_next", "ended")

    def __init__(self, text: io.TextIOWrapper) -> None:
        self._next = text.__next__
        self.ended = False

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        try:
            return self._next()
        except StopIteration:
            self.ended = True
            raise


class _HashingReader(io.RawIOBase):
    """Hashes the bytes as the text layer pulls them, so a CSV pass reads its file once."""

    def __init__(self, raw: BinaryIO, hasher: Hasher) -> None:
        super().__init__()
        self._raw = raw
        self._hasher = hasher

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer, /) -> int:
        data = self._raw.read(len(memoryview(buffer)))
        n = len(data)
        memoryview(buffer)[:n] = data
        self._hasher.update(data)
        return n
