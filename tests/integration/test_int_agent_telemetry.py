"""An agent run's steps as OTLP spans, received by evalsi's own OTLP/HTTP receiver on loopback:
one trace per task, a span per step under the task's, tagged with the run, the trial and the
sample; and the Watch side, reading those traces back into records, computes the agent
metrics the run computed. An unreachable endpoint costs a warning, never the run."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest
from starlette.applications import Starlette

from evalsi._api import evaluate
from evalsi.core import Content, Record, Span, SpecError, Trace
from evalsi.datasets import read_trajectory
from evalsi.runs import iter_tasks
from evalsi.runs._execute import execute_run
from evalsi.server._state import ServerConfig
from evalsi.server.otlp._receivers import otlp_mounts
from evalsi.sinks import OtlpSpanExporter
from evalsi.specs import run_spec_from_yaml
from evalsi.store import SqlStore
from evalsi.traces._records import trace_to_record
from tests.support.asgi_server import AsgiServer
from tests.support.otlp_fixtures import RecordingSink
from tests.support.registry import BUILTINS
from tests.support.stub_llm import StubLLM


def balance(account: str) -> int:
    """An account's balance."""
    return {"alice": 120}.get(account, 0)


def transfer(source: str, target: str, amount: int) -> str:
    """Move money."""
    return f"moved {amount}"


def wipe() -> str:
    """Delete every account."""
    return "wiped"


ALICE = {"name": "balance", "arguments": {"account": "alice"}}
SCRIPT: dict[str, Any] = {
    "tool_calls": {
        # balance fails (a fault), transfer asks the approval gate (denied), wipe is blocked
        "pay bob 5": [
            ALICE,
            {"name": "transfer", "arguments": {"source": "alice", "target": "bob", "amount": 5}},
            {"name": "wipe", "arguments": {}},
        ],
        "what does alice have?": [ALICE],
        "error: blocked by policy: the policy denies wipe": [ALICE],
        "error: balance failed": [ALICE],
    },
    "answers": {"120": "Alice has 120."},
}
HARNESS = ("approval", "fault", "policy_block", "sandbox_denial")
REFERENCE = {"tool_calls": [ALICE]}
EVALUATORS = [
    "tool-call-accuracy",
    "policy-violations",
    "approval-requests",
    "fault-recovery",
    "step-efficiency",
]


