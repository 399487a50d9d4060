"""Start-up (issue 16): a Run sends its first target calls before the store opens.

SQLAlchemy and NumPy are not imported when the workers start calling the target; the store
opens (and the run is created) at the first write, and a run stopped before then is still
recorded. A run with judges or resumed opens it first, as before (their tests cover them).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

import evalsi
from evalsi.store import SqlStore
from tests.integration.run_support import write_qa
from tests.support.registry import BUILTINS
from tests.support.stub_llm import OPENAI_PATH, StubLLM

PROBE = """
import sys
import evalsi
import evalsi.runs._execute as execute

seen = []
def mark(event):
    heavy = ("sqlalchemy", "numpy", "scipy", "evalsi.store._sql")
    seen.append([m for m in heavy if m in sys.modules])
execute.startup_mark = mark
result = evalsi.run(sys.argv[1], store=sys.argv[2])
print(seen[0], result.status, result.records, result.metric("exact-match").n)
"""


def _spec(tmp: Path, url: str, n: int) -> Path:
    write_qa(tmp / "qa.jsonl", n)
    doc = {
        "apiVersion": "evals.si/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "deferred"},
        "spec": {
            "target": {"model": {"connector": "openai-compatible", "baseUrl": url, "model": "m"}},
            "dataset": {"path": "qa.jsonl"},
            "evaluators": [{"ref": "exact-match"}],
            "gates": ["metric('exact-match').n >= 1"],
        },
    }
    path = tmp / "run.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_the_first_calls_go_out_before_the_store_and_numpy_load(tmp_path: Path) -> None:
    with StubLLM(latency_ms=5) as stub:
        spec = _spec(tmp_path, stub.openai_url, 20)
        done = subprocess.run(
            [sys.executable, "-c", PROBE, str(spec), str(tmp_path / "s.db")],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert stub.calls(OPENAI_PATH) == 20
    loaded, status, records, n = done.stdout.split(maxsplit=1)[0], *done.stdout.split()[1:]
    assert loaded == "[]", done.stdout
    assert (status, records, n) == ("done", "20", "20")
    runs = SqlStore.open(tmp_path / "s.db").list_runs()
    assert [(r.kind, r.status, r.records) for r in runs] == [("run", "done", 20)]


def test_a_run_whose_every_call_fails_before_any_write_is_still_recorded(tmp_path: Path) -> None:
    # Nothing listens there: every call fails on infrastructure, and the run ends incomplete
    # with its row created by the first write of the failures.
    spec = _spec(tmp_path, "http://127.0.0.1:9/v1", 2)
    result = evalsi.run(spec, store=tmp_path / "s.db")
    assert result.status == "incomplete"
    runs = SqlStore.open(tmp_path / "s.db").list_runs()
    assert [(r.kind, r.status) for r in runs] == [("run", "incomplete")]


def test_a_run_stopped_before_its_first_write_is_recorded(tmp_path: Path) -> None:
    def stop(*_: object) -> None:
        raise KeyboardInterrupt

    with StubLLM(latency_ms=5) as stub:
        spec = _spec(tmp_path, stub.openai_url, 3)
        loaded = evalsi.runs.load_run_spec(spec)
        try:
            import asyncio

            asyncio.run(
                evalsi.runs.execute_run(
                    loaded, store=tmp_path / "s.db", progress=stop, registry=BUILTINS
                )
            )
        except KeyboardInterrupt:
            pass
        else:  # pragma: no cover - the progress callback always raises
            raise AssertionError("the run did not stop")
    runs = SqlStore.open(tmp_path / "s.db").list_runs()
    assert [(r.kind, r.status) for r in runs] == [("run", "interrupted")]
