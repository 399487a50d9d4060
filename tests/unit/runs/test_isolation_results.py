"""Sandbox isolation in what a run returns and stores: the ``isolation`` summary of
``ScoreResult``/``RunResult`` (``--format json``), the run's stored summary and manifest, Run and
grade mode, the wire's Run message, the Markdown and HTML reports, and a PostgreSQL store."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest

import evalsi
from evalsi.core import IsolationReport
from evalsi.reports import render_report
from evalsi.runs import IsolationSummary, execute_run, grade_run
from evalsi.specs import DatasetSpec, EvaluatorEntry, RunSpec, TargetSpec
from evalsi.wire import run_from_proto, run_result_to_proto, run_to_proto
from tests.unit.runs.test_isolation_records import (
    BWRAP,
    BWRAP_PARTIAL,
    FIRECRACKER,
    LANDLOCK,
    iso_exec,
    iso_lint,
    registry,
    row,
)

ROWS = [
    row(0, BWRAP, FIRECRACKER),
    row(1, LANDLOCK, FIRECRACKER, ok=False),
    row(2, BWRAP_PARTIAL, FIRECRACKER),
    row(3, BWRAP, FIRECRACKER, ok=False),
]
EXEC_SUMMARY = {
    "evaluator": "iso-exec",
    "level": "confined",
    "driver": "landlock",
    "drivers": ["bwrap", "landlock"],
    "enforcement": "partial",
    "missing": ["cgroup-pids", "cgroup-memory"],
    "sandboxed": 4,
    "partial": 2,
    "unreported": 0,
}
LINT_SUMMARY = {
    "evaluator": "iso-lint",
    "level": "vm",
    "driver": "firecracker",
    "drivers": ["firecracker"],
    "enforcement": "full",
    "missing": [],
    "sandboxed": 4,
    "partial": 0,
    "unreported": 0,
}


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


def _score(tmp_path: Path, store: Any, **kwargs: Any) -> evalsi.ScoreResult:
    data = _write(tmp_path / "code.jsonl", ROWS)
    return evalsi.evaluate(data, [iso_exec, iso_lint, "exact-match"], store=store, **kwargs)


# -- Score mode: JSON, stored summary, manifest -----------------------------------------------


def test_score_json_summary_and_manifest_carry_the_isolation_summary(tmp_path: Path) -> None:
    result = _score(tmp_path, tmp_path / "s.db")
    out = orjson.loads(result.to_json())
    assert out["isolation"] == [EXEC_SUMMARY, LINT_SUMMARY]  # exact-match ran nothing: absent
    assert result.store is not None
    info = result.store.get_run(result.run_id)
    assert info.summary is not None
    assert info.manifest is not None
    assert info.summary["isolation"] == out["isolation"]
    assert info.manifest["isolation"] == out["isolation"]
    result.store.close()


def test_score_table_and_markdown_flag_partial_enforcement(tmp_path: Path) -> None:
    result = _score(tmp_path, ":memory:")
    table = result.table()
    assert "sandbox isolation" in table
    line = next(x for x in table.splitlines() if x.startswith("iso-exec") and "confined" in x)
    assert "PARTIAL (2 of 4)" in line
    assert "cgroup-pids, cgroup-memory" in line
    assert "| iso-lint | vm | firecracker | full | - | 4 |" in result.markdown()


def test_no_sandbox_means_an_empty_isolation_list_everywhere(tmp_path: Path) -> None:
    data = _write(tmp_path / "plain.jsonl", [row(0), row(1)])
    result = evalsi.evaluate(data, ["exact-match"], store=tmp_path / "s.db")
    assert result.to_dict()["isolation"] == []
    assert "sandbox isolation" not in result.table()
    assert result.store is not None
    info = result.store.get_run(result.run_id)
    assert (info.summary or {})["isolation"] == []
    result.store.close()


# -- Run and grade mode ----------------------------------------------------------------------


def answer(question: str) -> str:
    return question


def _run_spec(data: Path, *, trials: int = 1, gates: tuple[str, ...] = ()) -> RunSpec:
    return RunSpec(
        name="iso",
        target=TargetSpec(kind="python", python=f"{__name__}:answer"),
        dataset=DatasetSpec(source=str(data), fields={"metadata": "metadata"}),
        evaluators=(
            EvaluatorEntry(ref="test/iso-exec"),
            EvaluatorEntry(ref="test/iso-lint"),
        ),
        trials=trials,
        max_concurrency=4,
        gates=gates,
    )


def _samples(tmp_path: Path) -> Path:
    rows = [{"id": r["id"], "input": r["output"], "metadata": r["metadata"]} for r in ROWS]
    return _write(tmp_path / "samples.jsonl", rows)


def test_run_mode_summarises_gates_and_stores_isolation(tmp_path: Path) -> None:
    spec = _run_spec(
        _samples(tmp_path),
        trials=2,
        gates=(
            "metric('iso-lint').isolation >= kernel",
            "metric('iso-exec').isolation >= namespaced",
        ),
    )
    result = asyncio.run(execute_run(spec, store=tmp_path / "s.db", registry=registry()))
    assert result.status == "done"
    doubled = [dict(s, sandboxed=8, partial=s["partial"] * 2) for s in (EXEC_SUMMARY, LINT_SUMMARY)]
    assert result.to_dict()["isolation"] == doubled  # every trial counted
    assert [g["verdict"] for g in result.gates] == ["passed", "failed"]
    assert result.gates[1]["reason"].startswith(
        "iso-exec ran at confined (landlock), below namespaced"
    )
    assert result.exit_code == 1
    assert result.store is not None
    info = result.store.get_run(result.run_id)
    assert (info.summary or {})["isolation"] == doubled
    assert (info.manifest or {})["isolation"] == doubled
    per_record = {r.record_id: r.isolation for r in result.iter_record_isolation()}
    assert per_record["r1"] == IsolationReport(
        "confined", "landlock", {"enforcement": "partial", "missing": "cgroup-pids"}
    )
    assert per_record["r0"] == IsolationReport("namespaced", "bwrap", {"enforcement": "full"})

    graded = asyncio.run(
        grade_run(
            tmp_path / "s.db",
            result.run_id,
            ["test/iso-lint"],
            gates="metric('iso-lint').isolation == vm",
            registry=registry(),
        )
    )
    assert graded.to_dict()["isolation"] == [doubled[1]]
    assert [g["verdict"] for g in graded.gates] == ["passed"]
    assert graded.store is not None
    assert (graded.store.get_run(graded.run_id).manifest or {})["isolation"] == [doubled[1]]
    graded.store.close()
    result.store.close()


# -- the wire ---------------------------------------------------------------------------------


def test_run_messages_carry_the_isolation_summary(tmp_path: Path) -> None:
    spec = _run_spec(_samples(tmp_path))
    result = asyncio.run(execute_run(spec, store=tmp_path / "s.db", registry=registry()))
    back = run_from_proto(run_result_to_proto(result))
    assert back.isolation == result.isolation
    assert back.to_dict()["isolation"] == [EXEC_SUMMARY, LINT_SUMMARY]
    assert result.store is not None
    stored = run_from_proto(run_to_proto(result.store.get_run(result.run_id)))
    assert stored.isolation == result.isolation
    assert isinstance(stored.isolation[0], IsolationSummary)
    result.store.close()


# -- reports ---------------------------------------------------------------------------------


def test_markdown_report_shows_isolation_and_flags_partial(tmp_path: Path) -> None:
    result = _score(tmp_path, tmp_path / "s.db")
    md = render_report(tmp_path / "s.db", result.run_id, fmt="md")
    assert "## Sandbox isolation" in md
    assert (
        "| iso-exec | confined | bwrap, landlock | **partial** | cgroup-pids, "
        "cgroup-memory | 4 | 0 |" in md
    )
    assert "| iso-lint | vm | firecracker | full | - | 4 | 0 |" in md
    assert (
        "> **warning:** iso-exec ran with partial sandbox enforcement in 2 of 4 "
        "sandboxed results (missing: cgroup-pids, cgroup-memory)" in md
    )
    # Failures list each failing record's provenance isolation (weakest across evaluators).
    failures = md.split("## Failures", 1)[1].split("## Gates", 1)[0]
    assert "| isolation |" in failures
    r1 = next(x for x in failures.splitlines() if x.startswith("| `r1`"))
    assert r1.endswith("| confined (landlock), enforcement partial: missing cgroup-pids |")
    r3 = next(x for x in failures.splitlines() if x.startswith("| `r3`"))
    assert r3.endswith("| namespaced (bwrap) |")
    if result.store is not None:
        result.store.close()


def test_html_report_shows_isolation_and_flags_partial(tmp_path: Path) -> None:
    result = _score(tmp_path, tmp_path / "s.db")
    html = render_report(tmp_path / "s.db", result.run_id, fmt="html")
    section = html.split('<section id="isolation">', 1)[1].split("</section>", 1)[0]
    assert '<span class="badge bad">partial</span>' in section
    assert '<span class="badge ok">full</span>' in section
    assert "<td>cgroup-pids, cgroup-memory</td>" in section
    assert '<p class="warn">iso-exec ran with partial sandbox enforcement' in section
    assert '<a href="#isolation">' in html
    assert "sandbox: confined (landlock), enforcement partial: missing cgroup-pids" in html
    if result.store is not None:
        result.store.close()


def test_reports_without_sandbox_have_no_isolation_section(tmp_path: Path) -> None:
    data = _write(tmp_path / "plain.jsonl", [row(0, ok=False), row(1)])
    result = evalsi.evaluate(data, [iso_exec], store=tmp_path / "s.db")
    md = render_report(tmp_path / "s.db", result.run_id, fmt="md")
    html = render_report(tmp_path / "s.db", result.run_id, fmt="html")
    assert "Sandbox isolation" not in md
    assert "| isolation |" not in md
    assert 'id="isolation"' not in html
    if result.store is not None:
        result.store.close()


# -- PostgreSQL --------------------------------------------------------------------------------


def test_postgres_store_gives_the_same_isolation_as_sqlite(tmp_path: Path, pg_url: str) -> None:
    lite = _score(tmp_path, tmp_path / "s.db", gates=["metric('iso-lint').isolation >= vm"])
    pg = _score(tmp_path, pg_url, gates=["metric('iso-lint').isolation >= vm"])
    try:
        assert (
            pg.to_dict()["isolation"]
            == lite.to_dict()["isolation"]
            == [
                EXEC_SUMMARY,
                LINT_SUMMARY,
            ]
        )
        assert pg.gates == lite.gates
        assert list(pg.iter_record_isolation()) == list(lite.iter_record_isolation())
        assert pg.store is not None
        info = pg.store.get_run(pg.run_id)
        assert (info.manifest or {})["isolation"] == [EXEC_SUMMARY, LINT_SUMMARY]
        # (No report here: a report of a gated run leaves a server-side cursor open on
        # PostgreSQL, a known store issue unrelated to isolation.)
    finally:
        for r in (lite, pg):
            if r.store is not None:
                r.store.close()


@pytest.fixture(autouse=True)
def _cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no .evalsi/ left in the repository
