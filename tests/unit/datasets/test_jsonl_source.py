"""JSON Lines datasets: streaming, line numbers, bad lines, versions and memory."""

from __future__ import annotations

import gzip
import hashlib
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest

from evalsi.core import Content, DatasetError, Record
from evalsi.datasets import Dataset, open_dataset


def write(path: Path, *lines: str | dict[str, Any]) -> Path:
    text = "".join((orjson.dumps(x).decode() if isinstance(x, dict) else x) + "\n" for x in lines)
    path.write_text(text, encoding="utf-8")
    return path


def read(ds: Dataset, batch_size: int = 1024) -> list[Record]:
    return [r for batch in ds.iter_batches(batch_size) for r in batch]


def test_reads_records_in_batches(tmp_path: Path) -> None:
    rows = [{"id": f"q{i}", "input": f"in{i}", "output": "o", "reference": "o"} for i in range(10)]
    path = write(tmp_path / "qa.jsonl", *rows)
    ds = open_dataset(path)
    assert ds.name == str(path)
    assert ds.format == "jsonl"
    batches = list(ds.iter_batches(4))
    assert [len(b) for b in batches] == [4, 4, 2]
    records = [r for b in batches for r in b]
    assert [r.id for r in records] == [f"q{i}" for i in range(10)]
    assert records[3].input == Content.of_text("in3")
    assert records[3].provenance is not None
    assert (records[3].provenance.dataset, records[3].provenance.line) == (str(path), 4)
    assert ds.bad_count == 0
    assert ds.bad_records == []


def test_iterating_the_dataset_yields_records(tmp_path: Path) -> None:
    path = write(tmp_path / "a.ndjson", {"input": "x"}, {"input": "y"})
    assert [r.id for r in open_dataset(path)] == ["1", "2"]


def test_blank_lines_are_skipped_and_lines_are_physical(tmp_path: Path) -> None:
    path = tmp_path / "qa.jsonl"
    path.write_bytes(b'\n{"input": "a"}\n   \n\r\n{"input": "b"}\n\n')
    records = read(open_dataset(path))
    assert [(r.id, r.provenance.line if r.provenance else 0) for r in records] == [
        ("2", 2),
        ("5", 5),
    ]


def test_crlf_bom_and_no_final_newline(tmp_path: Path) -> None:
    path = tmp_path / "qa.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"input": "a"}\r\n{"input": "b"}')
    records = read(open_dataset(path))
    assert [r.input for r in records] == [Content.of_text("a"), Content.of_text("b")]


def test_a_bad_line_fails_at_its_line(tmp_path: Path) -> None:
    path = write(tmp_path / "qa.jsonl", {"input": "a"}, "", '{"input": "b"', {"input": "c"})
    ds = open_dataset(path)
    with pytest.raises(DatasetError) as info:
        read(ds)
    assert info.value.line == 3
    assert str(info.value).startswith(f"{path}:3: not valid JSON")
    assert "on_bad_record" in str(info.value)
    assert ds.version is None


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("[1, 2]", "expected a JSON object, got a list"),
        ('"text"', "expected a JSON object, got 'text'"),
        ("null", "expected a JSON object, got null"),
        ('{"usage": {"latency_ms": "fast"}}', "field 'usage.latency_ms': expected a non-negative"),
        ('{"id": {}}', "field 'id': expected a string or an integer"),
        ("\xff", "not valid JSON"),
    ],
)
def test_what_makes_a_line_bad(tmp_path: Path, line: str, expected: str) -> None:
    path = write(tmp_path / "qa.jsonl", {"input": "a"}, line)
    with pytest.raises(DatasetError) as info:
        read(open_dataset(path))
    assert info.value.line == 2
    assert expected in str(info.value)


def test_skip_counts_bad_lines_and_goes_on(tmp_path: Path) -> None:
    path = write(
        tmp_path / "qa.jsonl",
        {"input": "a"},
        "{oops",
        {"input": "b", "usage": {"latency_ms": "fast"}},
        "[]",
        {"input": "c"},
    )
    ds = open_dataset(path, on_bad_record="skip")
    assert [r.id for r in read(ds)] == ["1", "5"]
    assert ds.bad_count == 3
    assert [line for line, _ in ds.bad_records] == [2, 3, 4]
    assert "usage.latency_ms" in ds.bad_records[1][1]
    assert ds.version is not None


