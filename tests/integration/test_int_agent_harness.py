"""The harness protocol end to end: a harness as a Python class in evalsi's process, the same
harness as a separate process over gRPC (started by evalsi on a unix socket, or already serving
on a loopback port), per-task workspaces with fixtures (the spec's, overlaid by each sample's),
checkers and the end-state snapshot; a harness that fails loses only its task to
infrastructure; a bad harness stops the run before the first task."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from evalsi.core import SpecError, UserError
from evalsi.runs._execute import execute_run
from evalsi.specs import run_spec_from_yaml
from evalsi.store import SqlStore
from evalsi.wire import remote_harness
from tests.support.registry import BUILTINS

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "tests" / "support" / "notes_harness.py"
PY_HARNESS = "tests.support.notes_harness:NotesHarness"
PATHS = f"{ROOT / 'src'}:{ROOT}"
COMMAND = (
    f'{{command: {{argv: ["{sys.executable}", "{HARNESS}"], env: {{PYTHONPATH: "{PATHS}"}}}}}}'
)
FAILING = COMMAND.replace(f'"{HARNESS}"]', f'"{HARNESS}", "--fail"]')
ROWS = [
    {"id": "a", "input": "first note", "reference": "FIRST NOTE"},
    {
        "id": "b",
        "input": "second note",
        "reference": ">> SECOND NOTE",
        "metadata": {"fixtures": {"files": {"prefix.txt": ">> ", "cfg/b.json": {"k": 1}}}},
    },
]


def _spec(
    tmp_path: Path, harness: str, *, rows: list[dict[str, Any]] = ROWS, extra: str = ""
) -> str:
    (tmp_path / "tasks.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return f"""
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: notes}}
spec:
  target:
    agent:
      harness: {harness}
      maxDuration: 20s
  environment:
    sandbox: {{minIsolation: none}}
    fixtures: {{files: {{"README.md": "notes go in notes/"}}}}
    checkers:
      - jsonFile: {{path: cfg/b.json, expect: {{k: 1}}}}
        name: b-config
      - python: "tests.support.notes_harness:read_note"{extra}
  dataset: {{path: tasks.jsonl}}
  evaluators:
    - ref: exact-match
"""


def _run(tmp_path: Path, text: str) -> tuple[Any, SqlStore]:
    spec = run_spec_from_yaml(text, base_dir=tmp_path)
    db = SqlStore.open(tmp_path / "s.db")
    result = asyncio.run(
        execute_run(spec, store=db, registry=BUILTINS, remote_harness=remote_harness)
    )
    return result, db


def _tasks(db: SqlStore, run_id: str) -> dict[str, dict[str, Any]]:
    from evalsi.runs import iter_tasks

    return {t["sample_id"]: t for t in iter_tasks(db, run_id, 100)}


def _stored(db: SqlStore, run_id: str) -> dict[str, Any]:
    """Each sample's stored trajectory in its full JSON form (checks, end state)."""
    from evalsi.datasets import read_trajectory

    out = {}
    for row in db.iter_outputs(run_id):
        if row.trajectory is not None:
            out[row.record_id] = read_trajectory(json.loads(row.trajectory), stored=True)
    return out


