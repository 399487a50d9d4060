"""Ctrl-C during `evalsi run`: exit 3, the run interrupted, what was stored kept, resumable."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from tests.support.stub_llm import OPENAI_PATH, StubLLM

EVALSI = Path(sys.executable).with_name("evalsi")

SPEC = """\
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: interrupt}}
spec:
  target:
    model: {{connector: openai-compatible, baseUrl: "{url}", model: stub-model}}
  dataset: {{path: qa.jsonl}}
  maxConcurrency: 2
  evaluators: [{{ref: exact-match}}]
"""


def stored_outputs(db: Path) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            return int(conn.execute("SELECT count(*) FROM outputs").fetchone()[0])
    except sqlite3.Error:
        return 0


def test_sigint_interrupts_and_resume_finishes(tmp_path: Path) -> None:
    with (tmp_path / "qa.jsonl").open("w") as f:
        for i in range(200):
            f.write(json.dumps({"id": f"s{i}", "input": f"q{i}", "reference": f"q{i}"}) + "\n")
    db = tmp_path / "s.db"
    with StubLLM(latency_ms=50) as stub:
        (tmp_path / "run.yaml").write_text(SPEC.format(url=stub.openai_url))
        proc = subprocess.Popen(
            [str(EVALSI), "run", "-f", "run.yaml", "--store", str(db), "--format", "json"],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while stored_outputs(db) < 10 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 3, err
        assert "Traceback" not in err
        kept = stored_outputs(db)
        assert 10 <= kept < 200
        listed = subprocess.run(
            [str(EVALSI), "runs", "list", "--store", str(db), "--format", "json"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
        )
        (run,) = json.loads(listed.stdout)["runs"]
        assert run["status"] == "interrupted"
        resumed = subprocess.run(
            [
                str(EVALSI),
                "run",
                "-f",
                "run.yaml",
                "--store",
                str(db),
                "--resume",
                run["run_id"],
                "--format",
                "json",
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
        )
        assert resumed.returncode == 0, resumed.stderr
        assert stub.calls(OPENAI_PATH) < 200 + 10  # what was kept was not asked again
    out = json.loads(resumed.stdout)
    assert out["status"] == "done"
    assert out["metrics"][0]["n"] == 200
