"""Opening and hashing local files, with OS errors turned into ``DatasetError``."""

from __future__ import annotations

import gzip
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
