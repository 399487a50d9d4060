"""`evalsi report` as a user runs it: one self-contained HTML file that a headless browser opens
without fetching anything or logging an error, a Markdown report whose tables hold together,
and one-line errors for an unknown run or a path that cannot be written."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

SCRIPT = "<script>alert(1)</script>"
LINK = "https://example.invalid/docs?page=1"
TOPICS = ("geography", "math", "science")


def _rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for i in range(24):
        answer = f"answer {i}"
        rows.append(
            {
                "id": f"q{i}",
                "input": f"question {i}",
                "output": answer if i % 3 else f"wrong {i}",
                "reference": answer,
                "metadata": {"topic": TOPICS[i % 3]},
                "usage": {"latency_ms": 100 + 9 * i + (i % 4) * 21},
            }
        )
    rows[3]["output"] = SCRIPT  # fails exact-match: its output is shown in the failures
    rows[6]["output"] = f"see {LINK}"
    return rows


def _eval(cli: Callable[..., Any], json_out: Callable[..., Any], *extra: str) -> str:
    out = json_out(
        cli(
            "eval",
            "--data",
            "data.jsonl",
            "--evaluators",
            "exact-match,contains,latency,fuzzy-match",
            "--store",
            "s.db",
            "--format",
            "json",
            *extra,
        )
    )
    return str(out["run_id"])


@pytest.fixture
def runs(cli, write_jsonl, json_out, tmp_path: Path) -> tuple[str, str]:
    write_jsonl(tmp_path / "data.jsonl", _rows())
    a = _eval(cli, json_out, "--name", "baseline <v1>")
    b = _eval(cli, json_out, "--param", "exact-match.ignore_case=true")
    return a, b


def _report(cli, *args: str) -> subprocess.CompletedProcess[str]:
    proc = cli("report", *args, "--store", "s.db")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc  # type: ignore[no-any-return]


def test_html_report_is_self_contained_and_escaped(cli, runs, tmp_path: Path) -> None:
    a, b = runs
    proc = _report(cli, a, "--by", "topic", "--compare", b, "-o", "report.html")
    assert proc.stdout == ""
    assert "wrote" in proc.stderr
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    # Nothing refers to the network: the only URL is a record's output, shown as escaped text.
    # (An escaped quote right after it, as in a failure's `got "see https://…"`, is text.)
    urls = [m.group(0) for m in re.finditer(r"https?://(?:[^\s<\"'&]|&(?!#3[49];))*", html)]
    assert urls
    assert set(urls) == {LINK}
    # Shown as text (a record's output, a failure's reason), never as a link.
    assert re.search(r"<a\b[^>]*\bhref\s*=\s*[\"']?https?:", html, re.I) is None
    for m in re.finditer(re.escape(LINK), html):
        tag = html.rfind("<", 0, m.start())
        assert html.find(">", tag) < m.start()  # not inside a tag (an attribute)
    assert re.search(r"<(script|link|img|iframe)\b", html, re.I) is None
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "baseline &lt;v1&gt;" in html
    assert a in html
    assert b in html
    for metric in ("exact-match", "contains", "latency", "fuzzy-match", "similarity"):
        assert metric in html
    assert "<svg" in html
    assert "Slices by <code>topic</code>" in html
    for topic in TOPICS:
        assert f"<td>{topic}</td>" in html
    assert "Comparison with run" in html
    assert "no gates" in html


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def test_html_report_renders_in_headless_chromium(cli, runs, tmp_path: Path) -> None:
    browser = shutil.which("chromium") or (
        "/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None
    )
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    a, b = runs
    _report(cli, a, "--by", "topic", "--compare", b, "-o", "report.html")
    page = tmp_path / "report.html"
    shot = tmp_path / "report.png"
    proc = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'chromium-profile'}",
            f"--screenshot={shot}",
            "--window-size=1200,2000",
            "--enable-logging=stderr",
            "--v=0",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "HOME": str(tmp_path)},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert shot.is_file(), proc.stderr[-2000:]
    assert _png_size(shot) == (1200, 2000)
    assert shot.stat().st_size > 40_000, "the screenshot looks blank"
    about_page = [
        line
        for line in proc.stderr.splitlines()
        if ("Uncaught" in line or "ERROR:CONSOLE" in line or "Refused to" in line)
    ]
    assert about_page == []


def test_markdown_report(cli, runs, tmp_path: Path) -> None:
    a, b = runs
    _report(cli, a, "--by", "topic", "--compare", b, "-o", "report.md")  # format from suffix
    md = (tmp_path / "report.md").read_text(encoding="utf-8")
    headings = [line for line in md.splitlines() if line.startswith("#")]
    assert headings[0].startswith(f"# evalsi report · run `{a}`")
    for section in (
        "## Metrics",
        "## Distributions",
        "## Slices by `topic`",
        "## Failures",
        "## Gates",
        "## Manifest",
    ):
        assert section in headings
    assert any(h.startswith(f"## Comparison with run `{b}`") for h in headings)
    tables: list[list[str]] = []
    previous = ""
    for line in md.splitlines():
        if line.startswith("|"):
            if not previous.startswith("|"):
                tables.append([])
            tables[-1].append(line)
        previous = line
    assert len(tables) >= 8
    for table in tables:
        cells = [len(re.findall(r"(?<!\\)\|", line)) for line in table]
        assert len(set(cells)) == 1, table
        assert re.fullmatch(r"\|( -{3,}:? \|)+", table[1]), table[1]
    assert SCRIPT not in md
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md
    assert "<svg" not in md
    stdout = cli("report", a, "--format", "md", "-o", "-", "--store", "s.db")
    assert stdout.returncode == 0, stdout.stderr
    assert stdout.stdout.startswith("# evalsi report")


def test_markdown_summary_for_a_pull_request_comment(cli, runs, user_error, tmp_path: Path) -> None:
    a, b = runs
    summary = _report(cli, b, "--summary", "--compare", a, "--format", "md", "-o", "-").stdout
    assert summary.startswith(f"### evalsi · run `{b}`")
    headings = [line for line in summary.splitlines() if line.startswith("#")][1:]
    assert headings == [f"#### Comparison with run `{a}`", "#### Gates", "#### Metrics"]
    assert "| exact-match | exact-match | 24 |" in summary  # paired: 24 pairs
    user_error(cli("report", b, "--summary", "-o", "r.html", "--store", "s.db"), "Markdown only")


def test_report_says_why_it_cannot_slice(cli, runs, tmp_path: Path) -> None:
    a, _ = runs
    (tmp_path / "data.jsonl").rename(tmp_path / "moved.jsonl")
    _report(cli, a, "--by", "topic", "-o", "report.html")
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "Not sliced: the dataset data.jsonl cannot be read from here" in html
    assert "Inputs and outputs are not shown" in html
    assert "exact-match" in html


def test_bad_input(cli, runs, user_error, tmp_path: Path) -> None:
    a, _ = runs
    user_error(cli("report", "nope", "-o", "r.html", "--store", "s.db"), "no run 'nope'")
    user_error(
        cli("report", a, "--compare", "nope", "-o", "r.html", "--store", "s.db"), "no run 'nope'"
    )
    user_error(
        cli("report", a, "-o", "missing/dir/r.html", "--store", "s.db"),
        "missing/dir/r.html",
        "does not exist",
    )
    (tmp_path / "adir").mkdir()
    user_error(cli("report", a, "-o", "adir", "--store", "s.db"), "adir", "is a directory")
    user_error(cli("report", a, "-o", "r.html", "--store", "other.db"), "no result store")
    user_error(
        cli("report", a, "-o", "r.html", "--failures", "-1", "--store", "s.db"), "--failures"
    )
    assert not (tmp_path / "r.html").exists()
