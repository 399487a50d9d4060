"""JSON Lines: one JSON object per line, streamed in large binary chunks."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import BinaryIO

import orjson

from evalsi.core import Hasher, Record
from evalsi.datasets._dataset import ReadState
from evalsi.datasets._fields import RowError, build_record, describe
from evalsi.datasets._files import CHUNK_SIZE, open_binary, read_error

_BOM = b"\xef\xbb\xbf"


def read_jsonl(path: str, state: ReadState) -> Iterator[Record]:
    """Yield a record per non-blank line; the version hashes every byte read (decompressed).

    Line numbers are 1-based physical lines. A line that is not a JSON object is a bad record.
    """
    hasher = Hasher()
    plan = state.plan
    offset = state.id_offset
    bad = state.bad
    loads = orjson.loads
    decode_error = orjson.JSONDecodeError
    lineno = 0
    with open_binary(path) as f:
        for lines in _line_chunks(f, hasher, path):
            for raw in lines:
                lineno += 1
                try:
                    row = loads(raw)
                except decode_error as e:
                    if raw.strip():  # blank lines (also "\r" of CRLF files) are not records
                        bad(path, lineno, f"not valid JSON: {e.msg} at column {e.colno}")
                    continue
                if type(row) is not dict:
                    bad(path, lineno, f"expected a JSON object, got {describe(row)}")
                    continue
                try:
                    record = build_record(row, plan, lineno, path, offset)
                except RowError as e:
                    bad(path, lineno, str(e))
                    continue
                yield record
    state.last_line = lineno
    state.version = hasher.hexdigest()


def _line_chunks(f: BinaryIO, hasher: Hasher, path: str) -> Iterator[list[bytes]]:
    """Complete lines, a chunk's worth at a time; a line may span any number of chunks."""
    pending: list[bytes] = []
    first = True
    while True:
        try:
            chunk = f.read(CHUNK_SIZE)
        except (OSError, EOFError, zlib.error) as e:
            raise read_error(path, e) from e
        if not chunk:
            break
        hasher.update(chunk)
        if first:
            first = False
            if chunk.startswith(_BOM):
                chunk = chunk[len(_BOM) :]
        parts = chunk.split(b"\n")
        tail = parts.pop()
        if not parts:
            pending.append(tail)
            continue
        if pending:
            pending.append(parts[0])
            parts[0] = b"".join(pending)
            pending = []
        if tail:
            pending.append(tail)
        yield parts
    if pending:
        yield [b"".join(pending)]
