"""``Client.ingest``'s pieces without a server: which failures are retried and how long it
waits, the ingest file format, and how records are cut into chunks."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from connectrpc.code import Code

from evalsi._proto.evalsi.v1alpha1 import score_pb2
from evalsi.client._ingest import INGEST_RETRY, _chunks, retryable
from evalsi.client._ingest_rows import IngestItems, external_evaluators, external_source
from evalsi.core import Content, EvaluationResult, Outcome, Record, Score, UserError


@pytest.mark.parametrize(
    ("code", "status", "again"),
    [
        (Code.UNAVAILABLE, None, True),  # refused, reset: no answer at all
        (Code.DEADLINE_EXCEEDED, None, True),
        (Code.UNAVAILABLE, 503, True),
        (Code.UNAVAILABLE, 502, True),
        (Code.UNKNOWN, 500, True),
        (Code.UNAVAILABLE, 429, True),  # a proxy's rate limit
        (Code.RESOURCE_EXHAUSTED, 429, False),  # Connect's mapping of evalsi's body too large
        (Code.UNIMPLEMENTED, 501, False),
        (Code.INVALID_ARGUMENT, 400, False),
        (Code.NOT_FOUND, 404, False),
        (Code.FAILED_PRECONDITION, 409, False),
        (Code.INTERNAL, 400, False),  # any other 4xx, whatever Connect made of it
        (Code.UNAVAILABLE, 200, True),  # gRPC: the status came in trailers
        (Code.INVALID_ARGUMENT, 200, False),
    ],
)
def test_what_is_retried(code: Code, status: int | None, again: bool) -> None:
    assert retryable(code, status) is again


def test_waits_are_the_set_delays_within_twenty_percent() -> None:
    rng = random.Random(7)
    for attempt, base in enumerate((0.25, 0.75, 1.75, 1.75), 1):
        waits = [INGEST_RETRY.backoff(attempt, rng) for _ in range(2000)]
        assert base * 0.8 <= min(waits) < base * 0.82
        assert base * 1.18 < max(waits) <= base * 1.2
    assert INGEST_RETRY.max_attempts == 4  # three retries: one per delay


def test_the_file_format(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text(
        '{"id": "q1", "input": "2+2?", "output": "4", "topic": "math", "results": ['
        '{"evaluator": "judge", "scores": [{"passed": true, "explanation": "exact"}]},'
        '{"evaluator": "latency", "trial": 1, "scores": [{"name": "ms", "value": 812}]},'
        '{"evaluator": "judge", "trial": 1, "outcome": "error", "reason": "timeout"}]}\n'
        "\n"
        '{"id": "q2", "output": "5", "results": [{"evaluator": "tone", '
        '"scores": [{"label": "ok"}]}]}\n'
    )
    items = IngestItems(path)
    first, second = list(items)
    assert first.record.id == "q1"
    assert first.record.input.text == "2+2?"
    assert first.record.metadata["topic"].string_value == "math"
    assert not first.record.HasField("provenance")
    judge, latency, error = first.results
    assert (judge.evaluator, judge.outcome, judge.trial) == ("judge", score_pb2.OUTCOME_SCORED, 0)
    assert (judge.scores[0].passed, judge.scores[0].explanation) == (True, "exact")
    assert (latency.trial, latency.scores[0].name, latency.scores[0].number) == (1, "ms", 812.0)
    assert (error.outcome, error.reason, list(error.scores)) == (
        score_pb2.OUTCOME_ERROR, "timeout", [],
    )  # fmt: skip
    assert second.results[0].scores[0].label == "ok"
    assert items.evaluator_names() == ["judge", "latency", "tone"]
    declared = external_evaluators([{"name": "judge", "ref": "acme/judge"}], ["judge", "tone"])
    assert [(e.name, e.ref) for e in declared] == [("judge", "acme/judge"), ("tone", "")]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": "a", "results": [{"scores": [{"passed": true}]}]}', "results[0].evaluator: "),
        ('{"id": "a", "results": [{"evaluator": "j"}]}', "results[0].scores: a scored result"),
        ('{"id": "a", "results": [{"evaluator": "j", "scores": [{"passed": 1}]}]}',
         "results[0].scores[0].passed: expected true or false"),
        ('{"id": "a", "results": [{"evaluator": "j", "scores": [{"value": 1, "label": "x"}]}]}',
         "results[0].scores[0]: give exactly one of value, passed or label, got 2"),
        ('{"id": "a", "results": [{"evaluator": "j", "score": 1}]}',
         "results[0]: unknown key 'score'"),
        ('{"id": "a", "results": [{"evaluator": "j", "outcome": "failed"}]}',
         "results[0].outcome: expected one of scored, skipped, error, cancelled"),
        ('{"id": "a", "results": [{"evaluator": "j", "outcome": "skipped", "scores": '
         '[{"passed": true}]}]}', "results[0].scores: only a scored result holds scores"),
        ('{"id": "a", "results": [{"evaluator": "j", "trial": -1, "scores": [{"passed": true}]}]}',
         "results[0].trial: expected a whole number >= 0"),
        ('{"id": "a", "results": {"evaluator": "j"}}', "results: expected a list"),
        ('{"id": "a", "usage": {"input_tokens": -1}, "results": []}',
         "field 'usage.input_tokens': expected a non-negative integer"),
        ("not json", "not JSON"),
    ],
)  # fmt: skip
def test_a_bad_line_is_named(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"id": "ok", "results": []}\n' + line + "\n")
    with pytest.raises(UserError) as caught:
        list(IngestItems(path))
    assert caught.value.message.startswith(f"{path}:2: "), caught.value.message
    assert message in caught.value.message


def test_records_and_results_from_python() -> None:
    record = Record(id="r1", output=Content.of_text("4"))
    result = EvaluationResult(
        record_id="r1",
        evaluator="judge",
        evaluator_ref="acme/judge@1",
        outcome=Outcome.SCORED,
        scores=[Score(passed=True)],
        duration_s=0.5,
    )
    (message,) = IngestItems([(record, [result])])
    assert message.record.id == "r1"
    sent = message.results[0]
    assert (sent.record_id, sent.evaluator_ref, sent.HasField("duration")) == ("", "", False)
    assert sent.scores[0].passed is True
    with pytest.raises(UserError, match="records:1: results\\[0\\]: expected an object"):
        list(IngestItems([{"id": "x", "results": ["judge"]}]))
    assert external_source({"tool": "acme"}).tool == "acme"
    with pytest.raises(UserError, match="source: unknown key 'url'"):
        external_source({"url": "https://x"})
    with pytest.raises(UserError, match="one dict"):
        IngestItems({"id": "x"})  # type: ignore[dict-item]


def test_chunks_hold_at_most_so_many_records_and_bytes() -> None:
    def item(text: str) -> dict[str, Any]:
        return {"id": "x", "output": text, "results": []}

    messages = list(IngestItems([item("a" * 100) for _ in range(7)]))
    by_count = [len(c) for c in _chunks(iter(messages), 3, 1 << 20)]
    assert by_count == [3, 3, 1]
    size = messages[0].ByteSize() + 8
    by_bytes = [len(c) for c in _chunks(iter(messages), 100, 2 * size)]
    assert by_bytes == [2, 2, 2, 1]
    big = list(IngestItems([item("b" * 5000), item("c")]))
    assert [len(c) for c in _chunks(iter(big), 100, 1000)] == [1, 1]  # too big: alone
