"""open_dataset: choosing a reader, early errors, and in-memory sources."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import evalsi.datasets
from evalsi.core import Content, DatasetError, Record, UserError
from evalsi.datasets import Dataset, FieldMap, open_dataset


def read(ds: Dataset, batch_size: int = 1024) -> list[Record]:
    return [r for batch in ds.iter_batches(batch_size) for r in batch]


def test_the_public_surface() -> None:
    assert sorted(evalsi.datasets.__all__) == [
        "Dataset",
        "DatasetWarning",
        "FieldMap",
        "FileFormat",
        "HfRef",
        "MAX_BAD_MESSAGES",
        "OnBadRecord",
        "RepeatedIds",
        "SUPPORTED_SUFFIXES",
        "confine",
        "hub_cache_dir",
        "open_dataset",
        "param_file",
        "param_files_confined",
        "parse_hf_uri",
        "read_trajectory",
        "record_from_dict",
        "record_to_row",
    ]


# -- files -----------------------------------------------------------------------------------


def test_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.jsonl"
    with pytest.raises(DatasetError, match="no such file") as info:
        open_dataset(path)
    assert info.value.path == str(path)
    assert str(info.value) == f"{path}: no such file"


def test_a_directory(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").mkdir()
    with pytest.raises(DatasetError, match="is a directory"):
        open_dataset(str(tmp_path / "d.jsonl"))


@pytest.mark.parametrize("name", ["data.txt", "data", "data.parquet.gz", "data.xlsx"])
def test_unknown_suffixes_list_the_supported_ones(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text("x")
    with pytest.raises(DatasetError, match="unknown dataset format") as info:
        open_dataset(path)
    assert ".jsonl, .ndjson, .json, .csv, .parquet" in str(info.value)


def test_other_uri_schemes_are_refused() -> None:
    with pytest.raises(DatasetError, match=r"unsupported URI scheme s3://"):
        open_dataset("s3://bucket/qa.jsonl")


def test_the_format_can_be_named(tmp_path: Path) -> None:
    path = tmp_path / "data.txt"
    path.write_text('{"input": "x"}\n')
    ds = open_dataset(path, format="jsonl")
    assert ds.format == "jsonl"
    assert [r.input for r in read(ds)] == [Content.of_text("x")]


def test_an_unknown_format_name(tmp_path: Path) -> None:
    path = tmp_path / "data.txt"
    path.write_text("")
    with pytest.raises(DatasetError, match="unknown format 'yaml'"):
        open_dataset(path, format="yaml")  # type: ignore[arg-type]


def test_suffixes_are_case_insensitive(tmp_path: Path) -> None:
    path = tmp_path / "DATA.JSONL"
    path.write_text('{"input": "x"}\n')
    assert open_dataset(path).format == "jsonl"


def test_a_file_that_vanishes_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "qa.jsonl"
    path.write_text('{"input": "x"}\n')
    ds = open_dataset(path)
    path.unlink()
    with pytest.raises(DatasetError, match="cannot open"):
        read(ds)


def test_arguments_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "qa.jsonl"
    path.write_text('{"input": "x"}\n')
    with pytest.raises(UserError, match="on_bad_record must be 'fail' or 'skip'"):
        open_dataset(path, on_bad_record="ignore")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="batch_size"):
        next(open_dataset(path).iter_batches(0))


def test_repr(tmp_path: Path) -> None:
    path = tmp_path / "qa.jsonl"
    path.write_text("")
    assert repr(open_dataset(path)) == f"<FileDataset {str(path)!r} format=jsonl>"


# -- memory ----------------------------------------------------------------------------------


def test_rows_in_memory() -> None:
    rows = [{"question": "2+2?", "answer": "4", "expected": "4"}, {"question": "3+3?"}]
    ds = open_dataset(rows, fields=FieldMap(input="question", output="answer"))
    records = read(ds)
    assert ds.name == "<memory>"
    assert ds.format == "memory"
    assert [r.id for r in records] == ["1", "2"]
    assert records[0].reference == Content.of_text("4")
    assert records[1].provenance is not None
    assert records[1].provenance.dataset == "<memory>"


def test_records_in_memory_pass_through() -> None:
    mine = Record(id="r", output=Content.of_text("x"))
    [got] = read(open_dataset([mine]))
    assert got is mine


def test_memory_versions_hash_canonical_json() -> None:
    def version(rows: list[dict[str, Any]] | list[Record]) -> str | None:
        ds = open_dataset(rows)
        read(ds)
        return ds.version

    a = version([{"input": "x", "meta": {"b": 1, "a": 2}}])
    assert a is not None
    assert a == version([{"meta": {"a": 2, "b": 1}, "input": "x"}])
    assert a != version([{"input": "y", "meta": {"b": 1, "a": 2}}])
    r1 = version([Record(id="1", input=Content.of_text("x"))])
    assert r1 == version([Record(id="1", input=Content.of_text("x"))])
    assert r1 != version([Record(id="1", input=Content.of_text("z"))])


def test_bad_items_in_memory() -> None:
    rows: list[object] = [{"input": "a"}, 3, {"usage": {"latency_ms": "fast"}}]
    with pytest.raises(DatasetError, match=r"<memory>: record 2: expected a dict or a Record"):
        read(open_dataset(rows))  # type: ignore[arg-type]
    ds = open_dataset(rows, on_bad_record="skip")  # type: ignore[arg-type]
    assert [r.id for r in read(ds)] == ["1"]
    assert [n for n, _ in ds.bad_records] == [2, 3]


def test_a_generator_can_be_read_once() -> None:
    def rows() -> Iterator[dict[str, str]]:
        yield {"input": "a"}

    ds = open_dataset(rows())
    assert len(read(ds)) == 1
    with pytest.raises(DatasetError, match="already been read"):
        read(ds)


def test_a_list_can_be_read_again() -> None:
    ds = open_dataset([{"input": "a"}])
    first = read(ds)
    version = ds.version
    assert read(ds) == first
    assert ds.version == version


@pytest.mark.parametrize("source", [{"input": "a"}, 42, b"qa.jsonl"])
def test_sources_that_are_not_datasets(source: object) -> None:
    with pytest.raises(DatasetError):
        open_dataset(source)  # type: ignore[arg-type]


def test_record_to_row_round_trips_through_the_default_field_map() -> None:
    from evalsi.core import Content, Message, Record, Step, ToolCall, Trajectory, Usage
    from evalsi.datasets import record_from_dict, record_to_row

    record = Record(
        id="t1",
        input=Content.of_messages([Message("user", "book a table")]),
        output=Content.of_text("booked"),
        reference=Content.of_json({"tool_calls": [{"name": "book"}]}),
        context=[Content.of_text("doc a"), Content.of_text("doc b")],
        trajectory=Trajectory(
            [
                Step(kind="llm_call", name="gpt", usage=Usage(input_tokens=7), span_id="s1"),
                Step(kind="tool_call", name="book", tool_call=ToolCall("book", {"n": 2}, "c1")),
                Step(kind="guardrail", name="pii", error="blocked", start_time_unix_nano=3),
            ]
        ),
        usage=Usage(input_tokens=7, output_tokens=2, latency_ms=12.5),
        metadata={"session_id": "s", "trace_error": False},
    )
    back = record_from_dict(record_to_row(record), FieldMap(), line=1, path="x.jsonl")
    back.provenance = None
    assert back == record
