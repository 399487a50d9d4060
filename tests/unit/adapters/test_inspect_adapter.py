"""evalsi evaluators as Inspect scorers and Inspect scorers as evalsi evaluators: each side's
verdict equals the other library's on the same samples."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("inspect_ai")

from inspect_ai.model import ModelName, ModelOutput
from inspect_ai.scorer import CORRECT, INCORRECT, NOANSWER, Target, exact, includes, match
from inspect_ai.solver import TaskState

import evalsi
from evalsi.adapters import from_inspect_scorer, inspect_scorer
from evalsi.core import Score
from evalsi.evaluators import Skip, evaluator
from evalsi.packs import builtin_registry

SAMPLES = [  # (input, model answer, target)
    ("Capital of France?", "Paris", "paris"),
    ("Capital of France?", "It is Paris.", "Paris"),
    ("2 + 2?", "5", "4"),
    ("2 + 2?", "The answer is 4", "4"),
    ("Colour?", "blue", "Blue"),
]


def _state(i: int, question: str, answer: str, target: str) -> TaskState:
    return TaskState(
        model=ModelName("mockllm/model"),
        sample_id=i,
        epoch=1,
        input=question,
        messages=[],
        target=Target(target),
        output=ModelOutput.from_content("mockllm/model", answer),
    )


def _rows() -> list[dict[str, Any]]:
    return [
        {"id": str(i), "input": q, "output": a, "reference": t}
        for i, (q, a, t) in enumerate(SAMPLES)
    ]


async def _inspect_scores(scorer: Any) -> list[Any]:
    return [await scorer(_state(i, *s), Target(s[2])) for i, s in enumerate(SAMPLES)]


@pytest.mark.parametrize(
    ("ref", "params"),
    [
        ("exact-match", {"ignore_case": True}),
        ("contains", {"ignore_case": True}),
        ("contains", {}),
    ],
)
def test_an_evalsi_evaluator_as_an_inspect_scorer_gives_evalsis_verdicts(
    ref: str, params: dict[str, Any]
) -> None:
    ev = builtin_registry().resolve(ref)
    scores = asyncio.run(_inspect_scores(inspect_scorer(ev, params)))
    here = evalsi.evaluate(_rows(), evaluators=[ev], params={ev.name: params}, store=":memory:")
    want = [CORRECT if r.scores[0].passed else INCORRECT for r in here.results]
    assert [s.value for s in scores] == want
    assert CORRECT in want
    assert INCORRECT in want


def test_numbers_labels_skips_and_errors_cross_over() -> None:
    @evaluator(name="t/length", version="1.0.0", output="number")
    def length(record: Any) -> Any:
        text = record.output.as_text()
        if text == "5":
            raise Skip("a bare number")
        if text == "blue":
            raise ValueError("no colours")
        return Score(number=float(len(text)), explanation="characters")

    scorer = inspect_scorer(length)

    async def run() -> list[Any]:
        out = []
        for i, s in enumerate(SAMPLES):
            try:
                out.append(await scorer(_state(i, *s), Target(s[2])))
            except RuntimeError as e:
                out.append(str(e))
        return out

    got = asyncio.run(run())
    assert [g.value if not isinstance(g, str) else g for g in got] == [
        5.0,
        12.0,
        NOANSWER,
        15.0,
        "length: ValueError: no colours",
    ]
    assert got[0].explanation == "characters"
    assert got[2].explanation == "a bare number"


@pytest.mark.parametrize(
    ("name", "make"), [("includes", includes), ("match", match), ("exact", exact)]
)
def test_an_inspect_scorer_as_an_evalsi_evaluator_gives_inspects_verdicts(
    name: str, make: Any
) -> None:
    direct = asyncio.run(_inspect_scores(make()))
    ev = from_inspect_scorer(make(), name=f"inspect/{name}", requires=("output", "reference"))
    out = evalsi.evaluate(_rows(), evaluators=[ev], store=":memory:")
    assert [r.scores[0].passed for r in out.results] == [s.value == CORRECT for s in direct]
    assert [r.scores[0].explanation for r in out.results] == [s.explanation or "" for s in direct]


_EVAL = """
import asyncio, json, sys
from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.solver import generate
from evalsi.adapters import inspect_scorer
from evalsi.packs import builtin_registry

rows = json.loads(sys.argv[2])
outputs = [ModelOutput.from_content("mockllm/model", r["output"]) for r in rows]
for o in outputs:  # usage given, so the mock model needs no tokenizer download
    o.usage = ModelUsage(input_tokens=5, output_tokens=3, total_tokens=8)
samples = [Sample(id=r["id"], input=r["input"], target=r["reference"]) for r in rows]
scorer = inspect_scorer(builtin_registry().resolve("contains"), {"ignore_case": True})
task = Task(dataset=samples, solver=generate(), scorer=scorer)
model = get_model("mockllm/model", custom_outputs=outputs)
log = eval(task, model=model, log_dir=sys.argv[1], display="none", max_samples=1)[0]
accuracy = log.results.scores[0].metrics["accuracy"].value
print(json.dumps({"status": log.status, "accuracy": accuracy}))
"""


def test_inspect_eval_with_an_evalsi_scorer_matches_evalsi(tmp_path: Path) -> None:
    import json

    rows = _rows()
    proc = subprocess.run(  # Inspect's loop leaves streams to the GC: a process of its own
        [sys.executable, "-W", "ignore", "-c", _EVAL, str(tmp_path), json.dumps(rows)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    here = evalsi.evaluate(
        rows, evaluators=["contains"], params={"contains": {"ignore_case": True}}, store=":memory:"
    )
    assert got["status"] == "success"
    assert got["accuracy"] == pytest.approx(here.metric("contains").mean)
