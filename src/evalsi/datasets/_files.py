"""Opening and hashing local files, with OS errors turned into ``DatasetError``."""

from __future__ import annotations

import codecs
import gzip
from dataclasses import dataclass
from typing import BinaryIO, Final, cast

from evalsi.core import DatasetError, Hasher

CHUNK_SIZE: Final = 1 << 18
"""Bytes read (and hashed) at a time: large enough that per-chunk overhead vanishes."""


def is_gzip(path: str) -> bool:
    return path.lower().endswith(".gz")


def open_binary(path: str) -> BinaryIO:
    """Open a data file for reading bytes; ``.gz`` files are decompressed on the fly."""
    try:
        if is_gzip(path):
            return cast(BinaryIO, gzip.open(path, "rb"))
        # Unbuffered: every caller reads in CHUNK_SIZE pieces (or whole), so a second buffer
        # would only add a copy.
        return open(path, "rb", buffering=0)
    except OSError as e:
        raise DatasetError(f"cannot open: {e.strerror or e}", path=path) from e


def read_error(path: str, e: Exception) -> DatasetError:
    """A ``DatasetError`` for a failure while reading (I/O error, corrupt gzip stream)."""
    reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
    return DatasetError(f"cannot read: {reason}", path=path)


def hash_file(path: str) -> str:
    """The content hash of a file's bytes, read sequentially in large chunks."""
    hasher = Hasher()
    try:
        with open(path, "rb", buffering=0) as f:
            while chunk := f.read(CHUNK_SIZE):
                hasher.update(chunk)
    except OSError as e:
        raise read_error(path, e) from e
    return hasher.hexdigest()


@dataclass(frozen=True, slots=True)
class Utf8Error:
    """Where a file stops being UTF-8: the byte offset in the file (in the decompressed data
    for ``.gz``), the offending byte, its 1-based line and its 1-based byte within the line."""

    offset: int
    byte: int
    line: int
    column: int
    gzip: bool = False

    def message(self) -> str:
        where = " of the decompressed data" if self.gzip else ""
        return (
            f"not UTF-8 text: byte 0x{self.byte:02x} at byte offset {self.offset}{where} "
            f"(line {self.line}, byte {self.column} of the line)"
        )


def utf8_error_in(
    data: bytes, *, base: int = 0, line: int = 1, gz: bool = False
) -> Utf8Error | None:
    """The first invalid UTF-8 byte of ``data`` (which starts at file offset ``base``, on line
    ``line``), or None when it decodes."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        at = e.start
        start = data.rfind(b"\n", 0, at) + 1
        return Utf8Error(base + at, data[at], line + data.count(b"\n", 0, at), at - start + 1, gz)
    return None


def find_utf8_error(path: str) -> Utf8Error | None:
    """The first invalid UTF-8 byte of a file, read again from the start.

    Text layers decode ahead in blocks, so the offset in their ``UnicodeDecodeError`` is
    relative to a block they chose; this pass (made only once the file has failed) counts
    from the file's first byte.
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0  # of the chunk's first byte
    line, line_start = 1, 0
    with open_binary(path) as f:
        while True:
            try:
                chunk = f.read(CHUNK_SIZE)
            except OSError as e:
                raise read_error(path, e) from e
            held = decoder.getstate()[0]  # bytes of a character cut by the previous chunk
            try:
                decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as e:
                at = offset - len(held) + e.start
                k = max(at - offset, 0)
                newlines = chunk.count(b"\n", 0, k)
                if newlines:
                    line += newlines
                    line_start = offset + chunk.rfind(b"\n", 0, k) + 1
                byte = chunk[at - offset] if at >= offset else held[len(held) + at - offset]
                return Utf8Error(at, byte, line, at - line_start + 1, is_gzip(path))
            if not chunk:
                return None
            newlines = chunk.count(b"\n")
            if newlines:
                line += newlines
                line_start = offset + chunk.rfind(b"\n") + 1
            offset += len(chunk)
