"""kill -9 in the middle of an agent run, then ``--resume``: no task counted twice, and no tool
side effect replayed for a task that was complete.

The real CLI runs in a subprocess (its own process group, so SIGKILL reaches all of it) against
the scripted stub model on loopback. Every task calls one function tool
(``tests/support/agent_ledger.py``) that appends ``<sample>/<nonce>`` to a ledger file and then
holds for a moment; its result names the nonce, so each stored trajectory says which ledger line
its task wrote. The test kills the run as soon as enough lines are there (a call is then in
flight), reads what the store holds, resumes, and checks the ledger against the store.

A task interrupted mid-flight is redone from scratch: its tool ran once before the kill and
runs again on resume, so its sample has an extra ledger line whose nonce no stored task names.
That is expected (the harness cannot undo what a killed process did); what must not happen is a
task recorded complete before the kill running its tool again.

Deadlines only stop a hung test; nothing asserts how long anything took.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support.agent_ledger import LEDGER_ENV
from tests.support.stub_llm import StubLLM

REPO = Path(__file__).resolve().parents[2]
SAMPLES = 12
TRIALS = 2
TASKS = SAMPLES * TRIALS
KILL_AT = 7  # ledger lines seen before the kill: some tasks done, most not started
DEADLINE_S = 90.0

SPEC = """\
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: agent-resume}}
spec:
  target:
    agent:
      model: {{connector: openai-compatible, baseUrl: "{url}", model: stub}}
      maxSteps: 4
  environment:
    tools:
      - function: "tests.support.agent_ledger:record"
        declare: {{permission: write}}
  dataset: {{path: tasks.jsonl}}
  trials: {trials}
  seed: 11
  maxConcurrency: 2
  evaluators:
    - ref: exact-match
"""


def _sample(i: int) -> str:
    return f"s{i:02d}"


def _write_tasks(path: Path) -> None:
    # Every third sample's reference is not what the agent answers: the figures mix passes
    # and failures, so equal figures after resume mean something.
    rows = [
        {"id": _sample(i), "input": f"task {_sample(i)}", "reference": "no" if i % 3 else "done"}
        for i in range(SAMPLES)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _script() -> dict[str, Any]:
    """The model calls ``record`` once with the task's sample, then answers ``done`` (the
    stub's default for any text it has no entry for, such as the tool's result)."""
    return {
        "tool_calls": {
            f"task {_sample(i)}": [{"name": "record", "arguments": {"sample": _sample(i)}}]
            for i in range(SAMPLES)
        },
        "default": "done",
    }


def _env(ledger: Path) -> dict[str, str]:
    path = os.pathsep.join([str(REPO / "src"), str(REPO)])  # this tree's evalsi, the tool module
    return {**os.environ, "PYTHONPATH": path, LEDGER_ENV: str(ledger)}


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "evalsi", *args]


def _evalsi(cwd: Path, ledger: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _cli(*args),
        cwd=cwd,
        env=_env(ledger),
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
    )


def _show(cwd: Path, db: Path, run: str) -> dict[str, Any]:
    """``runs show RUN --tasks`` as JSON: the run and every task the store holds."""
    shown = _evalsi(
        cwd, cwd / "no.ledger", "runs", "show", run, "--store", str(db), "--tasks",
        "--limit", "1000", "--format", "json",
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    data: dict[str, Any] = json.loads(shown.stdout)
    return data


def _lines(ledger: Path) -> list[str]:
    return ledger.read_text().splitlines() if ledger.exists() else []


def _complete(task: dict[str, Any]) -> bool:
    return task["status"] == "ok" and all(s["outcome"] == "scored" for s in task["scores"])


def _nonce(task: dict[str, Any]) -> str:
    """The ledger line the task's one tool call wrote, read back from its trajectory."""
    calls = [s for s in task["trajectory"]["steps"] if s["type"] == "tool_call"]
    assert len(calls) == 1, calls
    _, sample, nonce = calls[0]["result"].split()
    assert sample == task["sample_id"]
    return f"{sample}/{nonce}"


