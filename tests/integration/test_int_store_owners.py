"""Run ownership between real processes: a live owner's heartbeat advances by itself, a killed
owner's run reads ``interrupted`` and is offered for resumption, and when two processes try to
take over the same interrupted run, exactly one gets it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evalsi.store import SqlStore

OWNER = r"""
import sys, time
from evalsi.store import _runs
_runs.HEARTBEAT_SECONDS = 0.1
from evalsi.store import SqlStore
store = SqlStore.open(sys.argv[1])
run = store.create_run(kind="run", spec={"evaluators": []}, project_id="p1")
print(run.id, flush=True)
time.sleep(120)
"""

CLAIMER = r"""
import json, sys, time
from evalsi.store import SqlStore
store = SqlStore.open(sys.argv[1])
start = float(sys.argv[3])
while time.time() < start:
    time.sleep(0.001)
got = store.claim_run(sys.argv[2])
print(json.dumps(None if got is None else [got.status, got.pid]))
store.close()
"""


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "s.db")
    return str(request.getfixturevalue("pg_url"))


def test_a_live_owner_beats_and_a_killed_one_is_interrupted(store_url: str) -> None:
    store = SqlStore.open(store_url)
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, store_url], stdout=subprocess.PIPE, text=True
    )
    try:
        assert owner.stdout is not None
        run_id = owner.stdout.readline().strip()
        first = store.get_run(run_id)
        assert (first.status, first.pid, first.project_id) == ("running", owner.pid, "p1")
        assert first.heartbeat_at is not None
        deadline = time.time() + 10
        while (store.get_run(run_id).heartbeat_at or 0) <= first.heartbeat_at:
            assert time.time() < deadline, "the owner's heartbeat never advanced"
            time.sleep(0.05)
        assert store.interrupted_runs() == []
        assert store.claim_run(run_id) is None
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        owner.stdout.close()  # type: ignore[union-attr]
    try:
        assert store.get_run(run_id).status == "interrupted"
        assert [r.id for r in store.interrupted_runs(kind="run", project_id="p1")] == [run_id]
        assert store.count_runs_by_status("p1") == {"interrupted": 1}
    finally:
        store.close()


def test_two_processes_claiming_one_run_one_wins(store_url: str) -> None:
    store = SqlStore.open(store_url)
    try:
        run = store.create_run(kind="run", spec={"evaluators": []})
        store.finish_run(run.id, status="interrupted", records=0, summary=None, manifest=None)
        start = time.time() + 2.0
        claimers = [
            subprocess.Popen(
                [sys.executable, "-c", CLAIMER, store_url, run.id, str(start)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(4)
        ]
        answers = []
        for claimer in claimers:
            out, err = claimer.communicate(timeout=60)
            assert claimer.returncode == 0, err[-2000:]
            answers.append(json.loads(out.strip().splitlines()[-1]))
        winners = [a for a in answers if a is not None]
        assert len(winners) == 1, answers
        status, pid = winners[0]
        assert status == "queued"
        assert pid in {c.pid for c in claimers}
        # the winner has exited since: its claim reads as interrupted again, claimable anew
        assert store.get_run(run.id).status == "interrupted"
        assert os.getpid() != pid
        assert store.claim_run(run.id) is not None
    finally:
        store.close()
