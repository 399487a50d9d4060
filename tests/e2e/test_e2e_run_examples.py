"""The Run examples work as their comments say: the spec loads, runs, gates and exits 0."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_python_target_example_runs(run_evalsi: Callable[..., Any], tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(EXAMPLES)}
    spec = EXAMPLES / "run-python.yaml"
    plan = run_evalsi(tmp_path, "run", "-f", spec, "--dry-run", "--format", "json", env=env)
    assert plan.returncode == 0, plan.stderr
    assert not (tmp_path / ".evalsi").exists()  # a dry run stores nothing
    done = run_evalsi(tmp_path, "run", "-f", spec, "--format", "json", env=env)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["status"] == "done"
    em = next(m for m in out["metrics"] if m["metric"] == "exact-match")
    assert em["n"] == 40  # 20 samples x 2 trials
    assert set(em["pass_at_k"]) == {"1", "2"}
    assert [g["verdict"] for g in out["gates"]] == ["passed"]
    shown = run_evalsi(tmp_path, "runs", "show", out["run_id"], "--format", "json")
    assert shown.returncode == 0, shown.stderr


def test_a_bad_spec_names_file_line_and_field(
    run_evalsi: Callable[..., Any], tmp_path: Path
) -> None:
    spec = tmp_path / "run.yaml"
    text = (EXAMPLES / "run-python.yaml").read_text().replace("maxConcurrency", "maxConcurency")
    spec.write_text(text.replace("path: qa.jsonl", f"path: {EXAMPLES / 'qa.jsonl'}"))
    proc = run_evalsi(tmp_path, "run", "-f", spec)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "run.yaml:" in proc.stderr
    assert "maxConcurency" in proc.stderr
    assert "maxConcurrency" in proc.stderr


def test_custom_evaluator_example_runs_from_anywhere(tmp_path: Path) -> None:
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "custom_evaluator.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "numeric-close" in proc.stdout
    assert not (tmp_path / ".evalsi").exists()  # it uses an in-memory store


def test_the_scripted_agent_example_lists_its_tasks_with_their_steps(
    run_evalsi: Callable[..., Any], tmp_path: Path
) -> None:
    env = {"PYTHONPATH": str(EXAMPLES / "agent")}
    done = run_evalsi(
        tmp_path, "run", "-f", EXAMPLES / "agent" / "run-scripted.yaml", "--format", "json", env=env
    )
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    shown = run_evalsi(
        tmp_path, "runs", "show", run_id, "--tasks", "--limit", "3", "--format", "json"
    )
    assert shown.returncode == 0, shown.stderr
    tasks = json.loads(shown.stdout)["tasks"]
    assert [t["sample_id"] for t in tasks] == ["weather-paris", "book-lisbon", "search-wrong-date"]
    book = tasks[1]
    assert [s["type"] for s in book["trajectory"]["steps"]] == [
        "model_call",
        "tool_call",
        "tool_call",
    ]
    call = book["trajectory"]["steps"][2]
    assert (call["tool"], call["arguments"]) == ("book_flight", {"flight_id": "TP523"})
    assert call["result"] == {"status": "confirmed", "flight": "TP523"}
    assert book["trajectory"]["stop_reason"] == "final_answer"
    wrong = {v["evaluator"]: v for v in tasks[2]["scores"]}
    assert wrong["trajectory-match"]["scores"] == {"trajectory-match": False}
    # the boundaries: no task, and a table listing
    none = run_evalsi(
        tmp_path, "runs", "show", run_id, "--tasks", "--limit", "0", "--format", "json"
    )
    assert json.loads(none.stdout)["tasks"] == []
    table = run_evalsi(tmp_path, "runs", "show", run_id, "--tasks", "--limit", "1")
    assert table.returncode == 0, table.stderr
    assert "weather-paris" in table.stdout
    assert "final_answer" in table.stdout
    plain = run_evalsi(tmp_path, "runs", "show", run_id, "--format", "json")
    assert "tasks" not in json.loads(plain.stdout)  # only when asked for


def test_a_score_runs_tasks_are_its_graded_records(
    run_evalsi: Callable[..., Any], tmp_path: Path
) -> None:
    done = run_evalsi(
        tmp_path,
        "eval",
        "--data",
        EXAMPLES / "qa.jsonl",
        "--evaluators",
        "exact-match",
        "--format",
        "json",
    )
    assert done.returncode == 0, done.stderr
    shown = run_evalsi(tmp_path, "runs", "show", "latest", "--tasks", "--format", "json")
    tasks = json.loads(shown.stdout)["tasks"]
    assert len(tasks) == 20  # the default limit; qa.jsonl has 20 records
    assert all("trajectory" not in t and len(t["scores"]) == 1 for t in tasks)
    remote = run_evalsi(
        tmp_path, "runs", "show", "latest", "--tasks", "--server", "http://127.0.0.1:9"
    )
    # --tasks reads the server's ListRunTasks (tests/integration/test_int_srvruns_tasks.py): one
    # that is not there is a connection error (exit 3), not a refusal of the flag.
    assert remote.returncode == 3
    assert "is `evalsi serve` running there?" in remote.stderr


def test_ci_example_tests_pass_and_their_runs_are_stored(
    run_evalsi: Callable[..., Any], tmp_path: Path
) -> None:
    """examples/ci/test_answers.py as docs/guides/ci.md runs it: `pytest --evalsi`."""
    import os
    import subprocess
    import sys
    from importlib.metadata import entry_points

    # by its entry point when evalsi is installed with it, else by name (never both)
    installed = any(e.value == "evalsi.testing._plugin" for e in entry_points(group="pytest11"))
    plugin = ["-p", "no:cacheprovider"] + ([] if installed else ["-p", "evalsi.testing._plugin"])
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *plugin, "--evalsi", "--evalsi-report", "evalsi.md",
         "--rootdir", str(tmp_path), str(EXAMPLES / "ci" / "test_answers.py")],
        cwd=tmp_path, capture_output=True, text=True, check=False, timeout=300,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "evalsi: 2 runs stored in" in proc.stdout
    listed = run_evalsi(tmp_path, "runs", "list", "--format", "json")
    names = sorted(r["name"] for r in json.loads(listed.stdout)["runs"])
    assert [n.rsplit("::", 1)[1] for n in names] == [
        "test_answers_are_right",
        "test_answers_contain_the_reference_and_pass_the_gates",
    ]
    assert (tmp_path / "evalsi.md").read_text().count("### evalsi · run") == 2
