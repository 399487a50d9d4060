"""JSON Lines: one JSON object per line, streamed in large binary chunks."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import BinaryIO

import orjson

from evalsi.core import Hasher, Record
from evalsi.datasets._dataset import ReadState
from evalsi.datasets._fields import describe
from evalsi.datasets._files import CHUNK_SIZE, is_gzip, open_binary, read_error, utf8_error_in

_BOM = b"\xef\xbb\xbf"


def read_jsonl(path: str, state: ReadState) -> Iterator[Record]:
    """Yield a record per non-blank line; the version hashes every byte read (decompressed).

    Line numbers are 1-based physical lines. A line that is not a JSON object is a bad record;
    one that is not UTF-8 names the offending byte's offset in the file.
    """
    hasher = Hasher()
    bad, make = state.bad, state.record
    loads = orjson.loads
    decode_error = orjson.JSONDecodeError
    lineno = 0
    gz = is_gzip(path)
    with open_binary(path) as f:
        for lines, base in _line_chunks(f, hasher, path):
            first = lineno + 1
            # Offsets are worked out only for a line that fails to decode, from a cursor that
            # moves forward through the chunk: the clean path pays nothing for them.
            cursor, cursor_offset = 0, base
            for raw in lines:
                lineno += 1
                try:
                    row = loads(raw)
                except decode_error as e:
                    if not raw.strip():  # blank lines (also "\r" of CRLF files) are not records
                        continue
                    message = f"not valid JSON: {e.msg} at column {e.colno}"
                    if not raw.isascii():
                        i = lineno - first
                        while cursor < i:
                            cursor_offset += len(lines[cursor]) + 1
                            cursor += 1
                        utf8 = utf8_error_in(raw, base=cursor_offset, line=lineno, gz=gz)
                        if utf8 is not None:
                            message = utf8.message()
                    bad(path, lineno, message)
                    continue
                if type(row) is not dict:
                    bad(path, lineno, f"expected a JSON object, got {describe(row)}")
                    continue
                record = make(row, lineno, path)
                if record is not None:
                    yield record
    state.last_line = lineno
    state.version = hasher.hexdigest()


def _line_chunks(f: BinaryIO, hasher: Hasher, path: str) -> Iterator[tuple[list[bytes], int]]:
    """Complete lines, a chunk's worth at a time, with the file offset of the first one's first
    byte; a line may span any number of chunks."""
    pending: list[bytes] = []
    pending_start = 0  # file offset of the first byte of the pending line
    offset = 0  # file offset just past the last chunk read
    first = True
    while True:
        try:
            chunk = f.read(CHUNK_SIZE)
        except (OSError, EOFError, zlib.error) as e:
            raise read_error(path, e) from e
        if not chunk:
            break
        hasher.update(chunk)
        start = offset
        offset += len(chunk)
        if first:
            first = False
            if chunk.startswith(_BOM):
                chunk = chunk[len(_BOM) :]
                start += len(_BOM)
        parts = chunk.split(b"\n")
        tail = parts.pop()
        if not parts:
            if not pending:
                pending_start = start
            pending.append(tail)
            continue
        if pending:
            pending.append(parts[0])
            parts[0] = b"".join(pending)
            pending = []
            start = pending_start
        if tail:
            pending.append(tail)
            pending_start = offset - len(tail)
        yield parts, start
    if pending:
        yield [b"".join(pending)], pending_start
