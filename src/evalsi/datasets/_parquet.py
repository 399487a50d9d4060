"""Parquet through pyarrow (the optional ``parquet`` extra), streamed batch by batch.

Parquet is read by random access (the footer first, then column chunks), so the version is
computed by one sequential pass over the file's bytes after its rows have been read.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from evalsi.core import DatasetError, Record
from evalsi.datasets._dataset import ReadState
from evalsi.datasets._files import hash_file

_ROWS_PER_BATCH: Final = 4096
_INSTALL_HINT = "install the Parquet extra: pip install 'evalsi[parquet]'"


def require_pyarrow(path: str) -> Any:
    """Import ``pyarrow.parquet``, or explain which extra to install."""
    try:
        import pyarrow.parquet as pq
    except ImportError as e:
        raise DatasetError(
            "reading Parquet needs pyarrow, which is not installed", path=path, hint=_INSTALL_HINT
        ) from e
    return pq


def read_parquet(path: str, state: ReadState) -> Iterator[Record]:
    """Yield a record per row; ``line`` is the row's 1-based position in the file."""
    pq = require_pyarrow(path)
    import pyarrow as pa

    n = 0
    try:
        with pq.ParquetFile(path) as pf:
            for batch in pf.iter_batches(batch_size=_ROWS_PER_BATCH):
                for row in batch.to_pylist():
                    n += 1
                    record = state.record(row, n, path, physical=False)
                    if record is not None:
                        yield record
    except (pa.ArrowException, OSError) as e:
        where = f" (after row {n})" if n else ""
        raise DatasetError(f"not a readable Parquet file{where}: {e}", path=path) from e
    state.last_line = n
    state.version = hash_file(path)
