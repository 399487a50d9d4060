"""``runs._ingest``: the run id of a client key, external evaluators as a run stores them, and
verdicts as the store's batches (consecutive records per evaluator and trial)."""

from __future__ import annotations

from evalsi.core import EvaluationResult, EvaluatorRef, Outcome, OutputSpec, Score
from evalsi.runs import default_metric, external_evaluator, ingest_batches, ingest_run_id
from evalsi.runs._ingest import declared_outputs


def test_the_run_id_is_the_project_and_key_s() -> None:
    first = ingest_run_id("default", "nightly")
    assert first == ingest_run_id("default", "nightly")
    assert first.startswith("ing-")
    assert len(first) == 28
    assert (
        len({first, ingest_run_id("other", "nightly"), ingest_run_id("default", "nightly2")}) == 3
    )


def test_an_external_evaluator_as_stored() -> None:
    outputs = (OutputSpec("ms", "number", (0.0, 1e4), higher_is_better=False),)
    spec = external_evaluator(
        "latency", EvaluatorRef("acme", "timer", "2"), outputs=outputs, description="wall time"
    )
    assert spec == {
        "name": "latency",
        "ref": "acme/timer@2",
        "version": "2",
        "params": {},
        "external": True,
        "description": "wall time",
        "outputs": [
            {
                "name": "ms",
                "type": "number",
                "range": [0.0, 1e4],
                "higher_is_better": False,
                "description": "",
            }
        ],
    }
    assert default_metric(spec) == "timer"
    assert declared_outputs(spec) == outputs
    plain = external_evaluator("judge", EvaluatorRef("external", "judge"))
    assert (plain["ref"], default_metric(plain), declared_outputs(plain)) == (
        "external/judge", "judge", (),
    )  # fmt: skip


def _passed(record: str, value: bool, trial: int = 0) -> EvaluationResult:
    return EvaluationResult(
        record,
        "judge",
        "external/judge",
        Outcome.SCORED,
        [Score("judge", passed=value)],
        trial=trial,
    )


def test_verdicts_become_batches_of_consecutive_records() -> None:
    spec = external_evaluator("judge", EvaluatorRef("external", "judge"))
    records = [
        {(0, 0): _passed("a", True), (0, 1): _passed("a", False, 1)},
        {(0, 0): _passed("b", False)},
        {(0, 1): _passed("c", True, 1)},  # no trial 0: the trial-0 run of records breaks here
        {(0, 0): _passed("d", True)},
    ]
    batches = ingest_batches([spec], 100, records)
    shape = [(index, first, b.trial, b.ids) for index, first, b in batches]
    assert shape == [
        (0, 100, 0, ["a", "b"]),
        (0, 103, 0, ["d"]),
        (0, 100, 1, ["a"]),
        (0, 102, 1, ["c"]),
    ]
    first = batches[0][2]
    assert (first.metric, first.value, first.scores) == ("judge", [1.0, 0.0], [None, None])
