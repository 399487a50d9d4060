"""``evalsi run --execute-only``, ``evalsi grade --from`` and ``evalsi rerun`` as a user runs
them: JSON alone on stdout, the figures of a one-shot run, exit codes, one-line errors."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ENV = {"PYTHONPATH": str(EXAMPLES)}


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    """The Python-target example, with its dataset copied so a test may change it."""
    shutil.copy(EXAMPLES / "qa.jsonl", tmp_path / "qa.jsonl")
    target = tmp_path / "run.yaml"
    shutil.copy(EXAMPLES / "run-python.yaml", target)
    return target


def _em(out: dict[str, Any]) -> dict[str, Any]:
    return next(m for m in out["metrics"] if m["metric"] == "exact-match")


def test_execute_only_then_grade_gives_the_one_shot_figures(
    cli: Callable[..., Any], json_out: Callable[..., dict[str, Any]], spec: Path
) -> None:
    executed = json_out(cli("run", "-f", spec, "--execute-only", "--format", "json", env=ENV))
    assert executed["status"] == "done"
    assert executed["graded"] is False
    assert executed["metrics"] == []
    assert executed["gates"] == []
    assert executed["tasks"] == {"ok": 40}
    grade = cli(
        "grade", "--from", executed["run_id"], "--evaluators", "exact-match,latency",
        "--param", "exact-match.ignore_case=true",
        "--gate", "metric('exact-match').mean >= 0.2", "--format", "json",
    )  # fmt: skip
    graded = json_out(grade)
    assert graded["source_run"] == executed["run_id"]
    assert graded["run_id"] != executed["run_id"]
    assert graded["tasks"] == {"ok": 40}
    assert [g["verdict"] for g in graded["gates"]] == ["passed"]
    one_shot = json_out(cli("run", "-f", spec, "--format", "json", env=ENV))
    assert one_shot["graded"] is True
    assert _em(graded) == _em(one_shot)
    assert set(_em(graded)["pass_at_k"]) == {"1", "2"}
    shown = cli("runs", "show", graded["run_id"], "--format", "json")
    assert shown.returncode == 0, shown.stderr
    table = cli("grade", "--from", executed["run_id"], "--evaluators", "exact-match")
    assert table.returncode == 0, table.stderr
    assert f"source run {executed['run_id']}" in table.stdout
    plain = cli("run", "-f", spec, "--execute-only", env=ENV)
    assert plain.returncode == 0, plain.stderr
    assert "not graded" in plain.stdout
    assert "tasks: ok 40" in plain.stdout


def test_grade_exit_codes(
    cli: Callable[..., Any],
    json_out: Callable[..., dict[str, Any]],
    user_error: Callable[..., str],
    spec: Path,
) -> None:
    user_error(cli("grade", "--from", "nope", "--evaluators", "exact-match"), "no result store")
    executed = json_out(cli("run", "-f", spec, "--execute-only", "--format", "json", env=ENV))
    user_error(cli("grade", "--from", "nope", "--evaluators", "exact-match"), "no run 'nope'")
    user_error(cli("rerun", "nope"), "no run 'nope'")
    user_error(cli("grade", "--from", executed["run_id"], "--evaluators", " "), "--evaluators")
    failing = cli(
        "grade", "--from", executed["run_id"], "--evaluators", "exact-match",
        "--gate", "metric('exact-match').mean >= 0.99", "--format", "json",
    )  # fmt: skip
    assert failing.returncode == 1, failing.stderr
    assert json.loads(failing.stdout)["gates"][0]["verdict"] == "failed"
    with (spec.parent / "qa.jsonl").open("a") as f:
        f.write('{"id": "extra", "input": "new?", "reference": "yes"}\n')
    user_error(
        cli("grade", "--from", executed["run_id"], "--evaluators", "exact-match"),
        "changed since run",
    )


def test_rerun_replays_the_stored_spec_and_warns_of_unpinned_items(
    cli: Callable[..., Any], json_out: Callable[..., dict[str, Any]], spec: Path, tmp_path: Path
) -> None:
    first = json_out(cli("run", "-f", spec, "--format", "json", env=ENV))
    again = cli("rerun", first["run_id"], "--format", "json", env=ENV)
    out = json_out(again)
    assert "unpinned" not in again.stderr  # a local Python target pins nothing away
    assert out["rerun_of"] == first["run_id"]
    assert out["run_id"] != first["run_id"]
    assert _em(out) == _em(first)
    assert out["gates"] == first["gates"]
    with sqlite3.connect(tmp_path / ".evalsi" / "evalsi.db") as conn:
        conn.execute(
            "UPDATE runs SET manifest = json_set(manifest, '$.unpinned', json_array(?)) "
            "WHERE id = ?",
            ("target.model 'gpt-x': a closed API model can change behind its name", out["run_id"]),
        )
    warned = cli("rerun", out["run_id"], "--format", "json", env=ENV)
    assert json_out(warned)["rerun_of"] == out["run_id"]
    assert "warning: unpinned: target.model 'gpt-x'" in warned.stderr
