"""CSV datasets: header, JSON cells in the structured columns, bad rows by line."""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import pytest

from evalsi.core import Content, DatasetError, Record, Usage
from evalsi.datasets import Dataset, FieldMap, open_dataset


def write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode())
    return path


def read(ds: Dataset, batch_size: int = 1024) -> list[Record]:
    return [r for batch in ds.iter_batches(batch_size) for r in batch]


def test_rows_become_records(tmp_path: Path) -> None:
    path = write(tmp_path / "qa.csv", "id,input,output,expected,lang\nq1,2+2?,4,4,en\n7,hi,,,\n")
    ds = open_dataset(path)
    records = read(ds)
    assert ds.format == "csv"
    assert [r.id for r in records] == ["q1", "7"]
    assert records[0].input == Content.of_text("2+2?")
    assert records[0].reference == Content.of_text("4")
    assert records[0].metadata == {"lang": "en"}
    # empty text cells stay empty text: the output really was empty
    assert records[1].output == Content.of_text("")
    assert records[1].provenance is not None
    assert records[1].provenance.line == 3
    assert ds.version == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def test_json_cells_in_structured_columns_are_parsed(tmp_path: Path) -> None:
    text = (
        "input,output,reference,context,usage,metadata,trajectory,notes\n"
        '"[1, 2]",{"a": 1},"[""Paris"", ""paris""]","[""p1"", ""p2""]",'
        '"{""latency_ms"": 12}","{""k"": true}","[{""kind"": ""llm_call""}]",[x]\n'
    )
    [r] = read(open_dataset(write(tmp_path / "qa.csv", text)))
    assert r.input == Content.of_text("[1, 2]")  # other columns stay strings
    assert r.output == Content.of_text('{"a": 1}')
    assert r.reference == Content.of_json(["Paris", "paris"])
    assert r.context == [Content.of_text("p1"), Content.of_text("p2")]
    assert r.usage == Usage(latency_ms=12.0)
    assert r.metadata == {"k": True, "notes": "[x]"}
    assert r.trajectory is not None
    assert r.trajectory.steps[0].kind == "llm_call"


def test_a_cell_that_only_looks_like_json_stays_text(tmp_path: Path) -> None:
    [r] = read(open_dataset(write(tmp_path / "qa.csv", "context\n[not json\n")))
    assert r.context == [Content.of_text("[not json")]


def test_empty_structured_cells_are_absent(tmp_path: Path) -> None:
    path = write(tmp_path / "qa.csv", "id,input,context,usage,metadata\n,q,,,\n")
    [r] = read(open_dataset(path))
    assert (r.id, r.context, r.usage, r.metadata) == ("2", [], None, {})


def test_mapped_columns(tmp_path: Path) -> None:
    path = write(tmp_path / "qa.csv", 'question,answer,passages\nq,a,"[""x""]"\n')
    fields = FieldMap(input="question", output="answer", context="passages")
    [r] = read(open_dataset(path, fields=fields))
    assert (r.input, r.output, r.context) == (
        Content.of_text("q"),
        Content.of_text("a"),
        [Content.of_text("x")],
    )


def test_quoted_newlines_blank_lines_and_crlf(tmp_path: Path) -> None:
    path = write(tmp_path / "qa.csv", 'input,output\r\n"line one\r\nline two",x\r\n\r\nb,y\r\n')
    records = read(open_dataset(path))
    assert records[0].input == Content.of_text("line one\r\nline two")
    assert [r.provenance.line for r in records if r.provenance] == [3, 5]


def test_a_bom_is_not_part_of_the_first_column(tmp_path: Path) -> None:
    path = tmp_path / "qa.csv"
    path.write_bytes(b"\xef\xbb\xbfinput\nq\n")
    [r] = read(open_dataset(path))
    assert r.input == Content.of_text("q")


def test_bad_rows_fail_or_skip_at_their_line(tmp_path: Path) -> None:
    text = 'input,usage\na,\nb,"{""latency_ms"": ""fast""}"\nc,,extra\nd,\n'
    path = write(tmp_path / "qa.csv", text)
    with pytest.raises(DatasetError) as info:
        read(open_dataset(path))
    assert info.value.line == 3
    assert "field 'usage.latency_ms'" in str(info.value)
    ds = open_dataset(path, on_bad_record="skip")
    assert [r.input for r in read(ds)] == [Content.of_text("a"), Content.of_text("d")]
    assert ds.bad_count == 2
    assert ds.bad_records[1] == (4, "3 cells, but the header names 2 columns")


def test_short_rows_leave_fields_absent(tmp_path: Path) -> None:
    [r] = read(open_dataset(write(tmp_path / "qa.csv", "input,output\nq\n")))
    assert r.output is None


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", "no header row"),
        (b"input,input\nq,q\n", "column 'input' appears twice"),
        (b"input\n\xff\xfe\n", "not UTF-8"),
    ],
)
def test_unreadable_files(tmp_path: Path, content: bytes, expected: str) -> None:
    path = tmp_path / "qa.csv"
    path.write_bytes(content)
    with pytest.raises(DatasetError, match=expected):
        read(open_dataset(path, on_bad_record="skip"))


def test_gzip(tmp_path: Path) -> None:
    path = tmp_path / "qa.csv.gz"
    path.write_bytes(gzip.compress(b"input\nq\n"))
    [r] = read(open_dataset(path))
    assert r.input == Content.of_text("q")
