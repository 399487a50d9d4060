"""The Langfuse and LangSmith sinks through their real SDKs (``langfuse``, ``langsmith``) against
recorded-protocol fakes of the two services on loopback (tests/support/langfuse_api.py and
langsmith_api.py: neither service can run here). Each export is checked against the store,
exported again to show it leaves no duplicate, and sent through the CLI as a user would."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalsi.packs import builtin_registry
from evalsi.runs import execute_run, export_run
from evalsi.sinks import TraceScore, open_trace_sink
from evalsi.sinks._remote_ids import task_run_id, task_trace_id
from evalsi.specs import SinkSpec, run_spec_from_dict
from evalsi.store import SqlStore
from tests.support.langfuse_api import FakeLangfuse
from tests.support.langsmith_api import FakeLangsmith
from tests.support.server_state import free_port

EVALSI = str(Path(sys.executable).with_name("evalsi"))
N = 12
TARGET = """
def answer(input):
    n = int(input.split("-")[1])
    return input.upper() if n % 3 else "?"
"""
SPEC = {
    "apiVersion": "evals.si/v1alpha1",
    "kind": "EvalRun",
    "metadata": {"name": "remote"},
    "spec": {
        "target": {"python": "sink_target:answer"},
        "dataset": {"path": "rows.jsonl"},
        # pass/fail (exact-match), pass/fail + a number (fuzzy-match), pass/fail + a label
        "evaluators": [{"ref": "exact-match"}, {"ref": "fuzzy-match"},
                       {"ref": "one-of", "params": {"choices": ["?"]}}],
        "gates": ["metric('exact-match').mean >= 0.9"],
    },
}  # fmt: skip
PK, SK, LS_KEY = "pk-lf-test", "sk-lf-test", "lsv2-test"


def _workdir(tmp_path: Path) -> None:
    (tmp_path / "sink_target.py").write_text(TARGET)
    rows = [{"id": f"s{i}", "input": f"q-{i}", "reference": f"Q-{i}"} for i in range(N)]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture
def stored_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[SqlStore, str]:
    _workdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = run_spec_from_dict(SPEC, base_dir=tmp_path)
    db = SqlStore.open(str(tmp_path / ".evalsi" / "evalsi.db"))
    result = asyncio.run(execute_run(spec, store=db, registry=builtin_registry()))
    return db, result.run_id


@pytest.fixture
def langfuse(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLangfuse]:
    monkeypatch.setenv("LF_SECRET", SK)
    with FakeLangfuse(PK, SK) as fake:
        yield fake


@pytest.fixture
def langsmith(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLangsmith]:
    monkeypatch.setenv("LS_KEY", LS_KEY)
    with FakeLangsmith(LS_KEY) as fake:
        yield fake


def _scores(db: SqlStore, run_id: str) -> dict[tuple[str, str], Any]:
    """(record, evaluator/metric) -> (passed, number, label, explanation) as stored."""
    out = {}
    for _, _, r in db.iter_results(run_id):
        for s in r.scores:
            name = s.name or r.evaluator
            key = r.evaluator if name == r.evaluator else f"{r.evaluator}/{name}"
            out[(r.record_id, key)] = (s.passed, s.number, s.label, s.explanation)
    return out


def _cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EVALSI, *args], cwd=cwd, env={**os.environ, "PYTHONPATH": str(cwd), **(env or {})},
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip


# Langfuse


def test_langfuse_gets_traces_typed_scores_and_a_dataset_run_once(
    stored_run: tuple[SqlStore, str], langfuse: FakeLangfuse
) -> None:
    db, run_id = stored_run
    options = {"host": langfuse.url, "publicKey": PK, "secretKeyRef": "env:LF_SECRET"}
    sink = SinkSpec("langfuse", {**options, "dataset": "evalsi-qa"})
    first = export_run(db, run_id, [sink])[0]
    assert first.receipt is not None, first.error
    st = langfuse.state
    counts = (len(st.traces), len(st.observations), len(st.scores), len(st.items),
              len(st.run_items))  # fmt: skip
    again = export_run(db, run_id, [sink])[0]
    assert again.receipt == first.receipt  # the same ids, the same counts
    assert counts == (len(st.traces), len(st.observations), len(st.scores), len(st.items),
                      len(st.run_items))  # fmt: skip
    assert counts[0] == N + 1  # a trace per task, and the summary's
    assert counts[3] == counts[4] == N  # an item per record, each linked once

    stored = _scores(db, run_id)
    remote = {(s["metadata"]["record_id"], s["name"]): s for s in st.scores.values()
              if "record_id" in s["metadata"]}  # fmt: skip
    assert set(remote) == set(stored)
    for key, (passed, number, label, explanation) in stored.items():
        got = remote[key]
        assert got["traceId"] == task_trace_id(run_id, key[0], 0)
        if passed is not None:
            assert (got["dataType"], got["value"]) == ("BOOLEAN", float(passed))
        elif number is not None:
            assert (got["dataType"], got["value"]) == ("NUMERIC", pytest.approx(number))
        else:
            assert (got["dataType"], got["value"]) == ("CATEGORICAL", label)
        assert (got.get("comment") or "") == explanation
    assert {s["dataType"] for s in remote.values()} == {"BOOLEAN", "NUMERIC", "CATEGORICAL"}

    receipt = first.receipt["remote"]
    summary = st.traces[receipt["summary_trace_id"]]
    assert summary["metadata"]["evalsi_run_id"] == run_id
    means = {s["name"]: s["value"] for s in st.scores.values()
             if s.get("traceId") == receipt["summary_trace_id"]}  # fmt: skip
    stored_means = {m["evaluator"]: m["mean"] for m in db.get_run(run_id).summary["metrics"]
                    if m["metric"] == m["evaluator"]}  # fmt: skip
    assert means["exact-match"] == pytest.approx(stored_means["exact-match"])
    assert means["gate.0"] == 0.0  # the gate failed: a third of the answers are wrong
    links = {v["traceId"] for v in st.run_items.values()}
    assert links == {task_trace_id(run_id, f"s{i}", 0) for i in range(N)}
    assert {v["runName"] for v in st.run_items.values()} == {receipt["dataset_run"]}
    assert run_id in receipt["dataset_run"]
    assert {run[0] for run in st.run_items} == {receipt["dataset_run_id"]}


def test_langfuse_from_the_spec_and_from_export_with_a_sinks_file(
    tmp_path: Path, langfuse: FakeLangfuse
) -> None:
    _workdir(tmp_path)
    sinks = [{"langfuse": {"host": langfuse.url, "publicKey": PK, "secretKeyRef": "env:LF_SECRET"}}]
    (tmp_path / "run.json").write_text(
        json.dumps({**SPEC, "spec": {**SPEC["spec"], "sinks": sinks}})
    )
    ran = _cli("run", "-f", "run.json", "--format", "json", cwd=tmp_path)
    assert ran.returncode in (0, 1), ran.stderr  # 1: the gate fails, by design
    out = json.loads(ran.stdout)
    assert out["exports"][0]["ok"] is True, out["exports"]
    traces = len(langfuse.state.traces)
    assert traces == N + 1
    (tmp_path / "sinks.yaml").write_text("sinks:\n" + "".join(
        f"  - langfuse: {json.dumps(s['langfuse'])}\n" for s in sinks))  # fmt: skip
    exported = _cli("export", out["run_id"], "--sinks", "sinks.yaml", "--format", "json",
                    cwd=tmp_path)  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    again = json.loads(exported.stdout)
    assert again["exports"][0]["receipt"]["remote"] == out["exports"][0]["receipt"]["remote"]
    assert len(langfuse.state.traces) == traces


def test_langfuse_wrong_key_and_no_server_fail_clearly(
    stored_run: tuple[SqlStore, str], langfuse: FakeLangfuse, tmp_path: Path
) -> None:
    db, run_id = stored_run
    proc = _cli("export", run_id, "--to", f"langfuse:{langfuse.url}", cwd=tmp_path,
                env={"LANGFUSE_PUBLIC_KEY": PK, "LANGFUSE_SECRET_KEY": "sk-wrong"})  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    assert f"langfuse {langfuse.url}" in proc.stderr
    assert "keys were refused" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not langfuse.state.traces

    nothing = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    options = {"host": nothing, "publicKey": PK, "secretKeyRef": "env:LF_SECRET"}
    out = export_run(db, run_id, [SinkSpec("langfuse", options)])
    assert out[0].receipt is None
    assert "ConnectError" in out[0].error
    assert nothing in out[0].error
    assert time.monotonic() - started < 30


def test_langfuse_trace_scores_land_on_the_otel_trace_and_resend_updates(
    langfuse: FakeLangfuse,
) -> None:
    sink = open_trace_sink("langfuse", {"host": langfuse.url, "publicKey": PK}, secret=SK)
    trace_id, span_id = "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174"
    scores = [
        TraceScore("sc-1", trace_id, span_id, "p", "watch-1", "run-w", "judge", "judge",
                   "scored", 1.0, None, "grounded", 1_700_000_000.0, passed=True),
        TraceScore("sc-2", trace_id, span_id, "p", "watch-1", "run-w", "judge", "relevance",
                   "scored", 0.4, None, "", 1_700_000_000.0),
        TraceScore("sc-3", trace_id, "", "p", "watch-1", "run-w", "tone", "tone",
                   "scored", None, "polite", "", 1_700_000_001.0),
        TraceScore("sc-4", trace_id, "", "p", "watch-1", "run-w", "x", "x",
                   "error", None, None, "judge down", 1_700_000_001.0),
    ]  # fmt: skip
    try:
        receipt = sink.send(scores)
        assert receipt.remote == {"scores": "3", "skipped": "1"}
        held = list(langfuse.state.scores.values())
        assert {s["traceId"] for s in held} == {trace_id}
        assert {(s["name"], s["dataType"]) for s in held} == {
            ("judge", "BOOLEAN"),
            ("judge/relevance", "NUMERIC"),
            ("tone", "CATEGORICAL"),
        }
        assert {s.get("observationId") for s in held} == {span_id, None}
        sink.send(scores)  # a retried batch
        assert len(langfuse.state.scores) == 3
    finally:
        sink.close()


# LangSmith


def test_langsmith_gets_runs_feedback_and_examples_once(
    stored_run: tuple[SqlStore, str], langsmith: FakeLangsmith
) -> None:
    db, run_id = stored_run
    sink = SinkSpec("langsmith", {"endpoint": langsmith.url, "apiKeyRef": "env:LS_KEY",
                                  "project": "evalsi-it", "dataset": "evalsi-qa"})  # fmt: skip
    first = export_run(db, run_id, [sink])[0]
    assert first.receipt is not None, first.error
    st = langsmith.state
    counts = (len(st.runs), len(st.feedback), len(st.examples))
    again = export_run(db, run_id, [sink])[0]
    assert again.receipt is not None, again.error
    assert counts == (len(st.runs), len(st.feedback), len(st.examples))  # no duplicates
    ids = ("project_id", "summary_run_id", "runs", "feedback", "dataset_id", "examples")
    assert {k: again.receipt["remote"][k] for k in ids} == {
        k: first.receipt["remote"][k] for k in ids
    }
    assert again.receipt["remote"]["feedback_already_there"] == first.receipt["remote"]["feedback"]
    assert st.conflicts["feedback"] == int(first.receipt["remote"]["feedback"])
    assert counts[0] == N + 1
    assert counts[2] == N

    stored = _scores(db, run_id)
    remote = {(st.runs[f["run_id"]]["inputs"].get("record_id"), f["key"]): f
              for f in st.feedback.values()}  # fmt: skip
    for key, (passed, number, label, explanation) in stored.items():
        got = remote[key]
        assert got["run_id"] == str(task_run_id(run_id, key[0], 0))
        if passed is not None:
            assert got["score"] == int(passed)
        elif number is not None:
            assert got["score"] == pytest.approx(number, abs=1e-4)
        else:
            assert (got.get("score"), got["value"]) == (None, label)
        assert (got.get("comment") or "") == explanation
        assert got["session_id"] == first.receipt["remote"]["project_id"]
    dataset_id = first.receipt["remote"]["dataset_id"]
    for i in range(N):
        run = st.runs[str(task_run_id(run_id, f"s{i}", 0))]
        example = st.examples[run["reference_example_id"]]
        assert (example["inputs"], example["dataset_id"]) == ({"record_id": f"s{i}"}, dataset_id)
    summary = st.runs[first.receipt["remote"]["summary_run_id"]]
    assert summary["outputs"]["gates"][0]["verdict"] == "failed"


def test_langsmith_from_export_with_a_sinks_file_and_a_wrong_key(
    stored_run: tuple[SqlStore, str], langsmith: FakeLangsmith, tmp_path: Path
) -> None:
    _db, run_id = stored_run
    (tmp_path / "sinks.yaml").write_text(
        f"sinks:\n  - langsmith: {{endpoint: '{langsmith.url}', apiKeyRef: env:LS_KEY}}\n"
    )
    ok = _cli("export", run_id, "--sinks", "sinks.yaml", "--format", "json", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["exports"][0]["receipt"]["remote"]["project"] == "evalsi"
    runs = len(langsmith.state.runs)
    assert runs == N + 1
    bad = _cli("export", run_id, "--to", "langsmith:evalsi", cwd=tmp_path,
               env={"LANGSMITH_ENDPOINT": langsmith.url, "LANGSMITH_API_KEY": "wrong"})  # fmt: skip
    assert bad.returncode == 3, bad.stderr
    assert f"langsmith {langsmith.url} evalsi" in bad.stderr
    assert "API key was refused" in bad.stderr
    assert "Traceback" not in bad.stderr
    assert len(langsmith.state.runs) == runs


def test_langsmith_unreachable_fails_within_bounds(stored_run: tuple[SqlStore, str]) -> None:
    db, run_id = stored_run
    nothing = f"http://127.0.0.1:{free_port()}"
    os.environ.setdefault("LS_KEY", LS_KEY)
    started = time.monotonic()
    out = export_run(db, run_id, [SinkSpec("langsmith", {"endpoint": nothing,
                                                         "apiKeyRef": "env:LS_KEY"})])  # fmt: skip
    assert out[0].receipt is None
    assert nothing in out[0].error
    assert "Traceback" not in out[0].error
    assert time.monotonic() - started < 60


def test_langsmith_trace_scores_are_feedback_on_the_otel_spans_runs(
    langsmith: FakeLangsmith,
) -> None:
    project = "watched"
    with_project = {"endpoint": langsmith.url, "project": project}
    trace_id, span_id = "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174"
    run = langsmith.ingest_otel_span(project, trace_id, span_id)  # the app's trace, over OTLP
    langsmith.state.projects[project] = {"id": "6f1c0c56-0000-4000-8000-000000000001",
                                         "name": project, "start_time": "2026-01-01T00:00:00Z",
                                         "tenant_id": "00000000-0000-4000-8000-000000000001",
                                         "reference_dataset_id": None}  # fmt: skip
    sink = open_trace_sink("langsmith", with_project, secret=LS_KEY)
    scores = [
        TraceScore("sc-1", trace_id, span_id, "p", "watch-1", "run-w", "judge", "judge",
                   "scored", 1.0, None, "grounded", 1_700_000_000.0, passed=True),
        TraceScore("sc-2", trace_id, span_id, "p", "watch-1", "run-w", "judge", "relevance",
                   "scored", 0.4, None, "", 1_700_000_000.0),
        TraceScore("sc-3", trace_id, span_id, "p", "watch-1", "run-w", "x", "x",
                   "skipped", None, None, "no answer", 1_700_000_000.0),
    ]  # fmt: skip
    try:
        assert sink.send(scores).remote == {"feedback": "2", "already_there": "0", "skipped": "1"}
        held = list(langsmith.state.feedback.values())
        assert {f["run_id"] for f in held} == {run}
        assert {(f["key"], f["score"]) for f in held} == {("judge", 1), ("judge/relevance", 0.4)}
        assert sink.send(scores).remote["already_there"] == "2"  # a retried batch
        assert len(langsmith.state.feedback) == 2
    finally:
        sink.close()
