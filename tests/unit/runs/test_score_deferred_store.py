"""Start-up (issue 16): a Score run grades its first batch before the store opens.

SQLAlchemy, SciPy and the connectors (aiohttp) are not imported when the first record is graded;
the store opens right after, and a run stopped before then is still created and recorded
(failed or interrupted) as it was when the store opened first.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import evalsi
from evalsi.core import StoreError, UserError
from evalsi.store import SqlStore

PROBE = """
import sys
import evalsi
import evalsi.runs._score as score

seen = []
def mark(event):
    heavy = ("sqlalchemy", "scipy", "aiohttp", "evalsi.connectors", "evalsi.store._sql")
    seen.append([m for m in heavy if m in sys.modules])
score.startup_mark = mark
result = evalsi.evaluate(sys.argv[1], ["exact-match"], store=sys.argv[2])
print(seen[0], result.records, result.metric("exact-match").mean)
"""


def write_rows(path: Path, rows: list[dict[str, object]] | list[str]) -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
    path.write_text("".join(line + "\n" for line in lines))
    return path


def qa(n: int) -> list[dict[str, object]]:
    return [{"id": str(i), "output": "a", "reference": "a" if i % 2 else "b"} for i in range(n)]


@pytest.mark.parametrize("records", [1, 2048, 2049, 5000])  # one batch, exactly one, more
def test_the_first_batch_is_graded_before_the_store_and_its_libraries_load(
    tmp_path: Path, records: int
) -> None:
    data = write_rows(tmp_path / "qa.jsonl", qa(records))
    store = tmp_path / "s.db"
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(data), str(store)],
        capture_output=True,
        text=True,
        check=True,
    )
    loaded, count, mean = done.stdout.split(maxsplit=2)[0], *done.stdout.split()[1:]
    assert loaded == "[]", done.stdout
    assert int(count) == records
    assert float(mean) == pytest.approx((records // 2) / records)
    with sqlite3.connect(store) as conn:  # every result stored, under the one run
        rows = conn.execute("select count(*), count(distinct run) from results").fetchone()
        status = conn.execute("select status, records from runs").fetchall()
    assert rows == (records, 1)
    assert status == [("done", records)]


def test_a_bad_first_line_still_records_a_failed_run(tmp_path: Path) -> None:
    data = write_rows(tmp_path / "bad.jsonl", ["{not json", *map(json.dumps, qa(3))])
    store = tmp_path / "s.db"
    with pytest.raises(UserError, match=r"bad.jsonl:1: not valid JSON"):
        evalsi.evaluate(data, ["exact-match"], store=store)
    runs = SqlStore.open(store).list_runs()
    assert [(r.kind, r.status, r.records) for r in runs] == [("score", "failed", 0)]
    assert "bad.jsonl:1: not valid JSON" in (runs[0].error or "")


def test_an_empty_file_still_records_a_failed_run(tmp_path: Path) -> None:
    data = write_rows(tmp_path / "empty.jsonl", [])
    store = tmp_path / "s.db"
    with pytest.raises(UserError):
        evalsi.evaluate(data, ["exact-match"], store=store)
    runs = SqlStore.open(store).list_runs()
    assert [(r.status, r.records) for r in runs] == [("failed", 0)]


def test_an_evaluator_crash_in_the_first_batch_is_recorded(tmp_path: Path) -> None:
    data = write_rows(tmp_path / "qa.jsonl", qa(3))
    store = tmp_path / "s.db"

    class Boom(Exception):
        pass

    def stop(_done: int, _bad: int) -> None:
        raise Boom("stopped by the progress callback")

    with pytest.raises(Boom):
        evalsi.evaluate(data, ["exact-match"], store=store, progress=stop)
    runs = SqlStore.open(store).list_runs()
    assert [(r.status, r.error) for r in runs] == [
        ("failed", "Boom: stopped by the progress callback")
    ]
    # the graded batch was written before the callback stopped the run
    assert len(list(SqlStore.open(store).iter_results(runs[0].id))) == 3


def test_a_store_that_cannot_open_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    data = write_rows(tmp_path / "qa.jsonl", qa(3))
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(UserError, match="is a directory"):
        evalsi.evaluate(data, ["exact-match"], store=tmp_path / "dir.db")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError, match="is a file, not a directory"):
        evalsi.evaluate(data, ["exact-match"], store=blocker / "sub" / "s.db")
    # bad data and a bad store: the store's error is what the caller hears, as before
    bad = write_rows(tmp_path / "bad.jsonl", ["{not json"])
    with pytest.raises(UserError, match="is a directory"):
        evalsi.evaluate(bad, ["exact-match"], store=tmp_path / "dir.db")


def test_an_open_store_object_is_used_as_given(tmp_path: Path) -> None:
    data = write_rows(tmp_path / "qa.jsonl", qa(4))
    store = SqlStore.open(":memory:")
    result = evalsi.evaluate(data, ["exact-match"], store=store)
    assert result.store is store
    assert [r.id for r in store.list_runs()] == [result.run_id]


def test_a_result_whose_store_is_closed_reads_nothing_more(tmp_path: Path) -> None:
    """After ``result.store.close()`` the result answers from what it holds: reading failures
    from a closed store would open a connection that nobody closes (PostgreSQL warns)."""
    rows = [{"id": "a", "output": "x", "reference": "y"}]
    result = evalsi.evaluate(rows, ["exact-match"], store=str(tmp_path / "s.db"))
    assert [f.id for f in result.failures()] == ["a"]
    assert result.store is not None
    result.store.close()
    assert result.store.closed
    assert result.failures() == []
    assert result.to_dict()["failures"] == []
    assert result.exit_code == 0
