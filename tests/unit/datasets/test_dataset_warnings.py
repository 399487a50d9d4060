"""What a pass notices without stopping (warnings), and the errors of data that hides its faults:
empty files, every row bad, repeated ids, an unclosed CSV quote, bytes that are not UTF-8."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from evalsi.core import DatasetError, Record
from evalsi.datasets import Dataset, open_dataset
from evalsi.datasets._warnings import RepeatedIds


def count(ds: Dataset, batch_size: int = 1024) -> int:
    return sum(len(b) for b in ds.iter_batches(batch_size))


# -- nothing to read ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "content", "why"),
    [
        ("empty.jsonl", b"", "no records (the file is empty)"),
        ("blank.jsonl", b"\n\n  \n", "no records (the file holds only blank lines)"),
        ("header.csv", b"input,output\n", "no records (the file has a header row and no data"),
        ("empty.json", b"[]", "no records (the file holds an empty array)"),
    ],
)
def test_a_source_without_records_says_why(
    tmp_path: Path, name: str, content: bytes, why: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    ds = open_dataset(path)
    assert count(ds) == 0
    assert ds.records_read == 0
    error = ds.nothing_read()
    assert isinstance(error, DatasetError)
    assert str(error).startswith(f"{path}: {why}")


def test_every_row_bad_names_the_count_and_the_first(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"input": "a"\n[1]\n"x"\n')
    ds = open_dataset(path, on_bad_record="skip")
    assert count(ds) == 0
    message = str(ds.nothing_read())
    assert "all 3 record(s) were bad and skipped (first: line 1: not valid JSON" in message
    assert [w.kind for w in ds.warnings] == ["bad_records"]
    assert ds.warnings[0].count == 3
    assert ds.warnings[0].examples[1] == "line 2: expected a JSON object, got a list [1]"


def test_positions_not_lines_for_json_arrays(tmp_path: Path) -> None:
    path = tmp_path / "rows.json"
    path.write_text('[{"input": "a"}, 5]')
    ds = open_dataset(path, on_bad_record="skip")
    assert count(ds) == 1
    (warning,) = ds.warnings
    assert warning.examples == ("record 2: expected a JSON object, got 5",)


# -- repeated ids ----------------------------------------------------------------------------


def test_repeated_ids_are_warned_with_their_lines_and_every_record_kept(tmp_path: Path) -> None:
    ids = ["a", "b", "a", "c", "b", "a"]
    path = tmp_path / "dup.jsonl"
    path.write_text("".join(f'{{"id": "{i}", "output": "x"}}\n' for i in ids))
    ds = open_dataset(path)
    assert count(ds, batch_size=2) == 6  # repeats across batches and inside one
    (warning,) = ds.warnings
    assert warning.kind == "duplicate_ids"
    assert warning.count == 3
    assert warning.examples == ("id 'a' at line 3", "id 'b' at line 5", "id 'a' at line 6")
    assert "3 record(s) repeat an earlier record's id (first: id 'a' at line 3)" in warning.message


def test_each_pass_starts_its_own_check(tmp_path: Path) -> None:
    path = tmp_path / "ok.jsonl"
    path.write_text('{"id": "a"}\n{"id": "b"}\n')
    ds = open_dataset(path)
    assert count(ds) == 2
    assert count(ds) == 2  # the second pass does not see the first pass's ids as repeats
    assert ds.warnings == []


def test_generated_ids_collide_with_explicit_ones() -> None:
    # The row without an id gets its position ("2"), which the first row already claimed.
    ds = open_dataset([{"id": "2", "input": "a"}, {"input": "b"}])
    assert count(ds) == 2
    assert ds.warnings[0].examples == ("id '2' at record 2",)


def test_repeated_ids_match_a_set_on_many_batches() -> None:
    # Against the obvious reference (a set of the ids), over enough batches to merge levels.
    import random

    rng = random.Random(5)
    ids = [f"r{rng.randrange(30_000)}" for _ in range(20_000)]
    tracker = RepeatedIds()
    records = [Record(id=i) for i in ids]
    for start in range(0, len(records), 97):
        tracker.add(records[start : start + 97], start + 1)
    seen: set[str] = set()
    expected = 0
    for i in ids:
        expected += i in seen
        seen.add(i)
    assert expected > 1000
    assert tracker.repeats == expected


# -- CSV: an unclosed quote ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "opened", "end", "before"),
    [
        ('id,output\n1,a\n2,"b\n3,c\n4,d\n', 3, 5, 1),
        ('id,output\n1,a\n2,"b', 3, 3, 1),  # no final newline
        ('id,output\n1,"x\ny"\n2,a\n3,"b\n4,c\n', 5, 6, 2),  # a closed multi-line cell first
        ('id,output\r\n1,a\r\n2,"b\r\n3,c\r\n', 3, 4, 1),
    ],
)
def test_an_unclosed_csv_quote_is_named_at_the_line_it_opens(
    tmp_path: Path, text: str, opened: int, end: int, before: int
) -> None:
    path = tmp_path / "q.csv"
    path.write_bytes(text.encode())
    with pytest.raises(DatasetError) as info:
        count(open_dataset(path))
    assert str(info.value).startswith(f"{path}:{opened}: a quote opens a cell here")
    assert f"to the end of the file (line {end})" in str(info.value)
    ds = open_dataset(path, on_bad_record="skip")
    assert count(ds) == before  # the rows before the quote; the rest were swallowed
    assert ds.warnings[0].examples[0].startswith(f"line {opened}: a quote opens a cell here")


def test_a_closed_quote_at_the_end_is_fine(tmp_path: Path) -> None:
    path = tmp_path / "ok.csv"
    path.write_text('id,output\n1,"a\nb"')
    ds = open_dataset(path)
    assert [r.output.text for b in ds.iter_batches() for r in b if r.output] == ["a\nb"]
    assert ds.warnings == []


# -- UTF-8: the real byte offset -------------------------------------------------------------


def _big_rows(n: int) -> bytes:
    return b"".join(b'{"id": "%d", "output": "%s"}\n' % (i, b"x" * 60) for i in range(n))


@pytest.mark.parametrize("gz", [False, True])
def test_invalid_utf8_in_jsonl_names_the_file_offset(tmp_path: Path, gz: bool) -> None:
    head = _big_rows(3000)  # ~250 KiB: the bad byte is past the first read chunk
    bad = b'{"id": "bad", "output": "ok \xff"}\n'
    data = head + bad + _big_rows(10).replace(b'"id": "', b'"id": "t')
    offset = len(head) + bad.index(b"\xff")
    assert offset > 1 << 16
    path = tmp_path / ("u.jsonl.gz" if gz else "u.jsonl")
    path.write_bytes(gzip.compress(data) if gz else data)
    with pytest.raises(DatasetError) as info:
        count(open_dataset(path))
    where = " of the decompressed data" if gz else ""
    column = bad.index(b"\xff") + 1
    assert str(info.value).startswith(
        f"{path}:3001: not UTF-8 text: byte 0xff at byte offset {offset}{where} "
        f"(line 3001, byte {column} of the line)"
    )
    assert data[offset] == 0xFF


def test_invalid_utf8_in_jsonl_with_a_bom_counts_the_bom(tmp_path: Path) -> None:
    data = b"\xef\xbb\xbf" + b'{"id": "a"}\n{"id": "\xc3"}\n'
    path = tmp_path / "bom.jsonl"
    path.write_bytes(data)
    ds = open_dataset(path, on_bad_record="skip")
    assert count(ds) == 1
    offset = data.index(b"\xc3")
    assert f"at byte offset {offset} (line 2," in ds.warnings[0].message


def test_invalid_utf8_in_csv_names_the_file_offset_not_the_block(tmp_path: Path) -> None:
    head = b"id,output\n" + b"".join(b"%d,%s\n" % (i, b"y" * 80) for i in range(4000))
    data = head + b"bad,ab\xfec\n" + b"z,1\n"
    offset = data.index(b"\xfe")
    assert offset > 1 << 18  # past the first block the text layer decodes
    path = tmp_path / "u.csv"
    path.write_bytes(data)
    with pytest.raises(DatasetError) as info:
        count(open_dataset(path, on_bad_record="skip"))
    assert str(info.value).startswith(
        f"{path}:4002: not UTF-8 text: byte 0xfe at byte offset {offset} (line 4002, byte 7"
    )


def test_invalid_utf8_in_json_names_the_offset(tmp_path: Path) -> None:
    data = b'[\n{"id": "a"},\n{"id": "\x80"}]'
    path = tmp_path / "u.json"
    path.write_bytes(data)
    with pytest.raises(DatasetError) as info:
        count(open_dataset(path))
    offset = data.index(b"\x80")
    assert f"byte 0x80 at byte offset {offset} (line 3, byte 9" in str(info.value)
