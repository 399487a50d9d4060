"""Property: rows written as JSONL or JSON read back as the records they describe."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalsi.core import Record
from evalsi.datasets import FieldMap, open_dataset, record_from_dict

# Keys never collide with the record's own fields or with Content's tags, so every value keeps
# its meaning; strings exclude lone surrogates, which UTF-8 (and so JSON files) cannot hold.
text = st.text(st.characters(exclude_categories=["Cs"]), max_size=20)
keys = st.text("abcxyz_", min_size=1, max_size=6).map(lambda k: "k" + k)
scalars: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    text,
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)
rows = st.fixed_dictionaries(
    {},
    optional={
        "id": st.text("abc0123", min_size=1, max_size=5) | st.integers(0, 10**9),
        "input": text | json_values,
        "output": text | json_values,
        "reference": text | json_values,
        "context": st.lists(text, max_size=3),
        "metadata": st.dictionaries(keys, json_values, max_size=3),
    },
).flatmap(
    lambda row: st.dictionaries(keys, json_values, max_size=3).map(lambda extra: {**extra, **row})
)


def expected(rows: list[dict[str, Any]], path: str) -> list[Record]:
    return [record_from_dict(row, FieldMap(), line=i, path=path) for i, row in enumerate(rows, 1)]


@settings(max_examples=60, deadline=None)
@given(st.lists(rows, max_size=8))
def test_jsonl_and_json_round_trip(
    tmp_path_factory: pytest.TempPathFactory, data: list[dict[str, Any]]
) -> None:
    folder = tmp_path_factory.mktemp("rt")
    jsonl = folder / "rows.jsonl"
    jsonl.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in data))
    json = folder / "rows.json"
    json.write_bytes(orjson.dumps({"rows": data}))
    for path in (jsonl, json):
        ds = open_dataset(path)
        got = [r for batch in ds.iter_batches(3) for r in batch]
        assert got == expected(data, str(path))
        for record, row in zip(got, data, strict=True):
            for field in ("input", "output", "reference"):
                content = getattr(record, field)
                if row.get(field) is None:
                    assert content is None
                else:
                    assert content.to_value() == row[field]
            unmapped = {k: v for k, v in row.items() if k.startswith("k")}
            assert record.metadata == {**unmapped, **row.get("metadata", {})}