def test_skip_keeps_the_first_hundred_messages_and_counts_all(tmp_path: Path) -> None:
    path = write(tmp_path / "qa.jsonl", *(["nope"] * 150), {"input": "ok"})
    ds = open_dataset(path, on_bad_record="skip")
    assert [r.id for r in read(ds)] == ["151"]
    assert ds.bad_count == 150
    assert len(ds.bad_records) == 100
    assert ds.bad_records[0][0] == 1
    assert ds.bad_records[-1][0] == 100
    # a new pass starts counting afresh
    read(ds)
    assert ds.bad_count == 150


def test_lines_spanning_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [{"id": str(i), "input": "x" * (i * 7 % 50)} for i in range(60)]
    path = write(tmp_path / "qa.jsonl", *rows, "", "")
    whole = read(open_dataset(path))
    version = open_dataset(path)
    read(version)
    monkeypatch.setattr("evalsi.datasets._jsonl.CHUNK_SIZE", 5)
    small = open_dataset(path)
    assert read(small) == whole
    assert small.version == version.version
    assert len(whole) == 60


def test_gzip(tmp_path: Path) -> None:
    plain = write(tmp_path / "qa.jsonl", {"input": "a"}, {"input": "b"})
    packed = tmp_path / "qa.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    ds, ds_plain = open_dataset(packed), open_dataset(plain)
    assert [r.input for r in read(ds)] == [r.input for r in read(ds_plain)]
    # the version hashes the content, so it does not depend on the compression
    assert ds.version == ds_plain.version


def test_a_corrupt_gzip_stream_is_a_dataset_error(tmp_path: Path) -> None:
    path = tmp_path / "qa.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"input": "a"}\n' * 100)[:40])
    with pytest.raises(DatasetError, match="cannot read"):
        read(open_dataset(path))


# -- versions --------------------------------------------------------------------------------


def test_the_version_is_the_hash_of_the_bytes(tmp_path: Path) -> None:
    path = write(tmp_path / "qa.jsonl", {"input": "a"}, "", "junk")
    ds = open_dataset(path, on_bad_record="skip")
    assert ds.version is None
    read(ds)
    assert ds.version == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def test_versions_are_stable_and_change_with_any_byte(tmp_path: Path) -> None:
    rows = [{"id": i, "input": f"question {i}", "output": "a"} for i in range(50)]
    path = write(tmp_path / "qa.jsonl", *rows)
    versions = set()
    for batch_size in (1, 7, 1024):
        ds = open_dataset(path)
        read(ds, batch_size)
        versions.add(ds.version)
    assert len(versions) == 1
    data = bytearray(path.read_bytes())
    data[data.index(b"question 33") + 9] = ord("4")
    path.write_bytes(bytes(data))
    ds = open_dataset(path)
    read(ds)
    assert ds.version not in versions


def test_the_version_waits_for_the_end_of_a_pass(tmp_path: Path) -> None:
    path = write(tmp_path / "qa.jsonl", *({"input": str(i)} for i in range(10)))
    ds = open_dataset(path)
    batches = ds.iter_batches(3)
    next(batches)
    assert ds.version is None
    list(batches)
    assert ds.version is not None


def test_an_abandoned_pass_closes_its_file(tmp_path: Path) -> None:
    path = write(tmp_path / "qa.jsonl", *({"input": str(i)} for i in range(10)))
    ds = open_dataset(path)
    batches = ds.iter_batches(2)
    next(batches)
    batches.close()  # what dropping the iterator does; a ResourceWarning would fail the test
    assert ds.version is None
    assert len(read(ds)) == 10


# -- memory ----------------------------------------------------------------------------------


def test_memory_stays_bounded_while_streaming(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    pad = b"x" * 200  # long lines make a big file without making tracing slower
    path.write_bytes(b"".join(b'{"input": "%d %s"}\n' % (i, pad) for i in range(200_000)))
    size = path.stat().st_size
    ds = open_dataset(path)
    count = 0
    import numpy  # noqa: F401 - the repeated-id check's one-time import is not streamed memory

    tracemalloc.start()
    try:
        for batch in ds.iter_batches(256):
            count += len(batch)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 200_000
    assert ds.version == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    assert size > 40_000_000
    # a read chunk, its lines, a batch of records and the repeated-id check's 8 bytes a record
    # (16 while its levels merge): a small fraction of the file
    assert peak < size / 10, (peak, size)
