"""The report's Warnings section: what the run noticed without stopping (bad records skipped,
repeated ids) and why tasks failed, shown before the figures, every value escaped (HTML under
its strict CSP, Markdown literal), and no section at all for a run without any."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import evalsi
from evalsi.reports import render_report
from evalsi.store import SqlStore
from tests.unit.reports.test_reports_render import _Balance

HOSTILE_ID = "<script>alert(1)</script>"
HOSTILE_EXAMPLE = "HTTP 403 from http://x: <img src=x onerror=alert(2)> | *bold*"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlStore]:
    db = SqlStore.open(tmp_path / "s.db")
    yield db
    db.close()


def _score_run(store: SqlStore, tmp_path: Path, lines: list[str]) -> str:
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return evalsi.evaluate(path, ["exact-match"], store=store, on_bad_record="skip").run_id


def _row(rid: str) -> str:
    return json.dumps({"id": rid, "output": "x", "reference": "x"})


def test_bad_records_and_repeated_ids_are_shown_escaped(store: SqlStore, tmp_path: Path) -> None:
    run_id = _score_run(
        store, tmp_path, [_row(HOSTILE_ID), "not json", _row(HOSTILE_ID), _row(HOSTILE_ID)]
    )
    html = render_report(store, run_id, fmt="html")
    section = html[html.index('<section id="warnings"') : html.index("</section>")]
    assert "<h2>Warnings</h2>" in section
    assert "bad_records:</strong> skipped 1 bad record(s) (first: line 2: not valid JSON" in section
    assert "duplicate_ids:</strong> 2 record(s) repeat an earlier record&#39;s id" in section
    # The second repeat is listed under the first (the message names the first already).
    assert "id &#39;&lt;script&gt;alert(1)&lt;/script&gt;&#39; at line 4" in section
    assert HOSTILE_ID not in html
    assert re.search(r"<script", html, re.I) is None
    parser = _Balance()
    parser.feed(html)
    parser.close()
    assert (parser.errors, parser.stack) == ([], [])
    assert html.index('id="warnings"') < html.index('<section id="metrics">')  # before figures

    md = render_report(store, run_id, fmt="md")
    part = md[md.index("## Warnings") : md.index("## Metrics")]
    assert "- **bad\\_records:** skipped 1 bad record(s) (first: line 2: not valid JSON" in part
    assert "- **duplicate\\_ids:** 2 record(s) repeat" in part
    assert "  - id '&lt;script&gt;alert(1)&lt;/script&gt;' at line 4" in part
    assert HOSTILE_ID not in md


def test_failure_causes_are_listed_escaped(store: SqlStore) -> None:
    summary = {
        "metrics": [],
        "warnings": [
            {"kind": "target_errors", "message": "3 of 4 target calls failed", "count": 3,
             "examples": [HOSTILE_EXAMPLE]},
        ],
        "infra_error_causes": [{"kind": "connection", "count": 1,
                                "example": "connection refused by 127.0.0.1:9"}],
        "target_error_causes": [{"kind": "http_403", "count": 3, "example": HOSTILE_EXAMPLE}],
    }  # fmt: skip
    run_id = store.save_run(
        kind="run", spec={"data": "d.jsonl"}, name="r", status="done", records=4,
        summary=summary, manifest={}, batches=[],
    )  # fmt: skip
    html = render_report(store, run_id, fmt="html")
    section = html[html.index('<section id="warnings"') : html.index("</section>")]
    assert "<strong>infra error connection</strong> &times;1: connection refused by" in section
    assert "<strong>target error http_403</strong> &times;3: HTTP 403 from http://x: &lt;img" in (
        section
    )
    assert "<img" not in html
    md = render_report(store, run_id, fmt="md")
    assert "- **target error http\\_403** ×3: HTTP 403 from http://x: &lt;img src=x" in md
    assert "\\| \\*bold\\*" in md  # a pipe and emphasis stay literal


def test_a_run_without_warnings_has_no_section(store: SqlStore, tmp_path: Path) -> None:
    run_id = _score_run(store, tmp_path, [_row("a"), _row("b")])
    assert 'id="warnings"' not in render_report(store, run_id, fmt="html")
    assert "## Warnings" not in render_report(store, run_id, fmt="md")