def _by_task(tasks: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    keys = Counter((t["sample_id"], t["trial"]) for t in tasks)
    assert all(n == 1 for n in keys.values()), f"a task stored twice: {keys.most_common(3)}"
    return {(t["sample_id"], t["trial"]): t for t in tasks}


def _verdicts(tasks: dict[tuple[str, int], dict[str, Any]]) -> dict[tuple[str, int], Any]:
    return {k: t["scores"][0]["scores"]["exact-match"] for k, t in tasks.items()}


def _kill_mid_run(cwd: Path, db: Path, ledger: Path) -> None:
    proc = subprocess.Popen(
        _cli("run", "-f", "run.yaml", "--store", str(db), "-q"),
        cwd=cwd,
        env=_env(ledger),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: the kill reaches every child too
    )
    assert proc.stderr is not None
    try:
        deadline = time.monotonic() + DEADLINE_S
        while len(_lines(ledger)) < KILL_AT:
            if proc.poll() is not None:
                pytest.fail(
                    f"evalsi exited ({proc.returncode}) before the kill: {proc.stderr.read()}"
                )
            if time.monotonic() > deadline:
                pytest.fail(f"only {len(_lines(ledger))} tool calls after {DEADLINE_S} s")
            time.sleep(0.01)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
        proc.stderr.close()


def test_kill_9_then_resume_redoes_only_unfinished_agent_tasks(tmp_path: Path) -> None:
    _write_tasks(tmp_path / "tasks.jsonl")
    db, ledger = tmp_path / "killed.db", tmp_path / "killed.ledger"
    clean_db, clean_ledger = tmp_path / "clean.db", tmp_path / "clean.ledger"
    with StubLLM(**_script()) as stub:
        (tmp_path / "run.yaml").write_text(SPEC.format(url=stub.openai_url, trials=TRIALS))
        clean = subprocess.Popen(  # the same spec uninterrupted, meanwhile (it mostly waits)
            _cli("run", "-f", "run.yaml", "--store", str(clean_db), "-q", "--format", "json"),
            cwd=tmp_path,
            env=_env(clean_ledger),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            _kill_mid_run(tmp_path, db, ledger)
            before_kill = _lines(ledger)
            killed = _show(tmp_path, db, "latest")
            resume = _evalsi(
                tmp_path, ledger, "run", "-f", "run.yaml", "--resume", killed["run_id"],
                "--store", str(db), "-q", "--format", "json",
            )  # fmt: skip
            out, err = clean.communicate(timeout=DEADLINE_S)
        finally:
            if clean.poll() is None:
                clean.kill()
                clean.communicate()
    assert clean.returncode == 0, err
    uninterrupted = json.loads(out)

    assert killed["status"] == "interrupted"  # its pid is gone
    done = {k: _nonce(t) for k, t in _by_task(killed["tasks"]).items() if _complete(t)}
    assert 1 <= len(done) < TASKS, "the run must be killed part way"

    # The run ends completed, with exactly one graded task per (sample, trial).
    assert resume.returncode == 0, resume.stderr
    resumed = json.loads(resume.stdout)
    final = _show(tmp_path, db, killed["run_id"])
    assert resumed["run_id"] == killed["run_id"]
    assert resumed["status"] == final["status"] == "done"
    tasks = _by_task(final["tasks"])
    assert sorted(tasks) == [(_sample(i), t) for i in range(SAMPLES) for t in range(TRIALS)]
    assert all(_complete(t) for t in tasks.values())
    assert [(m["n"], m["scored"]) for m in resumed["metrics"]] == [(TASKS, TASKS)]

    # Each stored task's side effect is in the ledger exactly once, and a task complete before
    # the kill is the same task after it (its tool did not run again).
    nonces = {k: _nonce(t) for k, t in tasks.items()}
    after = Counter(_lines(ledger))
    assert all(after[n] == 1 for n in nonces.values()), after
    assert {k: nonces[k] for k in done} == done
    assert set(done.values()) <= set(before_kill)

    # The resume called the tool once for each task not complete before the kill, and for
    # nothing else. The lines no stored task names were written before the kill by the tasks it
    # interrupted: those are redone from scratch on resume, so their side effect shows twice.
    redone = _lines(ledger)[len(before_kill) :]
    assert sorted(redone) == sorted(n for k, n in nonces.items() if k not in done)
    orphans = set(after) - set(nonces.values())
    assert orphans, "the kill was meant to land while a tool call was in flight"
    assert orphans <= set(before_kill)
    unfinished = {sample for sample, trial in tasks if (sample, trial) not in done}
    assert {line.split("/")[0] for line in orphans} <= unfinished
    assert sum(after.values()) == TASKS + len(orphans)

    # The same figures and verdicts as the same spec run without a kill.
    assert resumed["metrics"] == uninterrupted["metrics"]
    assert resumed["metrics"][0]["pass_hat_k"] == {"1": 1 / 3, "2": 1 / 3}
    clean_tasks = _by_task(_show(tmp_path, clean_db, "latest")["tasks"])
    assert _verdicts(tasks) == _verdicts(clean_tasks)
    assert len(_lines(clean_ledger)) == TASKS
