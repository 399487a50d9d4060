"""A run spec on its way to a server: validated here first (the same errors as an embedded
run, before anything is sent), its local dataset read as raw rows for the DatasetService, then
the document turned into an ``EvalRun`` message."""

from __future__ import annotations

import copy
import gzip
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson
from google.protobuf import json_format, struct_pb2

from evalsi._proto.evalsi.v1alpha1 import run_pb2
from evalsi.client._requests import record_batches
from evalsi.core import DatasetError, SpecError, UserError
from evalsi.runs import RunSpec, load_run_spec, run_spec_from_dict
from evalsi.wire import struct_to_proto

_JSON_WRAPPER_KEYS = ("data", "records", "rows")
_NAME_CHARS = re.compile(r"[^a-z0-9_.-]+")


def load_spec(spec: RunSpec | Mapping[str, Any] | str | os.PathLike[str]) -> RunSpec:
    """A validated spec from a path, a document, or a ``RunSpec`` read from YAML."""
    if isinstance(spec, RunSpec):
        if not spec.raw:
            raise UserError(
                "this RunSpec was built in code and has no EvalRun document to send",
                hint="pass the spec's YAML path (or its document as a dict) to run on a server",
            )
        return spec
    if isinstance(spec, Mapping):
        return run_spec_from_dict(spec)
    return load_run_spec(os.fspath(spec))


def local_dataset(spec: RunSpec) -> str | None:
    """The dataset file to upload, or None when the server reads the source itself (hf://)."""
    source = spec.dataset.source
    return None if "://" in source else source


def document_for_server(spec: RunSpec, dataset_path: str | None) -> dict[str, Any]:
    """The spec's document with ``dataset.path`` pointing at the server's copy."""
    doc = copy.deepcopy(spec.raw)
    if dataset_path is not None:
        doc.setdefault("spec", {}).setdefault("dataset", {})["path"] = dataset_path
    return doc


def eval_run_proto(doc: Mapping[str, Any]) -> run_pb2.EvalRun:
    """The document (proto3 JSON: camelCase keys) as an ``EvalRun``."""
    try:
        message = run_pb2.EvalRun()
        json_format.ParseDict(_plain(doc), message)
    except json_format.ParseError as e:
        raise SpecError(f"the spec does not match the EvalRun schema: {e}") from e
    return message


def dataset_name(path: str) -> str:
    """A DatasetService name from a file name: ``data/QA set.jsonl`` → ``qa-set``."""
    stem = Path(path).name.lower()
    for suffix in (".gz", ".jsonl", ".ndjson", ".json"):
        stem = stem.removesuffix(suffix)
    name = _NAME_CHARS.sub("-", stem).strip("-._")
    return name or "dataset"


def raw_rows(path: str) -> Iterator[dict[str, Any]]:
    """The rows of a JSONL or JSON file as written (the server maps fields itself)."""
    lower = path.lower().removesuffix(".gz")
    opener: Any = gzip.open if path.lower().endswith(".gz") else open
    try:
        if lower.endswith((".jsonl", ".ndjson")):
            with opener(path, "rb") as f:
                for number, line in enumerate(f, 1):
                    if line.strip():
                        yield _row(_loads(line, path, number), path, number)
            return
        if lower.endswith(".json"):
            with opener(path, "rb") as f:
                doc = _loads(f.read(), path, 1)
            rows = doc
            if isinstance(doc, dict):
                rows = next(
                    (doc[k] for k in _JSON_WRAPPER_KEYS if isinstance(doc.get(k), list)), doc
                )
            if not isinstance(rows, list):
                raise DatasetError("expected an array of objects", path=path)
            for number, row in enumerate(rows, 1):
                yield _row(row, path, number)
            return
    except OSError as e:
        raise DatasetError(f"cannot read it: {e.strerror or e}", path=path) from e
    raise DatasetError(
        "only JSONL and JSON datasets can be sent to a server",
        path=path,
        hint="convert it to .jsonl, or upload it with the DatasetService and name that path",
    )


def row_chunks(rows: Iterator[dict[str, Any]], max_bytes: int) -> Iterator[list[struct_pb2.Struct]]:
    """Rows as Structs, as many per chunk as fit in ``max_bytes`` (at least one)."""
    return record_batches((struct_to_proto(row) for row in rows), max_bytes)


def _loads(data: bytes, path: str, line: int) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise DatasetError(f"not valid JSON: {e}", path=path, line=line) from None


def _row(row: Any, path: str, number: int) -> dict[str, Any]:
    if not isinstance(row, dict):
        raise DatasetError(f"row {number}: expected an object, got {type(row).__name__}", path=path)
    return row


def _plain(value: Any) -> Any:
    """YAML values JSON has no spelling for (dates) as strings, so ParseDict takes them."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)
