"""Rendering: HTML that escapes every user value and fetches nothing, Markdown that stays a
table whatever the records hold, writing the file, and the report without matplotlib."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

import evalsi
from evalsi import Record, evaluator
from evalsi.core import UserError
from evalsi.reports import check_output_path, render_report, write_report
from evalsi.store import SqlStore

HOSTILE_OUTPUT = "<script>alert(1)</script>"
HOSTILE_NAME = '<img src=x onerror="alert(2)">'
HOSTILE_TOPIC = "<b>bold</b> | pipe"
LINK = "https://example.invalid/leak?x=1"


@evaluator(name="t/explode", version="1.0.0", requires=("output",), output="passed")
def explode(record: Record) -> bool:
    if record.id == "b":
        raise RuntimeError("<i>kaput</i>")
    return True


def _rows() -> list[dict[str, Any]]:
    rows = [
        {"id": "a", "input": "2+2?", "output": "4", "reference": "4", "metadata": {"topic": "m"}},
        {
            "id": "b",
            "input": f"see {LINK}",
            "output": HOSTILE_OUTPUT,
            "reference": "safe",
            "metadata": {"topic": HOSTILE_TOPIC},
        },
        {
            "id": "c",
            "input": "x",
            "output": "a|b`c*d_",
            "reference": "y",
            "metadata": {"topic": HOSTILE_TOPIC},
        },
    ]
    for i, row in enumerate(rows):
        row["usage"] = {"latency_ms": 100 + 10 * i}
    return rows


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlStore]:
    db = SqlStore.open(tmp_path / "s.db")
    yield db
    db.close()


@pytest.fixture
def run_id(store: SqlStore, tmp_path: Path) -> str:
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _rows()), encoding="utf-8")
    result = evalsi.evaluate(
        path, ["exact-match", "latency", explode], store=store, name=HOSTILE_NAME
    )
    return result.run_id


class _Balance(HTMLParser):
    """Every element opened is closed, in order (void elements excepted)."""

    VOID = frozenset({"meta", "br", "img", "input", "link", "hr", "wbr", "col", "source"})

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.ids: list[str] = []
        self.tags: set[str] = set()
        self.links: list[str] = []
        self.src: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_startendtag(tag, attrs)
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        for key, value in attrs:
            if key == "id" and value:
                self.ids.append(value)
            elif key in ("href", "xlink:href"):
                self.links.append(value or "")
            elif key in ("src", "srcset", "action", "formaction", "background", "poster"):
                self.src.append(value or "")
            elif key.startswith("on"):
                self.src.append(f"{key}={value}")

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()


def test_html_escapes_user_values_and_loads_nothing(store: SqlStore, run_id: str) -> None:
    html = render_report(store, run_id, fmt="html", by="topic", compare=run_id)
    for raw in (HOSTILE_OUTPUT, HOSTILE_NAME, "<b>bold</b>", "<i>kaput</i>"):
        assert raw not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;b&gt;bold&lt;/b&gt; | pipe" in html  # the slice value
    assert "&lt;i&gt;kaput&lt;/i&gt;" in html  # the error reason
    assert re.search(r"<script", html, re.I) is None
    parser = _Balance()
    parser.feed(html)
    assert not parser.tags & {"script", "link", "img", "iframe", "object", "embed", "base"}
    assert parser.links
    assert all(link.startswith("#") for link in parser.links)  # in-page links only
    assert parser.src == []
    assert re.search(r"@import|url\((?!#)", html, re.I) is None
    # The only URL is the one a record holds, shown as text.
    assert [m.group(0) for m in re.finditer(r"https?://[^\s<\"]*", html)] == [LINK]
    assert "Content-Security-Policy" in html
    assert "default-src 'none'" in html


def test_html_is_balanced_with_unique_ids_and_charts(store: SqlStore, run_id: str) -> None:
    html = render_report(store, run_id, fmt="html", by="topic", compare=run_id)
    parser = _Balance()
    parser.feed(html)
    parser.close()
    assert parser.errors == []
    assert parser.stack == []
    assert len(parser.ids) == len(set(parser.ids)), "duplicate element ids across the charts"
    assert html.count('<svg class="chart"') >= 4  # intervals, outcomes, a histogram, compare
    for section in (
        "metrics",
        "intervals",
        "distributions",
        "slices",
        "failures",
        "gates",
        "comparison",
        "manifest",
    ):
        assert f'<section id="{section}">' in html
    assert "no gates" in html
    assert run_id in html


def test_html_without_matplotlib_says_how_to_get_charts(
    store: SqlStore, run_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now fails
    html = render_report(store, run_id, fmt="html")
    assert "install evalsi[reports] for charts" in html
    assert "<svg" not in html
    assert "exact-match" in html


def test_gates_and_failed_runs(store: SqlStore, run_id: str) -> None:
    info = store.get_run(run_id)
    summary = dict(info.summary or {})
    summary["gates"] = [
        {"expr": "exact-match.mean >= 0.9 && '<x>' != ''", "passed": False, "value": 0.333},
        {"expr": "latency.n > 1", "passed": True, "value": 3},
        {
            "expr": "x",
            "passed": None,
            "verdict": "inconclusive",
            "value": None,
            "reason": "too few <values>",
        },
    ]
    store.finish_run(
        run_id, status="done", records=info.records, summary=summary, manifest=info.manifest
    )
    html = render_report(store, run_id, fmt="html")
    assert "exact-match.mean &gt;= 0.9 &amp;&amp; &#39;&lt;x&gt;&#39; != &#39;&#39;" in html
    assert 'class="badge bad">failed' in html
    md = render_report(store, run_id, fmt="md")
    assert "| **failed** | 0.333 | - |" in md
    assert "| **inconclusive** | - | too few &lt;values&gt; |" in md
    assert "too few &lt;values&gt;" in html
    assert "no gates" not in md
    store.finish_run(
        run_id, status="failed", records=1, summary=None, manifest=None, error="disk <full>"
    )
    html = render_report(store, run_id, fmt="html")
    assert "stored no metric summary" in html
    assert "disk &lt;full&gt;" in html


def _tables(md: str) -> list[list[str]]:
    tables, current = [], []
    for line in md.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return tables + ([current] if current else [])


def _cells(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line)) - 1


def test_markdown_sections_and_well_formed_tables(store: SqlStore, run_id: str) -> None:
    md = render_report(store, run_id, fmt="md", by="topic", compare=run_id)
    headings = (
        "# evalsi report",
        "## Metrics",
        "## Distributions",
        "## Slices by `topic`",
        "## Failures",
        "## Gates",
        "## Comparison with run",
        "## Manifest",
    )
    for heading in headings:
        assert f"\n{heading}" in "\n" + md
    tables = _tables(md)
    assert len(tables) >= 6
    for table in tables:
        width = _cells(table[0])
        assert re.fullmatch(r"\|( -{3,}:? \|)+", table[1]), table[1]
        assert all(_cells(line) == width for line in table), table
    assert HOSTILE_OUTPUT not in md
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md
    assert "a\\|b\\`c\\*d\\_" in md
    assert "<svg" not in md
    assert "no gates" in md


def test_write_report_names_the_bad_path(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="is a directory"):
        write_report("x", tmp_path)
    missing = tmp_path / "no" / "such" / "r.html"
    with pytest.raises(UserError, match=re.escape(str(missing))):
        write_report("x", missing)
    blocker = tmp_path / "file.txt"
    blocker.write_text("")
    with pytest.raises(UserError, match="is not a directory"):
        check_output_path(blocker / "r.html")
    target = write_report("<p>ok</p>", tmp_path / "r.html")
    assert target.read_text() == "<p>ok</p>"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.txt", "r.html"]  # no temp left


def test_bad_format_and_unknown_run(store: SqlStore, run_id: str) -> None:
    with pytest.raises(UserError, match="unknown report format 'pdf'"):
        render_report(store, run_id, fmt="pdf")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="no run 'zzz'"):
        render_report(store, "zzz", fmt="md")


def test_markdown_summary_is_the_comparison_gates_and_metrics_alone(
    store: SqlStore, run_id: str
) -> None:
    """A pull-request comment (docs/guides/ci.md): the same renderer, fewer sections."""
    md = render_report(store, run_id, fmt="md", compare=run_id, summary=True)
    headings = [line for line in md.splitlines() if line.startswith("#")]
    assert headings == [
        f"### evalsi · run `{run_id}`",
        f"#### Comparison with run `{run_id}`",
        "#### Gates",
        "#### Metrics",
    ]
    assert "&lt;img src=x onerror=" in md  # the run's name, escaped, in the run's line
    assert "| exact-match | exact-match | 3 | 0.333 | [" in md
    assert "95% CI of Δ" in md
    for table in _tables(md):
        assert all(_cells(line) == _cells(table[0]) for line in table), table
    full = render_report(store, run_id, fmt="md", compare=run_id)
    assert len(md) < len(full) / 2
    with pytest.raises(UserError, match="Markdown only"):
        render_report(store, run_id, fmt="html", summary=True)
