"""Issue 16: custom evaluators from the command line without packaging, `FILE.py:NAME` or
`MODULE:NAME`, in `evalsi eval`, `evalsi run` (the spec's evaluator refs, relative to the spec)
and `evalsi grade`. The run stores where the code came from (file and sha256, or module); a
bad reference is a one-line user error (exit 2), never a traceback.

Expected scores are computed here from the data with `math.isclose`, not read from our output.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def _numeric_close_expected(path: Path, rel_tol: float) -> tuple[int, float]:
    """(records scored, mean) of examples/custom_evaluator.py's numeric-close on ``path``."""
    passed = []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        try:
            expected = float(str(row["reference"]))
        except ValueError:
            continue  # skipped: the reference is not a number
        try:
            passed.append(math.isclose(float(str(row["output"])), expected, rel_tol=rel_tol))
        except ValueError:
            passed.append(False)
    return len(passed), sum(passed) / len(passed)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    shutil.copy(EXAMPLES / "custom_evaluator.py", tmp_path / "custom_evaluator.py")
    shutil.copy(EXAMPLES / "qa.jsonl", tmp_path / "qa.jsonl")
    return tmp_path


def _show(cli: Any, json_out: Any, run_id: str) -> dict[str, Any]:
    out: dict[str, Any] = json_out(
        cli("runs", "show", run_id, "--store", "s.db", "--format", "json")
    )
    return out


def test_eval_with_an_evaluator_from_a_file(cli: Any, json_out: Any, work: Path) -> None:
    out = json_out(
        cli(
            "eval", "--data", "qa.jsonl", "--store", "s.db", "--format", "json", "-q",
            "--evaluators", "exact-match,./custom_evaluator.py:numeric_close",
            "--param", "numeric-close.rel_tol=0.005",
        )
    )  # fmt: skip
    metric = next(m for m in out["metrics"] if m["evaluator"] == "numeric-close")
    n, mean = _numeric_close_expected(work / "qa.jsonl", 0.005)
    assert (metric["n"], metric["mean"]) == (n, pytest.approx(mean))
    assert metric["skipped"] == 20 - n
    shown = _show(cli, json_out, out["run_id"])
    digest = "sha256:" + hashlib.sha256((work / "custom_evaluator.py").read_bytes()).hexdigest()
    source = {
        "file": str((work / "custom_evaluator.py").resolve()),
        "sha256": digest,
        "object": "numeric_close",
    }
    text = json.dumps(shown)
    assert json.dumps(source)[1:-1] in text  # in the stored spec and in the manifest
    assert text.count(digest) >= 2


def test_module_function_and_a_plain_function(cli: Any, json_out: Any, work: Path) -> None:
    (work / "my_evals.py").write_text(
        "def short(record):\n    return len(record.output.as_text()) <= 5\n", encoding="utf-8"
    )
    out = json_out(
        cli(
            "eval", "--data", "qa.jsonl", "--store", "s.db", "--format", "json", "-q",
            "--evaluators", "my_evals:short,custom_evaluator:numeric_close",
        )
    )  # fmt: skip
    rows = [json.loads(line) for line in (work / "qa.jsonl").read_text().splitlines()]
    expected = sum(len(str(r["output"])) <= 5 for r in rows) / len(rows)
    short = next(m for m in out["metrics"] if m["evaluator"] == "short")
    assert short["mean"] == pytest.approx(expected)
    text = json.dumps(_show(cli, json_out, out["run_id"]))
    assert '"ref": "local/short@0.0.0"' in text
    assert '"module": "my_evals"' in text


def test_run_spec_and_grade_load_code_relative_to_the_spec(
    cli: Any, json_out: Any, work: Path
) -> None:
    spec_dir = work / "suite"
    spec_dir.mkdir()
    shutil.copy(EXAMPLES / "echo_target.py", spec_dir / "echo_target.py")
    shutil.copy(EXAMPLES / "custom_evaluator.py", spec_dir / "evals.py")
    spec = (EXAMPLES / "run-python.yaml").read_text(encoding="utf-8")
    spec = spec.replace("path: qa.jsonl", f"path: {work / 'qa.jsonl'}")
    spec = spec.replace("    - ref: latency\n", "    - ref: evals.py:numeric_close\n")
    (spec_dir / "run.yaml").write_text(spec, encoding="utf-8")
    env = {"PYTHONPATH": str(spec_dir)}
    # From another directory: the file is found beside the spec, not in the working directory.
    ran = json_out(
        cli("run", "-f", "suite/run.yaml", "--store", "s.db", "--format", "json", "-q", env=env)
    )
    assert any(m["evaluator"] == "numeric-close" for m in ran["metrics"])
    assert "suite/evals.py" in json.dumps(_show(cli, json_out, ran["run_id"]))
    graded = json_out(
        cli(
            "grade", "--from", ran["run_id"], "--store", "s.db", "--format", "json",
            "--evaluators", "custom_evaluator.py:numeric_close",
        )
    )  # fmt: skip
    (metric,) = graded["metrics"]
    assert metric["evaluator"] == "numeric-close"
    assert metric["n"] > 0
    # A rerun loads the evaluator from where the spec named it, and says when the file changed.
    again = cli("rerun", ran["run_id"], "--store", "s.db", "--format", "json", "-q", env=env)
    assert again.returncode == 0, again.stderr
    rerun = json.loads(again.stdout)
    assert [m["n"] for m in rerun["metrics"]] == [m["n"] for m in ran["metrics"]]
    assert "changed since" not in again.stderr
    with (spec_dir / "evals.py").open("a", encoding="utf-8") as f:
        f.write("# edited\n")
    edited = cli("rerun", ran["run_id"], "--store", "s.db", "--format", "json", "-q", env=env)
    assert edited.returncode == 0, edited.stderr
    assert "evals.py changed since run" in edited.stderr


@pytest.mark.parametrize(
    ("ref", "needles"),
    [
        ("nope.py:x", ["--evaluators: evaluator 'nope.py:x': no file"]),
        ("custom_evaluator.py:numeric_clos", ["has no 'numeric_clos'", "numeric_close?"]),
        ("custom_evaluator.py:DATA", ["is a PosixPath, not an evaluator"]),
        ("broken.py:x", ["loading broken.py failed: ValueError: boom (line 2)"]),
        ("syntax.py:x", ["loading syntax.py failed: SyntaxError", "(line 1)"]),
        ("no_such_module:x", ["no module 'no_such_module'"]),
        ("custom_evaluator.py:", ["expected FILE.py:NAME or MODULE:NAME"]),
        ("not a module:x", ["neither a .py file nor a module name"]),
    ],
)
def test_bad_references_are_user_errors(
    cli: Any, user_error: Any, work: Path, ref: str, needles: list[str]
) -> None:
    (work / "broken.py").write_text("X = 1\nraise ValueError('boom')\n", encoding="utf-8")
    (work / "syntax.py").write_text("def (:\n", encoding="utf-8")
    proc = cli("eval", "--data", "qa.jsonl", "--evaluators", ref, "--store", "s.db")
    user_error(proc, *needles)
    assert not (work / "s.db").exists()  # refused before anything was stored


def test_code_is_refused_with_a_server(cli: Any, user_error: Any, work: Path) -> None:
    proc = cli(
        "eval", "--data", "qa.jsonl", "--evaluators", "custom_evaluator.py:numeric_close",
        "--server", "http://127.0.0.1:9",
    )  # fmt: skip
    user_error(proc, "is code on this machine; the server at http://127.0.0.1:9 cannot run it")
