"""The SVG charts: inline-ready markup, user text kept literal, ids unique per chart."""

from __future__ import annotations

import re
from array import array

import pytest

from evalsi.reports._charts import CiRow, ci_chart, histogram, outcome_chart
from evalsi.reports._data import Distribution

pytest.importorskip("matplotlib")


def _ids(svg: str) -> list[str]:
    return re.findall(r'\bid="([^"]+)"', svg)


def test_svg_is_ready_to_inline() -> None:
    rows = [
        CiRow("$x^2$ & <b>", True, ((0.5, 0.4, 0.6),)),
        CiRow("latency", False, ((250.0, 200.0, 300.0),)),
        CiRow("no interval", False, ((3.0, None, None),)),
    ]
    svg = ci_chart(rows, ["run"], key="k1", title="t")
    assert svg.startswith('<svg class="chart" role="img" aria-label="t" ')
    assert svg.rstrip().endswith("</svg>")
    assert "<?xml" not in svg
    assert "DOCTYPE" not in svg
    assert "http" not in svg  # no namespace URIs, DTD or metadata links
    assert "$x^2$ &amp; &lt;b&gt;" in svg  # text, not mathtext; escaped by the SVG writer
    assert all(i.startswith("k1-") for i in _ids(svg))
    refs = re.findall(r'(?:url\(#|href="#)([^)"]+)', svg)
    assert refs
    assert all(r.startswith("k1-") and r in _ids(svg) for r in refs)


def test_charts_in_one_page_never_share_an_id() -> None:
    rows = [CiRow("a", True, ((0.5, 0.4, 0.6), (0.7, 0.6, 0.8)))]
    one = ci_chart(rows, ["A", "B"], key="one", title="t")
    two = ci_chart(rows, ["A", "B"], key="two", title="t")
    assert not set(_ids(one)) & set(_ids(two))
    assert ">A<" in one
    assert ">B<" in one  # the legend of a two-series chart


def test_outcomes_and_histogram() -> None:
    dist = Distribution("ev", "ok", "passed", passed=3, failed=1, skipped=1, errors=1)
    svg = outcome_chart([dist], key="o")
    assert "3/4 passed" in svg
    numbers = Distribution("ev", "score", "number", seen=5, low=1.0, high=5.0)
    numbers.sample = array("d", [1.0, 2.0, 2.0, 3.0, 5.0])
    svg = histogram(numbers, 2.6, key="h")
    assert "ev/score" in svg
    assert ">records<" in svg
    same = Distribution("ev", "flat", "number", seen=3, low=1.0, high=1.0)
    same.sample = array("d", [1.0, 1.0, 1.0])
    assert histogram(same, 1.0, key="f").startswith("<svg")  # one value: still a chart
