"""``open_dataset``: a dataset from a path, an ``hf://`` URI or rows in memory."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final, Literal

from evalsi.core import DatasetError, Hasher, Record
from evalsi.datasets._csv import read_csv
from evalsi.datasets._dataset import Dataset, OnBadRecord, ReadState
from evalsi.datasets._fields import FieldMap
from evalsi.datasets._hf import SCHEME, resolve_hf_files
from evalsi.datasets._json import read_json
from evalsi.datasets._jsonl import read_jsonl
from evalsi.datasets._memory import MemoryDataset
from evalsi.datasets._parquet import read_parquet, require_pyarrow

FileFormat = Literal["jsonl", "json", "csv", "parquet"]
Reader = Callable[[str, ReadState], Iterator[Record]]

_READERS: Final[dict[str, Reader]] = {
    "jsonl": read_jsonl,
    "json": read_json,
    "csv": read_csv,
    "parquet": read_parquet,
}
_BY_SUFFIX: Final[dict[str, FileFormat]] = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".csv": "csv",
    ".parquet": "parquet",
}
# The text formats may also be gzipped; Parquet compresses itself.
SUPPORTED_SUFFIXES: Final = (*_BY_SUFFIX, *(s + ".gz" for s in _BY_SUFFIX if s != ".parquet"))


def open_dataset(
    source: str | os.PathLike[str] | Iterable[dict[str, Any] | Record],
    *,
    fields: FieldMap | None = None,
    on_bad_record: OnBadRecord = "fail",
    format: FileFormat | None = None,
) -> Dataset:
    """Open a dataset without reading it yet; reading happens in ``iter_batches``.

    ``source`` is a file path (the format follows the suffix: ``.jsonl``/``.ndjson``, ``.json``,
    ``.csv``, ``.parquet``, and ``.gz`` versions of the text formats; ``format`` overrides it),
    an ``hf://OWNER/NAME[/SUBSET][@SPLIT]`` URI read from the local Hugging Face cache, or an
    iterable of dicts or ``Record`` objects. Problems that can be seen before reading (a missing
    file, an unknown suffix, a dataset absent from the cache) raise ``DatasetError`` here.

    Example:
        >>> ds = open_dataset([{"id": "a", "input": "2+2?", "output": "4", "expected": "4"}])
        >>> [(r.id, r.reference.text) for batch in ds.iter_batches() for r in batch]
        [('a', '4')]
        >>> ds.version.startswith("sha256:")
        True
    """
    fields = FieldMap() if fields is None else fields
    if isinstance(source, str) and source.startswith(SCHEME):
        return HfDataset(source, fields=fields, on_bad_record=on_bad_record)
    if isinstance(source, str | os.PathLike):
        path = os.fspath(source)
        if "://" in path:
            scheme = path.split("://", 1)[0]
            raise DatasetError(
                f"unsupported URI scheme {scheme}://",
                path=path,
                hint=f"use a local file path or an {SCHEME}OWNER/NAME[@SPLIT] URI",
            )
        _check_file(path)
        if format is not None and format not in _READERS:
            raise DatasetError(
                f"unknown format {format!r}", path=path, hint=f"use one of {', '.join(_READERS)}"
            )
        fmt = format or _format_of(path)
        if fmt == "parquet":
            require_pyarrow(path)
        return FileDataset(path, fmt, fields=fields, on_bad_record=on_bad_record)
    if isinstance(source, Mapping):
        raise DatasetError(
            "expected rows, got a single dict", path="<memory>", hint="wrap one row in a list"
        )
    if isinstance(source, bytes | bytearray) or not isinstance(source, Iterable):
        raise DatasetError(
            f"cannot read a dataset from {type(source).__name__}",
            path="<memory>",
            hint=f"pass a file path, an {SCHEME} URI, or a list of dicts or Records",
        )
    return MemoryDataset(source, fields=fields, on_bad_record=on_bad_record)


def _format_of(path: str) -> FileFormat:
    lower = path.lower()
    stem = lower[:-3] if lower.endswith(".gz") else lower
    for suffix, fmt in _BY_SUFFIX.items():
        if stem.endswith(suffix) and not (fmt == "parquet" and stem != lower):
            return fmt
    suffix = "".join(Path(path).suffixes[-2:]) or "no suffix"
    raise DatasetError(
        f"unknown dataset format ({suffix})",
        path=path,
        hint=f"supported suffixes: {', '.join(SUPPORTED_SUFFIXES)}",
    )


def _check_file(path: str) -> None:
    try:
        if os.path.isdir(path):
            raise DatasetError("is a directory, not a data file", path=path)
        if not os.path.exists(path):
            raise DatasetError("no such file", path=path)
    except OSError as e:  # pragma: no cover - stat itself failing (e.g. a name too long)
        raise DatasetError(f"cannot open: {e.strerror or e}", path=path) from e


class FileDataset(Dataset):
    """One local file in one of the supported formats."""

    def __init__(
        self, path: str, fmt: FileFormat, *, fields: FieldMap, on_bad_record: OnBadRecord
    ) -> None:
        super().__init__(path, fields=fields, on_bad_record=on_bad_record)
        self.format = fmt
        self._reader = _READERS[fmt]

    def _records(self, state: ReadState) -> Iterator[Record]:
        return self._reader(self.name, state)


class HfDataset(Dataset):
    """A split of a Hugging Face dataset from the local hub cache; its files read in order.

    ``files`` are the data files chosen at open time. The version hashes each file's relative
    path and content hash; ids generated for rows without one keep counting across files.
    """

    format = "hf"

    def __init__(self, uri: str, *, fields: FieldMap, on_bad_record: OnBadRecord) -> None:
        super().__init__(uri, fields=fields, on_bad_record=on_bad_record)
        self.snapshot, self.files = resolve_hf_files(uri)
        if any(f.name.lower().endswith(".parquet") for f in self.files):
            require_pyarrow(uri)

    def _records(self, state: ReadState) -> Iterator[Record]:
        combined = Hasher()
        for file in self.files:
            path = str(file)
            state.version = None
            state.last_line = 0
            yield from _READERS[_format_of(path)](path, state)
            rel = file.relative_to(self.snapshot).as_posix()
            combined.update(f"{rel}\0{state.version}\n".encode())
            state.id_offset += state.last_line
        state.version = combined.hexdigest()
