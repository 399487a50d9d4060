"""A Markdown table keeps one line per row whatever its cells hold: a failure reason with its
hint on a second line, pipes, carriage returns (``runs show --format md`` broke on them)."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from evalsi.runs import render_markdown

_UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


@given(
    st.lists(
        st.lists(st.text(max_size=30), min_size=3, max_size=3),
        max_size=5,
    )
)
def test_every_row_is_one_line_with_its_cells(rows: list[list[str]]) -> None:
    table = render_markdown(["record", "metric", "reason"], rows)
    lines = table.split("\n")
    assert len(lines) == len(rows) + 2
    for line in lines:
        assert len(_UNESCAPED_PIPE.findall(line)) == 4, line


def test_a_reason_with_a_hint_line_stays_in_its_row() -> None:
    table = render_markdown(["record", "reason"], [["q1", "judge answered 401\n  hint: set KEY"]])
    assert table.splitlines()[-1] == "| q1 | judge answered 401<br>  hint: set KEY |"
