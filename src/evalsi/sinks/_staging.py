"""A run's result rows staged in a local file while they stream in, so a sink uploads one
file at the end instead of holding the rows in memory: a JSON table (MLflow's and W&B's
``{"columns", "data"}`` form) or Parquet (for object stores)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from evalsi.core import require_extra
from evalsi.sinks._sink import RESULT_COLUMNS, ResultRow


class JsonTable:
    """``{"columns": [...], "data": [[...], ...]}`` written row batch by row batch."""

    def __init__(self, run_id: str, name: str = "results.json") -> None:
        self.run_id = run_id
        self.dir = Path(tempfile.mkdtemp(prefix="evalsi-sink-"))
        self.path = self.dir / name
        self._file = self.path.open("wb")
        self._file.write(b'{"columns":' + orjson.dumps(list(RESULT_COLUMNS)) + b',"data":[')
        self.rows = 0

    def write(self, rows: Sequence[ResultRow]) -> None:
        for row in rows:
            if self.rows:
                self._file.write(b",")
            self._file.write(orjson.dumps(row.as_list(self.run_id)))
            self.rows += 1

    def done(self) -> Path:
        if not self._file.closed:
            self._file.write(b"]}")
            self._file.close()
        return self.path

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class ParquetTable:
    """The rows as a Parquet file (``pyarrow``, the ``parquet`` extra), a row group a batch."""

    def __init__(self, run_id: str, name: str = "results.parquet") -> None:
        require_extra("the s3 sink", "parquet", "pyarrow")
        import pyarrow as pa
        import pyarrow.parquet as pq

        self._pa = pa
        self.run_id = run_id
        self.dir = Path(tempfile.mkdtemp(prefix="evalsi-sink-"))
        self.path = self.dir / name
        self.schema = pa.schema(
            [
                ("run_id", pa.string()),
                ("record_id", pa.string()),
                ("trial", pa.int32()),
                ("evaluator", pa.string()),
                ("metric", pa.string()),
                ("outcome", pa.string()),
                ("value", pa.float64()),
                ("label", pa.string()),
                ("explanation", pa.string()),
            ]
        )
        self._writer: Any = pq.ParquetWriter(str(self.path), self.schema, compression="zstd")
        self.rows = 0

    def write(self, rows: Sequence[ResultRow]) -> None:
        if not rows:
            return
        columns = list(zip(*(row.as_list(self.run_id) for row in rows), strict=True))
        batch = self._pa.record_batch(
            [self._pa.array(c, type=f.type) for c, f in zip(columns, self.schema, strict=True)],
            schema=self.schema,
        )
        self._writer.write_batch(batch)
        self.rows += len(rows)

    def done(self) -> Path:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        return self.path

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        shutil.rmtree(self.dir, ignore_errors=True)


def size_of(path: Path) -> int:
    return os.stat(path).st_size
