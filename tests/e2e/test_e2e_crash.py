"""Crash safety: a run killed half way leaves a store that opens, a run marked `interrupted`,
and every result committed before the kill readable (nothing recorded is lost).

The store is SQLite in WAL mode, so the test reads it (read-only) while the CLI writes it. The
deadlines below only stop a hung test; nothing asserts how long anything took.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

RECORDS = 400_000
DEADLINE_S = 120.0


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Path:
    """400k small records (written without json.dumps per row: it is the slow part)."""
    path = tmp_path_factory.mktemp("crash") / "big.jsonl"
    answers = ("yes", "no", "maybe")
    with path.open("w") as f:
        f.writelines(
            f'{{"id": "r{i}", "output": "{answers[i % 3]}", "reference": "yes", '
            f'"usage": {{"latency_ms": {i % 997}}}}}\n'
            for i in range(RECORDS)
        )
    return path


def _results(db: Path) -> int:
    """Rows in ``results`` as a read-only reader sees them; 0 while the store is being created."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            return int(conn.execute("SELECT count(*) FROM results").fetchone()[0])
    except sqlite3.OperationalError:  # no file or no table yet
        return 0


def _wait_for_results(proc: subprocess.Popen[str], db: Path, at_least: int) -> int:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        n = _results(db)
        if n >= at_least:
            return n
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(
                f"evalsi exited ({proc.returncode}) before the kill point: {err}{out[:500]}"
            )
        if time.monotonic() > deadline:
            pytest.fail(f"no results after {DEADLINE_S} s ({n} rows)")
        time.sleep(0.01)


def _children(pid: int) -> list[int]:
    """The direct children of ``pid`` (a writer process, say), from /proc."""
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_gone(pids: list[int]) -> None:
    """Let orphaned helpers of the killed process finish; kill any that hang (by their id)."""
    deadline = time.monotonic() + 30
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    for p in pids:
        if _alive(p):
            os.kill(p, signal.SIGKILL)


def _run_json(run_evalsi, cwd: Path, *args: str) -> dict:
    proc = run_evalsi(cwd, *args, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return json.loads(proc.stdout)


# Kill at the first committed batch, and once the run has written many batches (long runs may
# hand their writes to a helper; a kill must not lose what it committed either).
@pytest.mark.parametrize("kill_after_rows", [1, 150_000], ids=["first-batch", "later"])
def test_kill_9_leaves_an_interrupted_run_and_its_results(
    big, tmp_path, start_evalsi, run_evalsi, kill_after_rows
):
    db = tmp_path / "crash.db"
    proc = start_evalsi(
        "eval",
        "--data",
        big,
        "--evaluators",
        "exact-match,latency,length",
        "--store",
        db,
        "--format",
        "json",
    )
    seen = _wait_for_results(proc, db, kill_after_rows)
    helpers = _children(proc.pid)
    proc.kill()  # SIGKILL: no handler, no flush, no finally
    out, _err = proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    assert out == ""  # it never got to print a result
    _wait_gone(helpers)

    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    kept = _results(db)
    assert kept >= seen > 0  # nothing committed before the kill was lost
    assert kept < RECORDS * 3  # the run really was cut short

    runs = _run_json(run_evalsi, tmp_path, "runs", "list", "--store", db)["runs"]
    assert len(runs) == 1
    run_id = runs[0]["run_id"]
    assert runs[0]["status"] == "interrupted"
    shown = _run_json(run_evalsi, tmp_path, "runs", "show", run_id, "--store", db)
    assert shown["status"] == "interrupted"
    assert shown["run_id"] == run_id
    # The failures listed come from the results that survived.
    assert shown["failures"]
    assert {f["evaluator"] for f in shown["failures"]} == {"exact-match"}
    table = run_evalsi(tmp_path, "runs", "show", "latest", "--store", db)
    assert table.returncode == 0, table.stderr
    assert "interrupted" in table.stdout

    # The store still takes new runs.
    (tmp_path / "small.jsonl").write_text('{"output": "a", "reference": "a"}\n')
    again = _run_json(
        run_evalsi,
        tmp_path,
        "eval",
        "--data",
        "small.jsonl",
        "--evaluators",
        "exact-match",
        "--store",
        db,
    )
    assert again["status"] == "done"
    statuses = {
        r["run_id"]: r["status"]
        for r in _run_json(run_evalsi, tmp_path, "runs", "list", "--store", db)["runs"]
    }
    assert statuses == {run_id: "interrupted", again["run_id"]: "done"}


def test_sigint_stops_the_run_marks_it_interrupted_and_exits_3(
    big, tmp_path, start_evalsi, run_evalsi
):
    db = tmp_path / "sigint.db"
    proc = start_evalsi(
        "eval", "--data", big, "--evaluators", "exact-match", "--store", db, "--format", "json"
    )
    _wait_for_results(proc, db, 1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=DEADLINE_S)
    assert "Traceback" not in err
    assert out == ""
    assert proc.returncode == 3, err
    assert "interrupted" in err
    run = _run_json(run_evalsi, tmp_path, "runs", "show", "latest", "--store", db)
    assert run["status"] == "interrupted"
    kept = _results(db)
    assert 0 < kept < RECORDS  # stopped early, and what it graded is kept
