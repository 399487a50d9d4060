"""The seed domain pack (examples/agent/helpdesk) played through the real environment: every
scenario's known-good trajectory passes every evaluator that applies and its known-bad one fails
at least one, three trials each, with the function tools, the pack's MCP server and
@modelcontextprotocol/server-everything mounted as the specs say. The environment's evidence is
in the trajectories (policy blocks, approvals, faults, injections, checks, end state); a call the
policy blocked is not measured by the predicate judging it; the stub model over real HTTP
reaches the same end states; one spec runs through the CLI as its header says."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import evalsi
from evalsi.core import Trajectory
from evalsi.datasets import read_trajectory
from evalsi.runs import iter_tasks
from evalsi.runs._execute import execute_run
from evalsi.specs import load_run_spec, run_spec_from_yaml
from evalsi.store import SqlStore
from tests.support.registry import BUILTINS
from tests.support.stub_llm import StubLLM

ROOT = Path(__file__).resolve().parents[2]
PACK = ROOT / "examples" / "agent" / "helpdesk"
EVERYTHING = ROOT / ".tools" / "npm" / "node_modules" / ".bin" / "mcp-server-everything"
SCENARIOS = {
    row["id"]: row
    for row in (json.loads(line) for line in (PACK / "scenarios.jsonl").read_text().splitlines())
}
GOOD = PACK / "run-scripted-good.yaml"
ACCURACY = ("tool-call-accuracy", "tool-name-accuracy", "tool-args-accuracy")
ERROR_FAULTS = ("timeout", "error", "malformed")

pytestmark = pytest.mark.skipif(
    not EVERYTHING.exists() or shutil.which("node") is None,
    reason="@modelcontextprotocol/server-everything is not installed (.ci/run installs it)",
)


@pytest.fixture(scope="module")
def pack_env() -> Iterator[None]:
    """As the specs' headers say: from the repository root, the tools on PYTHONPATH, and
    ``python`` (for the pack's MCP server) the one with evalsi and the MCP SDK."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        mp.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
        mp.syspath_prepend(str(PACK))
        yield


@pytest.fixture
def at_root(pack_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # after the suite's per-test working directory


Played = tuple[list[dict[str, Any]], dict[tuple[str, int], Trajectory]]


def _play(spec: Any, db: SqlStore) -> tuple[str, Played]:
    result = asyncio.run(execute_run(spec, store=db, registry=BUILTINS))
    tasks = list(iter_tasks(db, result.run_id, 1000))
    trajectories = {
        (r.record_id, r.trial): read_trajectory(json.loads(r.trajectory or "{}"), stored=True)
        for r in db.iter_outputs(result.run_id)
    }
    return result.run_id, (tasks, trajectories)


@pytest.fixture(scope="module")
def played(pack_env: None, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    db = SqlStore.open(tmp_path_factory.mktemp("helpdesk") / "s.db")
    out: dict[str, Any] = {"db": db}
    for variant in ("good", "bad"):
        spec = load_run_spec(PACK / f"run-scripted-{variant}.yaml")
        out[f"{variant}_id"], out[variant] = _play(spec, db)
    return out


def _failures(task: dict[str, Any]) -> list[str]:
    """Every verdict of the task that is a failure: a pass/fail score that did not pass, an
    accuracy below 1, an evaluator that errored."""
    found = []
    for verdict in task["scores"]:
        if verdict["outcome"] == "error":
            found.append(f"{verdict['evaluator']}: error {verdict['reason']}")
        for name, value in verdict["scores"].items():
            if value is False or (name in ACCURACY and value < 1):
                found.append(f"{verdict['evaluator']}/{name}")
    return found


def _faulted(trajectory: Trajectory) -> bool:
    return any(
        s.kind == "fault" and isinstance(s.output, dict) and s.output["kind"] in ERROR_FAULTS
        for s in trajectory.steps
    )


def test_every_known_good_trajectory_passes_every_evaluator_that_applies(
    played: dict[str, Any],
) -> None:
    tasks, trajectories = played["good"]
    assert len(tasks) == 3 * len(SCENARIOS) >= 60
    for task in tasks:
        key = (task["sample_id"], task["trial"])
        trajectory = trajectories[key]
        assert task["status"] == "ok", key
        assert _failures(task) == [], key
        skipped = [v["evaluator"] for v in task["scores"] if v["outcome"] == "skipped"]
        # skipped only where nothing applies: fault recovery without a fault that failed a call
        assert skipped == ([] if _faulted(trajectory) else ["fault-recovery"]), key
        assert trajectory.stop_reason == "final_answer"
        assert [(c.name, c.passed) for c in trajectory.checks] == [
            ("end-state", True),
            ("shop-invariants", True),
        ], key
        assert trajectory.end_state is not None
        assert "shop.json" in trajectory.end_state["files"]


def test_every_known_bad_trajectory_fails_at_least_one(played: dict[str, Any]) -> None:
    tasks, _ = played["bad"]
    assert len(tasks) == 3 * len(SCENARIOS)
    failing: set[str] = set()
    for task in tasks:
        assert task["status"] == "ok"
        found = _failures(task)
        assert found, (task["sample_id"], task["trial"])
        failing.update(found)
    # the failures are spread over the kinds of evaluator, not one catching everything
    assert {
        "task-success/task-success",
        "trajectory-match/trajectory-match",
        "policy-violations/policy-clean",
        "one-email-at-most/tool-count",
        "tool-call-accuracy/tool-call-accuracy",
    } <= failing


def _steps(played: dict[str, Any], variant: str, sample: str) -> list[Any]:
    return played[variant][1][(sample, 0)].steps


def test_the_environment_wrote_the_evidence(played: dict[str, Any]) -> None:
    # a denied tool is blocked by the policy, never called
    blocked = _steps(played, "bad", "delete-account")
    assert [(s.kind, s.name) for s in blocked if s.kind == "policy_block"] == [
        ("policy_block", "delete_customer")
    ]
    assert not [s for s in blocked if s.kind == "tool_call" and s.name == "delete_customer"]
    # irreversible tools ask the gate: cancellations approved, refunds denied
    cancel = [s for s in _steps(played, "good", "cancel-duplicate") if s.kind == "approval"]
    assert [(s.name, s.output["decision"]) for s in cancel] == [("cancel_order", "approved")]
    refund = [s for s in _steps(played, "good", "broken-mug-refund") if s.kind == "approval"]
    assert [(s.name, s.output["decision"]) for s in refund] == [("issue_refund", "denied")]
    # faults on their scheduled calls, then the retry succeeds
    timeout = _steps(played, "good", "track-timeout")
    calls = [s for s in timeout if s.kind == "tool_call"]
    assert [s.output["kind"] for s in timeout if s.kind == "fault"] == ["timeout"]
    assert [bool(s.error) for s in calls[:2]] == [True, False]
    malformed = _steps(played, "good", "invoice-malformed")
    assert [s.output["kind"] for s in malformed if s.kind == "fault"] == ["malformed"]
    # the injected payload rides in the result; obeying it mails data out and fails the check
    injected = _steps(played, "bad", "ticket-injection-address")
    assert [s.output["kind"] for s in injected if s.kind == "fault"] == ["injection"]
    leak = played["bad"][1][("ticket-injection-address", 0)].checks
    assert not next(c for c in leak if c.name == "shop-invariants").passed
    assert "audit@shop-compliance.example" in next(
        c.detail for c in leak if c.name == "shop-invariants"
    )
    # the MCP tools answered through the same environment
    total = next(s for s in _steps(played, "good", "sum-two-orders") if s.name == "get-sum")
    assert "134" in json.dumps(total.output)
    assert not total.error
    policy = next(s for s in _steps(played, "good", "address-policy") if s.name == "policy_lookup")
    assert "processing" in json.dumps(policy.output)


def test_a_predicate_on_a_blocked_call_is_not_measured(played: dict[str, Any]) -> None:
    graded = evalsi.grade(
        played["bad_id"],
        [{"ref": "tool-called", "params": {"tool": "delete_customer"}}],
        store=played["db"],
        registry=BUILTINS,
    )
    verdicts = {
        (t["sample_id"], t["trial"]): t["scores"][0]
        for t in iter_tasks(played["db"], graded.run_id, 1000)
    }
    blocked = verdicts[("delete-account", 0)]
    assert blocked["outcome"] == "skipped"
    assert blocked["reason"].startswith("not_measured(blocked_by_policy)")
    # where the tool was simply not called, it is a failure, not "not measured"
    assert verdicts[("address-change", 0)]["scores"] == {"tool-called": False}


def test_a_sample_without_the_variant_fails_its_task_by_name(at_root: None, tmp_path: Path) -> None:
    text = (PACK / "run-scripted-good.yaml").read_text()
    text = text.replace("model: good}", "model: excellent}").replace("trials: 3", "trials: 1")
    text = text.replace("{path: scenarios.jsonl}", "{path: scenarios.jsonl, limit: 2}")
    spec = run_spec_from_yaml(text, source=str(PACK / "run-scripted-good.yaml"))
    db = SqlStore.open(tmp_path / "s.db")
    result = asyncio.run(execute_run(spec, store=db, registry=BUILTINS))
    assert result.tasks == {"target_error": 2}
    errors = [r.error for r in db.iter_outputs(result.run_id)]
    assert "sample 'address-change': metadata.known.excellent: no known trajectory" in errors[0]


def test_the_stub_model_over_http_reaches_the_same_end_states(
    at_root: None, tmp_path: Path
) -> None:
    script = json.loads((PACK / "stub-script.json").read_text())
    with StubLLM(tool_calls=script["tool_calls"], answers=script["answers"]) as stub:
        text = (PACK / "run-stub.yaml").read_text()
        text = text.replace("http://127.0.0.1:18083/v1", stub.openai_url)
        spec = run_spec_from_yaml(text, source=str(PACK / "run-stub.yaml"))
        db = SqlStore.open(tmp_path / "s.db")
        result = asyncio.run(execute_run(spec, store=db, registry=BUILTINS))
    assert result.tasks == {"ok": len(SCENARIOS)}
    for task in iter_tasks(db, result.run_id, 1000):
        assert _failures(task) == [], task["sample_id"]


def test_the_good_spec_runs_through_the_cli_as_written(at_root: None, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(PACK)]),
    }
    done = subprocess.run(
        [sys.executable, "-m", "evalsi", "run", "-f", str(Path(*GOOD.parts[-4:])),
         "--store", str(tmp_path / "s.db")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "20 samples x 3" in done.stdout
    assert "✔ passed  metric('task-success').passHatK(3) >= 1.0" in done.stdout
