"""Parquet datasets through pyarrow, streamed by batches."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from evalsi.core import Content, DatasetError, Record, Usage
from evalsi.datasets import Dataset, open_dataset


def write(path: Path, rows: list[dict[str, Any]], row_group_size: int | None = None) -> Path:
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=row_group_size)
    return path


def read(ds: Dataset, batch_size: int = 1024) -> list[Record]:
    return [r for batch in ds.iter_batches(batch_size) for r in batch]


def test_rows_become_records(tmp_path: Path) -> None:
    rows = [
        {
            "id": f"q{i}",
            "input": f"question {i}",
            "output": "a",
            "reference": "a",
            "context": ["p1", "p2"],
            "usage": {"input_tokens": i, "latency_ms": 1.5},
            "lang": "en",
        }
        for i in range(25)
    ]
    path = write(tmp_path / "qa.parquet", rows, row_group_size=10)
    assert pq.ParquetFile(path).num_row_groups == 3
    ds = open_dataset(path)
    records = read(ds, 7)
    assert ds.format == "parquet"
    assert len(records) == 25
    r = records[12]
    assert (r.id, r.input, r.context) == (
        "q12",
        Content.of_text("question 12"),
        [Content.of_text("p1"), Content.of_text("p2")],
    )
    assert r.usage == Usage(input_tokens=12, latency_ms=1.5)
    assert r.metadata == {"lang": "en"}
    assert r.provenance is not None
    assert r.provenance.line == 13
    assert ds.version == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def test_versions_agree_across_batch_sizes(tmp_path: Path) -> None:
    path = write(tmp_path / "qa.parquet", [{"input": str(i)} for i in range(100)], 30)
    versions = set()
    for size in (1, 13, 1000):
        ds = open_dataset(path)
        assert [r.id for r in read(ds, size)] == [str(i) for i in range(1, 101)]
        versions.add(ds.version)
    assert len(versions) == 1


def test_bad_rows_are_named_by_position(tmp_path: Path) -> None:
    rows = [{"input": "a", "id": "x"}, {"input": "b", "id": ""}, {"input": "c", "id": "z"}]
    path = write(tmp_path / "qa.parquet", rows)
    with pytest.raises(DatasetError, match=r"qa\.parquet: record 2: field 'id'"):
        read(open_dataset(path))
    ds = open_dataset(path, on_bad_record="skip")
    assert [r.id for r in read(ds)] == ["x", "z"]
    assert ds.bad_records[0][0] == 2


def test_a_corrupt_file_is_a_dataset_error(tmp_path: Path) -> None:
    path = tmp_path / "qa.parquet"
    path.write_bytes(b"PAR1 definitely not parquet")
    with pytest.raises(DatasetError, match="not a readable Parquet file"):
        read(open_dataset(path))


def test_without_pyarrow_the_error_says_which_extra_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path / "qa.parquet", [{"input": "a"}])
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(DatasetError) as info:
        open_dataset(path)
    assert "needs pyarrow" in str(info.value)
    assert "evalsi[parquet]" in str(info.value)
