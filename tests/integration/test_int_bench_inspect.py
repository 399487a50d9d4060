"""Inspect AI through evalsi: an Inspect task's samples become rows and a spec that runs on
evalsi's harness (a stub model on loopback), and a real ``.eval`` log written by
``inspect_ai.eval`` with its mock model becomes records whose counts, answers and Inspect
scores equal the log's, and which evalsi grades to the same verdicts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import evalsi
from evalsi.benchmarks import import_inspect_log, import_inspect_task
from evalsi.core import UserError
from tests.support.stub_llm import StubLLM

inspect_ai = pytest.importorskip("inspect_ai")
from inspect_ai import Task  # noqa: E402
from inspect_ai.dataset import Sample  # noqa: E402
from inspect_ai.log import read_eval_log  # noqa: E402
from inspect_ai.scorer import includes, match  # noqa: E402
from inspect_ai.solver import generate  # noqa: E402

# Inspect's retry setup uses a tenacity argument tenacity deprecates: Inspect's noise, not ours
pytestmark = pytest.mark.filterwarnings("ignore:The 'initial' parameter is deprecated")

SAMPLES = [
    Sample(id="capital", input="What is the capital of France?", target="Paris"),
    Sample(id="sum", input="What is 2 + 3?", target="5", metadata={"topic": "math"}),
    Sample(id="colour", input="Name a primary colour.", target=["red", "blue", "yellow"]),
]
ANSWERS = ["It is paris.", "The answer is 6.", "Blue, of course."]


def _task() -> Task:
    return Task(dataset=SAMPLES, solver=generate(), scorer=[includes(), match()], name="quiz")


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_an_inspect_task_runs_on_evalsis_harness(tmp_path: Path) -> None:
    out = import_inspect_task(_task(), tmp_path / "quiz")
    assert out.count == 3
    rows = _rows(out.dataset)
    assert [r["id"] for r in rows] == ["capital", "sum", "colour"]
    assert rows[2]["reference"] == ["red", "blue", "yellow"]
    assert rows[1]["metadata"] == {"topic": "math"}
    assert out.spec is not None
    spec_text = out.spec.read_text()
    assert "contains" in spec_text  # includes(), mapped
    assert "inspect_ai/match" in spec_text  # match(), named as not graded
    answers = {str(s.input): a for s, a in zip(SAMPLES, ANSWERS, strict=True)}
    with StubLLM(answers=answers, default="") as stub:
        spec = spec_text.replace("http://127.0.0.1:8000/v1", stub.openai_url)
        out.spec.write_text(spec)
        result = evalsi.run(out.spec, store=tmp_path / "e.db")
    metric = result.metric("contains")
    assert metric.n == 3
    assert metric.mean == pytest.approx(2 / 3)  # "6" does not hold "5"


_MAKE_LOG = """
import sys
from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import includes
from inspect_ai.solver import generate

samples = [
    Sample(id="capital", input="What is the capital of France?", target="Paris"),
    Sample(id="sum", input="What is 2 + 3?", target="5", metadata={"topic": "math"}),
    Sample(id="colour", input="Name a primary colour.", target=["red", "blue", "yellow"]),
]
answers = ["It is paris.", "The answer is 6.", "Blue, of course."]
epochs = int(sys.argv[2])
outputs = [ModelOutput.from_content("mockllm/model", a) for _ in range(epochs) for a in answers]
for o in outputs:  # usage given, so the mock model needs no tokenizer download
    o.usage = ModelUsage(input_tokens=5, output_tokens=3, total_tokens=8)
model = get_model("mockllm/model", custom_outputs=outputs)
task = Task(dataset=samples, solver=generate(), scorer=includes(), name="quiz")
log = eval(task, model=model, log_dir=sys.argv[1], display="none", epochs=epochs, max_samples=1)[0]
print(log.status, log.location)
"""


def _log(tmp_path: Path, epochs: int = 1) -> Path:
    """A real .eval log, written by ``inspect_ai.eval`` with its mock model in a process of
    its own (Inspect's event loop leaves streams for the garbage collector)."""
    proc = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", _MAKE_LOG, str(tmp_path / "logs"), str(epochs)],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    status, location = proc.stdout.split()[-2:]
    assert status == "success", proc.stdout
    return Path(location)


def test_an_inspect_log_becomes_records_equal_to_it(tmp_path: Path) -> None:
    path = _log(tmp_path)
    log = read_eval_log(str(path))
    assert log.samples is not None
    out = import_inspect_log(path, tmp_path / "out")
    rows = _rows(out.dataset)
    assert out.count == len(log.samples) == 3
    by_id = {r["id"]: r for r in rows}
    for s in log.samples:
        row = by_id[str(s.id)]
        assert row["output"] == s.output.completion
        assert row["reference"] == s.target
        assert row["metadata"]["inspect_scores"]["includes"]["value"] == s.scores["includes"].value
    # evalsi grades the same answers as Inspect's includes() did, record by record
    graded = evalsi.evaluate(
        rows, ["contains"], params={"contains": {"ignore_case": True}}, store=":memory:"
    )
    inspect_mean = log.results.scores[0].metrics["accuracy"].value
    assert graded.metric("contains").mean == pytest.approx(inspect_mean)
    assert inspect_mean == pytest.approx(2 / 3)


def test_epochs_give_one_record_each(tmp_path: Path) -> None:
    out = import_inspect_log(_log(tmp_path, epochs=2), tmp_path / "out")
    ids = sorted(r["id"] for r in _rows(out.dataset))
    assert out.count == 6
    assert ids[:2] == ["capital@1", "capital@2"]


def test_bad_logs_and_tasks_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such Inspect log"):
        import_inspect_log(tmp_path / "missing.eval", tmp_path / "o")
    broken = tmp_path / "broken.eval"
    broken.write_bytes(b"not a zip")
    with pytest.raises(UserError, match=r"broken.eval: not a readable Inspect log"):
        import_inspect_log(broken, tmp_path / "o")
    with pytest.raises(UserError, match="no such Inspect task file"):
        import_inspect_task(f"{tmp_path}/nope.py@quiz", tmp_path / "o")
    dup = Task(dataset=[Sample(id="a", input="x"), Sample(id="a", input="y")], name="d")
    with pytest.raises(UserError, match=r"'a' appears twice"):
        import_inspect_task(dup, tmp_path / "o")
    # (a task of no samples cannot exist: Inspect's Task refuses an empty dataset)


def test_a_task_file_is_loaded_by_name(tmp_path: Path) -> None:
    (tmp_path / "quiz_task.py").write_text(
        "from inspect_ai import Task, task\nfrom inspect_ai.dataset import Sample\n"
        "from inspect_ai.scorer import exact\n\n@task\ndef quiz():\n"
        "    return Task(dataset=[Sample(input='hi', target='hello')], scorer=exact())\n"
    )
    out = import_inspect_task(f"{tmp_path / 'quiz_task.py'}@quiz", tmp_path / "o")
    assert out.count == 1
    assert out.spec is not None
    assert "exact-match" in out.spec.read_text()
