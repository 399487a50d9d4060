"""How the ml-monitoring pack reads a value: missing, a number, or a category."""

from __future__ import annotations

import math
from typing import Any

import pytest

from evalsi.core import Content, Record, TabularRow
from evalsi.packs.ml_monitoring._fields import (
    ABSENT,
    as_number,
    category_of,
    default_fields,
    is_missing,
    lookup,
)


@pytest.mark.parametrize(
    ("value", "missing"),
    [(None, True), (math.nan, True), ("", True), ("  \t", True), (0, False), ("0", False),
     (False, False), ([], False), ("nan", False)],
)  # fmt: skip
def test_missing(value: Any, missing: bool) -> None:
    assert is_missing(value) is missing


@pytest.mark.parametrize(
    ("value", "number"),
    [(3, 3.0), (2.5, 2.5), (" 12 ", 12.0), ("-1e3", -1000.0), (".5", 0.5), ("+7.", 7.0),
     (True, None), ("inf", None), ("nan", None), ("1_000", None), ("0x10", None),
     ("12 kg", None), (math.inf, None), ([1], None), (None, None)],
)  # fmt: skip
def test_numbers_are_json_numbers_or_plain_decimal_text(value: Any, number: float | None) -> None:
    assert as_number(value) == number


@pytest.mark.parametrize(
    ("value", "category"),
    [("a", "a"), (1, "1"), (1.0, "1"), ("1", "1"), (2.5, "2.5"), (True, "true"),
     ({"b": 1, "a": 2}, '{"a":2,"b":1}'), ([1, "x"], '[1,"x"]')],
)  # fmt: skip
def test_categories(value: Any, category: str) -> None:
    assert category_of(value) == category


def test_naming_rule() -> None:
    json_input = Record(
        "r", input=Content.of_json({"age": 40, "site": "in"}), metadata={"site": "meta", "w": 2}
    )
    assert lookup(json_input, "age") == 40
    assert lookup(json_input, "site") == "in"  # the input wins
    assert lookup(json_input, "metadata.site") == "meta"
    assert lookup(json_input, "input.site") == "in"
    assert lookup(json_input, "w") == 2  # not in the input: metadata
    assert lookup(json_input, "input.w") is None
    assert lookup(json_input, "input.w", ABSENT) is ABSENT
    assert lookup(json_input, "nope", ABSENT) is ABSENT
    assert default_fields(json_input) == {"age": 40, "site": "in"}
    row = Record("r", input=Content.of_row(TabularRow(features={"x": 1.5}, prediction=1)))
    assert lookup(row, "x") == 1.5
    assert default_fields(row) == {"x": 1.5}
    text = Record("r", input=Content.of_text("hello"), metadata={"col": "7"})
    assert lookup(text, "col") == "7"
    assert lookup(text, "input.col") is None
    assert default_fields(text) == {"col": "7"}
