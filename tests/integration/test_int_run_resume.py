"""kill -9 in the middle of a Run, then resume: the same final figures as an uninterrupted run."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from evalsi.runs._execute import execute_run
from evalsi.store import SqlStore
from tests.integration.run_support import model_spec, write_qa
from tests.support.registry import BUILTINS
from tests.support.stub_llm import OPENAI_PATH, StubLLM

REPO = Path(__file__).resolve().parents[2]


def _stored_outputs(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return int(conn.execute("SELECT count(*) FROM outputs").fetchone()[0])
    except sqlite3.OperationalError:
        return 0  # tables not created yet


def test_kill_9_then_resume_gives_identical_figures(tmp_path: Path) -> None:
    data = write_qa(tmp_path / "qa.jsonl", 150)
    answers = {f"q{i}": f"a{i}" for i in range(150) if i % 3}
    killed_db = tmp_path / "killed.db"
    with StubLLM(answers=answers, latency_ms=25) as stub:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.run_driver", stub.openai_url, str(data),
             str(killed_db)],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        assert proc.stderr is not None
        deadline = time.monotonic() + 30
        while _stored_outputs(killed_db) < 60 and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        proc.stderr.close()
        stored = _stored_outputs(killed_db)
        assert 60 <= stored < 300, "the run must be killed half way"
        calls_before = stub.calls(OPENAI_PATH)

        store = SqlStore.open(killed_db)
        run = store.list_runs(1)[0]
        assert run.status == "interrupted"  # its pid is gone
        store.close()
        spec = model_spec(stub.openai_url, data, trials=2, concurrency=4)
        resumed = asyncio.run(execute_run(spec, store=killed_db, resume=run.id, registry=BUILTINS))
        redone = stub.calls(OPENAI_PATH) - calls_before
        assert redone <= 300 - stored + 4  # only what was not stored (plus the in-flight ones)
        full = asyncio.run(execute_run(spec, store=tmp_path / "full.db", registry=BUILTINS))

    assert resumed.status == "done"
    assert resumed.run_id == run.id
    assert resumed.tasks == {"ok": 300}
    assert [m.to_dict() for m in resumed.metrics] == [m.to_dict() for m in full.metrics]
    assert resumed.to_dict()["metrics"][0]["pass_at_k"] == full.to_dict()["metrics"][0]["pass_at_k"]
    assert resumed.metric("exact-match").n == 300