def _spec(tmp_path: Path, url: str, endpoint: str, extra: str = "") -> str:
    rows = [
        {"id": "pay", "input": "pay bob 5", "reference": REFERENCE},
        {"id": "ask", "input": "what does alice have?", "reference": REFERENCE},
    ]
    (tmp_path / "tasks.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    evaluators = "\n".join(f"    - ref: {e}" for e in EVALUATORS)
    return f"""
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: bank-agent}}
spec:
  trials: 2
  target:
    agent:
      model: {{connector: openai-compatible, baseUrl: "{url}", model: stub}}
      maxSteps: 5
  environment:
    tools:
      - function: "{__name__}:balance"
      - function: "{__name__}:transfer"
        declare: {{permission: irreversible, reversible: false, exposure: external}}
      - function: "{__name__}:wipe"
    policy: {{deny: [wipe], allow: [transfer]}}
    faults:
      - {{tool: balance, kind: error, call: 1}}
  dataset: {{path: tasks.jsonl}}
  evaluators:
{evaluators}
  telemetry:
    otlp: {{endpoint: "{endpoint}"{extra}}}
"""


def _run(tmp_path: Path, text: str) -> tuple[Any, SqlStore]:
    spec = run_spec_from_yaml(text, base_dir=tmp_path)
    db = SqlStore.open(tmp_path / "s.db")
    result = asyncio.run(
        execute_run(spec, store=db, registry=BUILTINS, span_exporter=OtlpSpanExporter)
    )
    return result, db


def _traces(spans: list[Span]) -> list[Trace]:
    by_trace: dict[str, list[Span]] = defaultdict(list)
    for s in spans:
        by_trace[s.trace_id].append(s)
    return [Trace(tid, spans=group) for tid, group in by_trace.items()]


def _scores(tasks: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    return {
        (t["sample_id"], t["trial"]): {
            v["evaluator"]: (v["outcome"], v["scores"]) for v in t["scores"]
        }
        for t in tasks
    }


def test_the_watch_side_rebuilds_the_run_from_its_spans(tmp_path: Path) -> None:
    sink = RecordingSink()
    with (
        StubLLM(**SCRIPT) as stub,
        AsgiServer(Starlette(routes=otlp_mounts(sink, ServerConfig()))) as collector,
    ):
        result, db = _run(tmp_path, _spec(tmp_path, stub.openai_url, collector.url))
        spans = list(sink.spans)
    assert result.tasks == {"ok": 4}
    assert not [w for w in result.warnings if w.get("kind") == "telemetry"]
    tasks = list(iter_tasks(db, result.run_id, 100))
    traces = _traces(spans)
    assert len(traces) == 4  # one per sample x trial

    # Structure: one task span per trace, every other span its child, all tagged.
    by_task: dict[tuple[str, int], Trace] = {}
    for trace in traces:
        roots = [s for s in trace.spans if not s.parent_span_id]
        assert len(roots) == 1
        root = roots[0]
        assert root.name == "invoke_agent bank-agent"
        assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
        for s in trace.spans:
            assert s.attributes["evalsi.run_id"] == result.run_id
            assert s is root or s.parent_span_id == root.span_id
            assert root.start_time_unix_nano <= s.start_time_unix_nano
            assert s.start_time_unix_nano <= s.end_time_unix_nano <= root.end_time_unix_nano
        key = (str(root.attributes["evalsi.task_id"]), int(root.attributes["evalsi.trial"]))  # type: ignore[arg-type]
        by_task[key] = trace
    assert sorted(by_task) == [("ask", 0), ("ask", 1), ("pay", 0), ("pay", 1)]

    # The spans hold the recorded steps: kinds, names, times, in the trajectory's order; and
    # the trajectory the Watch side reads back is the stored one, step for step.
    for row in db.iter_outputs(result.run_id):
        trace = by_task[(row.record_id, row.trial)]
        stored = read_trajectory(orjson.loads(row.trajectory or "null"), stored=True)
        steps = sorted(
            (s for s in trace.spans if s.parent_span_id),
            key=lambda s: s.attributes["evalsi.step.index"],  # type: ignore[arg-type,return-value]
        )
        assert len(steps) == len(stored.steps)
        for span, step in zip(steps, stored.steps, strict=True):
            assert span.attributes["evalsi.step.kind"] == step.kind
            assert span.start_time_unix_nano == step.start_time_unix_nano > 0
            assert span.end_time_unix_nano == step.end_time_unix_nano >= step.start_time_unix_nano
        rebuilt = trace_to_record(trace).trajectory
        assert rebuilt is not None
        assert rebuilt.stop_reason == stored.stop_reason == "final_answer"
        assert [(s.kind, s.name, s.error) for s in rebuilt.steps] == [
            (s.kind, s.name, s.error) for s in stored.steps
        ]
        assert [s.tool_call for s in rebuilt.steps] == [s.tool_call for s in stored.steps]
        assert [s.usage for s in rebuilt.steps if s.kind == "llm_call"] == [
            dataclasses.replace(s.usage, cost_usd=None, latency_ms=None)  # the span times it
            for s in stored.steps
            if s.kind == "llm_call" and s.usage is not None
        ]
        harness = [(s.kind, s.input, s.output) for s in stored.steps if s.kind in HARNESS]
        assert [(s.kind, s.input, s.output) for s in rebuilt.steps if s.kind in HARNESS] == harness
    pay = sorted(
        (s for s in by_task[("pay", 0)].spans if s.parent_span_id),
        key=lambda s: s.attributes["evalsi.step.index"],  # type: ignore[arg-type,return-value]
    )
    assert [s.name for s in pay] == [
        "chat stub",
        "fault balance",
        "execute_tool balance",
        "approval transfer",
        "policy_block wipe",
        "chat stub",
        "execute_tool balance",
        "chat stub",
    ]
    assert pay[0].attributes["gen_ai.usage.input_tokens"] > 0  # type: ignore[operator]
    assert pay[2].status_message == "balance failed"
    assert pay[3].attributes["evalsi.step.output"] == '{"decision":"denied","by":"policy"}'
    assert pay[6].attributes["gen_ai.tool.call.arguments"] == '{"account":"alice"}'
    assert pay[6].attributes["gen_ai.tool.call.result"] == 120

    # The key check: the agent metrics of the records rebuilt from the traces equal the run's.
    records: list[Record] = []
    for (sample, trial), trace in by_task.items():
        rebuilt = trace_to_record(trace)
        assert rebuilt.trajectory is not None
        assert rebuilt.trajectory.stop_reason == "final_answer"
        records.append(
            dataclasses.replace(
                rebuilt, id=f"{sample}#{trial}", reference=Content.from_value(REFERENCE)
            )
        )
    watched = evaluate(records, EVALUATORS, store=str(tmp_path / "w.db"), registry=BUILTINS)
    wdb = SqlStore.open(tmp_path / "w.db")
    seen = {
        (t["sample_id"].split("#")[0], int(t["sample_id"].split("#")[1])): {
            v["evaluator"]: (v["outcome"], v["scores"]) for v in t["scores"]
        }
        for t in iter_tasks(wdb, watched.run_id, 100)
    }
    wdb.close()
    own = _scores(tasks)
    assert set(seen) == set(own)
    for key, metrics in own.items():
        got = seen[key]
        assert set(got) == set(metrics) == set(EVALUATORS)
        for name, (outcome, scores) in metrics.items():
            assert got[name][0] == outcome, (key, name)
            for metric, value in scores.items():
                if metric == "agent-latency-ms":
                    # the run's latency is its loop's clock; the trace's spans the invocation
                    assert got[name][1][metric] == pytest.approx(value, abs=50)
                else:
                    assert got[name][1][metric] == value, (key, name, metric)
    # what the metrics saw is real: a block, a denied approval and a recovered fault
    assert own[("pay", 0)]["policy-violations"][1]["policy-violations"] == 1
    assert own[("pay", 0)]["approval-requests"][1]["approvals-denied"] == 1
    assert own[("pay", 0)]["fault-recovery"][1]["fault-recovery"] == 1


def test_an_unreachable_endpoint_is_a_warning_and_the_run_succeeds(tmp_path: Path) -> None:
    with StubLLM(**SCRIPT) as stub:
        result, _ = _run(
            tmp_path,
            _spec(tmp_path, stub.openai_url, "http://127.0.0.1:9", ", timeoutSeconds: 1"),
        )
    assert result.tasks == {"ok": 4}
    assert result.status == "done"
    (warning,) = [w for w in result.warnings if w.get("kind") == "telemetry"]
    assert "could not be exported to http://127.0.0.1:9" in warning["message"]


def test_a_bad_endpoint_names_the_field(tmp_path: Path) -> None:
    text = _spec(tmp_path, "http://127.0.0.1:1/v1", "collector:4318")
    with pytest.raises(SpecError, match=r"spec\.telemetry\.otlp\.endpoint: expected an http"):
        run_spec_from_yaml(text, base_dir=tmp_path)
    bad = _spec(tmp_path, "http://127.0.0.1:1/v1", "http://c:4318", ", protocol: thrift")
    with pytest.raises(SpecError, match=r"spec\.telemetry\.otlp\.protocol"):
        run_spec_from_yaml(bad, base_dir=tmp_path)


def test_a_spec_with_telemetry_and_no_exporter_is_refused(tmp_path: Path) -> None:
    spec = run_spec_from_yaml(
        _spec(tmp_path, "http://127.0.0.1:1/v1", "http://127.0.0.1:9"), base_dir=tmp_path
    )
    with pytest.raises(Exception, match=r"spec\.telemetry: this caller cannot export spans"):
        asyncio.run(execute_run(spec, store=str(tmp_path / "s.db"), registry=BUILTINS))