def _check_notes_run(result: Any, db: SqlStore) -> None:
    assert result.tasks == {"ok": 2}
    tasks = _tasks(db, result.run_id)
    assert tasks["a"]["output"] == "FIRST NOTE"
    assert tasks["b"]["output"] == ">> SECOND NOTE"  # the sample's fixture reached the harness
    steps = tasks["a"]["trajectory"]["steps"]
    assert [s["type"] for s in steps] == ["tool_call"]
    assert steps[0]["tool"] == "file_note"
    assert steps[0]["arguments"] == {"text": "first note"}
    assert tasks["a"]["trajectory"]["stop_reason"] == "final_answer"
    stored = _stored(db, result.run_id)
    a, b = stored["a"], stored["b"]
    # the harness's own Check, then the spec's checkers in order
    assert [(c.name, c.passed) for c in a.checks] == [
        ("note-filed", True),
        ("b-config", False),  # a has no cfg/b.json: only b's fixtures carry it
        ("tests.support.notes_harness:read_note", True),
    ]
    assert "cfg/b.json: cannot read" in a.checks[1].detail
    assert [c.passed for c in b.checks] == [True, True, True]
    # the end state: the workspace as the agent left it, and the harness's snapshot
    files = b.end_state["files"]
    assert files["README.md"]["text"] == "notes go in notes/"
    assert files["cfg/b.json"]["json"] == {"k": 1}
    assert files["notes/b.txt"]["text"] == "second note"
    assert len(files["notes/b.txt"]["sha256"]) == 64
    assert "notes/a.txt" not in files  # each task had a workspace of its own
    assert b.end_state["harness"] == {"notes": ["b.txt"]}
    scores = {t["sample_id"]: t["scores"] for t in tasks.values()}
    assert all(v[0]["scores"] == {"exact-match": True} for v in scores.values()), scores


def test_a_python_class_harness_runs_each_task_in_its_own_workspace(tmp_path: Path) -> None:
    result, db = _run(tmp_path, _spec(tmp_path, f'{{python: "{PY_HARNESS}"}}'))
    _check_notes_run(result, db)


