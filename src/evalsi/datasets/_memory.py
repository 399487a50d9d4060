"""Datasets held in memory: an iterable of dicts (rows) or ready-made ``Record`` objects."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Final

import orjson

from evalsi.core import Content, DatasetError, Hasher, Record
from evalsi.datasets._dataset import Dataset, OnBadRecord, ReadState
from evalsi.datasets._fields import FieldMap, describe

MEMORY_NAME: Final = "<memory>"
_CANONICAL: Final = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


class MemoryDataset(Dataset):
    """Rows from memory; the version hashes each item's canonical JSON (sorted keys).

    ``Record`` items pass through unchanged. Values JSON cannot hold hash by their ``str()``.
    A one-shot iterator (a generator) can be read once; pass a list to read it again.
    """

    format = "memory"

    def __init__(
        self,
        rows: Iterable[dict[str, Any] | Record],
        *,
        fields: FieldMap,
        on_bad_record: OnBadRecord,
        name: str = MEMORY_NAME,
    ) -> None:
        super().__init__(name, fields=fields, on_bad_record=on_bad_record)
        self._rows = rows
        self._one_shot = iter(rows) is rows
        self._consumed = False

    def _records(self, state: ReadState) -> Iterator[Record]:
        if self._one_shot:
            if self._consumed:
                raise DatasetError(
                    "this in-memory source was an iterator and has already been read",
                    path=self.name,
                    hint="pass a list (or another re-iterable collection) to read it twice",
                )
            self._consumed = True
        hasher = Hasher()
        path = self.name
        dumps = orjson.dumps
        n = 0
        for n, item in enumerate(self._rows, 1):
            try:
                hasher.update(dumps(item, default=_canonical, option=_CANONICAL))
            except orjson.JSONEncodeError as e:  # a cycle, or nesting too deep to hash
                raise DatasetError(f"record {n}: cannot be hashed: {e}", path=path) from None
            hasher.update(b"\n")
            if isinstance(item, dict):
                record = state.record(item, n, path, physical=False)
                if record is not None:
                    yield record
            elif isinstance(item, Record):
                yield item
            else:
                state.bad(
                    path, n, f"expected a dict or a Record, got {describe(item)}", physical=False
                )
        state.last_line = n
        state.version = hasher.hexdigest()


def _canonical(value: Any) -> Any:
    if isinstance(value, Content):
        return value.to_value()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    return str(value)
