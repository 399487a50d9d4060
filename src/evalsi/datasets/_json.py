"""JSON: a top-level array of objects, or an object holding one under ``data``/``records``/``rows``.

A JSON document cannot be streamed row by row without a streaming parser, so the file is read
and parsed whole: memory grows with the file. Use JSON Lines for large datasets.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any, Final

import orjson

from evalsi.core import DatasetError, Hasher, Record
from evalsi.datasets._dataset import ReadState
from evalsi.datasets._fields import describe
from evalsi.datasets._files import is_gzip, open_binary, read_error, utf8_error_in

_WRAPPER_KEYS: Final = ("data", "records", "rows")


def read_json(path: str, state: ReadState) -> Iterator[Record]:
    """Yield a record per array element; ``line`` is the element's 1-based position."""
    hasher = Hasher()
    with open_binary(path) as f:
        try:
            data = f.read()
        except (OSError, EOFError, zlib.error) as e:
            raise read_error(path, e) from e
    hasher.update(data)
    rows = _rows(data, path)
    del data
    for n, row in enumerate(rows, 1):
        if type(row) is not dict:
            state.bad(path, n, f"expected a JSON object, got {describe(row)}", physical=False)
            continue
        record = state.record(row, n, path, physical=False)
        if record is not None:
            yield record
    state.last_line = len(rows)
    state.version = hasher.hexdigest()


def _rows(data: bytes, path: str) -> list[Any]:
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        utf8 = utf8_error_in(data, gz=is_gzip(path)) if not data.isascii() else None
        if utf8 is not None:
            raise DatasetError(utf8.message(), path=path, line=utf8.line) from None
        raise DatasetError(f"not valid JSON: {e}", path=path) from None
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict):
        for key in _WRAPPER_KEYS:
            rows = doc.get(key)
            if isinstance(rows, list):
                return rows
        keys = ", ".join(repr(k) for k in list(doc)[:10]) or "none"
        message = (
            "expected an array of objects, or an object with a 'data', 'records' or 'rows' "
            f"array; found keys: {keys}"
        )
    else:
        message = f"expected an array of objects, got {describe(doc)}"
    raise DatasetError(message, path=path, hint="for one object per line, name the file .jsonl")