def test_the_same_harness_in_another_process_started_by_evalsi(tmp_path: Path) -> None:
    result, db = _run(tmp_path, _spec(tmp_path, COMMAND))
    _check_notes_run(result, db)
    info = db.get_run(result.run_id)
    assert "notes_harness.py" in json.dumps(info.spec)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_harness_already_serving_on_a_loopback_port(tmp_path: Path) -> None:
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"}
    process = subprocess.Popen(
        [sys.executable, str(HARNESS), "--listen", f"127.0.0.1:{port}"], env=env
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        result, db = _run(tmp_path, _spec(tmp_path, f'{{grpc: "127.0.0.1:{port}"}}'))
        _check_notes_run(result, db)
    finally:
        process.kill()
        process.wait()


@pytest.mark.parametrize("where", ["python", "process"])
def test_a_failing_harness_loses_only_that_task_to_infrastructure(
    tmp_path: Path, where: str
) -> None:
    rows = [
        {"id": "ok", "input": "fine", "reference": "FINE"},
        {"id": "crash", "input": "crash now", "reference": "-"},
        {"id": "mute", "input": "mute now", "reference": "-"},
    ]
    harness = f'{{python: "{PY_HARNESS}"}}' if where == "python" else COMMAND
    result, db = _run(tmp_path, _spec(tmp_path, harness, rows=rows))
    assert result.tasks == {"ok": 1, "infra_error": 2}
    errors = {row.record_id: row for row in db.iter_outputs(result.run_id) if row.status != "ok"}
    assert set(errors) == {"crash", "mute"}
    assert "the notes harness crashed" in (errors["crash"].error or "")
    assert "without a Final" in (errors["mute"].error or "")
    assert all(row.kind == "harness" for row in errors.values())


def test_a_slow_harness_is_stopped_by_the_wall_clock_budget(tmp_path: Path) -> None:
    rows = [{"id": "slow", "input": "slow one", "reference": "-"}]
    text = _spec(tmp_path, f'{{python: "{PY_HARNESS}"}}', rows=rows).replace(
        "maxDuration: 20s", "maxDuration: 1s"
    )
    started = time.monotonic()
    result, db = _run(tmp_path, text)
    assert time.monotonic() - started < 15
    assert result.tasks == {"ok": 1}  # an exhausted budget is the agent's failure, graded
    assert _tasks(db, result.run_id)["slow"]["trajectory"]["stop_reason"] == "timeout"


def test_a_harness_process_that_will_not_start_stops_the_run_before_any_task(
    tmp_path: Path,
) -> None:
    exited = r"harness\.command: the harness process exited \(4\).*--fail"
    with pytest.raises(UserError, match=exited):
        _run(tmp_path, _spec(tmp_path, FAILING))
    with pytest.raises(UserError, match=r"harness\.command\.argv: cannot start"):
        _run(tmp_path, _spec(tmp_path, '{command: {argv: ["/no/such/harness"]}}'))
    text = _spec(tmp_path, f'{{grpc: "unix:{tmp_path}/none.sock"}}')
    with pytest.raises(UserError, match=r"harness\.grpc: no harness answered"):
        _run(tmp_path, text)


def test_bad_harness_specs_are_refused_naming_the_field(tmp_path: Path) -> None:
    def refused(text: str, pattern: str) -> None:
        with pytest.raises((SpecError, UserError), match=pattern):
            _run(tmp_path, text)

    refused(_spec(tmp_path, '{python: "no_such_module:H"}'), r"harness\.python")
    refused(
        _spec(tmp_path, '{python: "json:dumps"}'),
        r"harness\.python: json:dumps\(\) failed|not a harness",
    )
    refused(_spec(tmp_path, '{grpc: "10.0.0.5:50051"}'), r"harness\.grpc: expected unix:/")
    refused(_spec(tmp_path, "{}"), r"harness: set one of python")
    both = _spec(tmp_path, f'{{python: "{PY_HARNESS}"}}').replace(
        "      harness:",
        "      model: {connector: openai-compatible, baseUrl: 'http://127.0.0.1:9/v1', model: m}"
        "\n      harness:",
    )
    refused(both, r"set one of model .* or harness")
    with_tools = _spec(tmp_path, f'{{python: "{PY_HARNESS}"}}').replace(
        "    sandbox: {minIsolation: none}",
        '    sandbox: {minIsolation: none}\n    tools: [{function: "json:dumps"}]',
    )
    refused(with_tools, r"spec\.environment\.tools: a harness brings its own tools")


def test_bad_environment_state_specs_are_refused_naming_the_field(tmp_path: Path) -> None:
    def refused(old: str, new: str, pattern: str) -> None:
        text = _spec(tmp_path, f'{{python: "{PY_HARNESS}"}}').replace(old, new)
        with pytest.raises((SpecError, UserError), match=pattern):
            _run(tmp_path, text)

    refused('"README.md"', '"../escape"', r"fixtures.*relative path")
    refused('"README.md"', '"/etc/x"', r"fixtures.*relative path")
    refused("fixtures: {files:", "fixtures: {other: 1, files:", r"fixtures.*expected \{files")
    refused(
        "jsonFile: {path: cfg/b.json, expect: {k: 1}}",
        "jsonFile: {path: cfg/b.json}",
        r"jsonFile.*one of expect",
    )
    refused("expect: {k: 1}}", "expect: {k: 1}, expectFrom: reference}", r"jsonFile.*one of expect")
    refused("expect: {k: 1}}", "expectFrom: input}", r"expectFrom.*reference or metadata")
    refused(
        '- python: "tests.support.notes_harness:read_note"',
        '- {python: "x:y", exitCode: {command: [true]}}',
        r"checkers\[1\]: set only one of exitCode",
    )
    refused(
        '- python: "tests.support.notes_harness:read_note"',
        '- python: "tests.support.notes_harness:nothing"',
        r"checkers\[1\]\.python",
    )
    refused("minIsolation: none", "minIsolation: vm", r"spec\.environment\.sandbox")


def test_a_samples_bad_fixtures_lose_that_task_only(tmp_path: Path) -> None:
    rows = [
        {"id": "ok", "input": "fine", "reference": "FINE"},
        {"id": "bad", "input": "x", "metadata": {"fixtures": {"files": {"../up": "x"}}}},
    ]
    result, db = _run(tmp_path, _spec(tmp_path, f'{{python: "{PY_HARNESS}"}}', rows=rows))
    assert result.tasks == {"ok": 1, "infra_error": 1}
    bad = next(r for r in db.iter_outputs(result.run_id) if r.record_id == "bad")
    assert "sample 'bad': fixtures:" in (bad.error or "")
