"""The store's raw write connection is shared: writes from several threads (the scheduler, the
server's handlers, the policy engine) must neither lose rows nor fail."""

from __future__ import annotations

import threading
from pathlib import Path

from evalsi.core import Outcome, ResultBatch
from evalsi.store import SqlStore


def _batch(record_id: str) -> ResultBatch:
    b = ResultBatch("e", "ref", "m", [record_id], trial=0)
    b.set_outcome(0, Outcome.SKIPPED, "x")
    return b


def test_two_threads_writing_two_runs_keep_every_row(tmp_path: Path) -> None:
    store = SqlStore.open(str(tmp_path / "s.db"))
    runs = [store.create_run(kind="score", spec={"evaluators": [{}]}, name=n).id for n in "ab"]
    errors: list[BaseException] = []

    def worker(run: str) -> None:
        for i in range(300):
            try:
                store.write_batches(run, [(0, i, _batch(f"r{i}"))])
            except BaseException as e:  # noqa: BLE001 - collected for the assertion
                errors.append(e)

    threads = [threading.Thread(target=worker, args=(r,)) for r in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert [sum(1 for _ in store.iter_results(r)) for r in runs] == [300, 300]
    store.close()
