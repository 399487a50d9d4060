"""JSON datasets: an array of objects, or an object holding one."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson
import pytest

from evalsi.core import Content, DatasetError, Record
from evalsi.datasets import Dataset, open_dataset


def write(path: Path, doc: Any) -> Path:
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    return path


def read(ds: Dataset, batch_size: int = 1024) -> list[Record]:
    return [r for batch in ds.iter_batches(batch_size) for r in batch]


ROWS = [{"id": "a", "input": "1+1", "output": "2"}, {"input": "2+2", "expected": "4"}]


@pytest.mark.parametrize("wrap", [None, "data", "records", "rows"])
def test_arrays_and_wrapped_arrays(tmp_path: Path, wrap: str | None) -> None:
    doc = ROWS if wrap is None else {"name": "qa", wrap: ROWS}
    ds = open_dataset(write(tmp_path / "qa.json", doc))
    records = read(ds)
    assert ds.format == "json"
    assert [r.id for r in records] == ["a", "2"]
    assert records[1].reference == Content.of_text("4")
    assert records[1].provenance is not None
    assert records[1].provenance.line == 2


def test_version_hashes_the_file(tmp_path: Path) -> None:
    path = write(tmp_path / "qa.json", ROWS)
    ds = open_dataset(path)
    read(ds, 1)
    assert ds.version == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"[1, 2", "not valid JSON"),
        (b"", "not valid JSON"),
        (b'"hello"', "expected an array of objects, got 'hello'"),
        (b'{"items": []}', "found keys: 'items'"),
    ],
)
def test_unreadable_documents(tmp_path: Path, content: bytes, expected: str) -> None:
    path = tmp_path / "qa.json"
    path.write_bytes(content)
    with pytest.raises(DatasetError, match=r"qa\.json: ") as info:
        read(open_dataset(path, on_bad_record="skip"))
    assert expected in str(info.value)


def test_bad_elements_are_named_by_position(tmp_path: Path) -> None:
    path = write(tmp_path / "qa.json", [{"input": "a"}, [1], {"id": 1.5}, {"input": "b"}])
    with pytest.raises(
        DatasetError, match=r"qa\.json: record 2: expected a JSON object, got a list"
    ):
        read(open_dataset(path))
    ds = open_dataset(path, on_bad_record="skip")
    assert [r.id for r in read(ds)] == ["1", "4"]
    assert ds.bad_count == 2
    assert [n for n, _ in ds.bad_records] == [2, 3]
    assert "field 'id'" in ds.bad_records[1][1]
