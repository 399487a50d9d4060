"""The per-call time limit of ``RecordRunner.run(time_limit=...)``: a call that spins in Python
is stopped and its record is ERROR ``timed out after Ns``, the records around it are graded as
usual, and nothing leaks into the calls that follow (no stray exception, no dead thread)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from evalsi.core import Content, Outcome, Record
from evalsi.evaluators import RecordRunner, Skip, evaluator
from evalsi.evaluators._time_limit import call_with_limit


def _records(*outputs: str) -> list[Record]:
    return [Record(id=f"r{i}", output=Content.of_text(o)) for i, o in enumerate(outputs)]


def _spin_forever() -> None:
    n = 0
    while True:
        n += 1


@evaluator(name="test/spin", version="1.0.0", requires=("output",))
def spin(record: Record) -> bool:
    text = record.output.as_text() if record.output is not None else ""
    if text == "spin":
        _spin_forever()
    if text == "swallow":  # catches everything, so the runner must see it ran out anyway
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            try:
                while time.monotonic() < deadline:
                    pass
            except BaseException:  # noqa: BLE001 - the point of the test
                pass
    if text == "skip":
        raise Skip("asked to")
    if text == "boom":
        raise ValueError("bad")
    return text == "yes"


@evaluator(name="test/spin-batch", version="1.0.0", requires=("output",))
class SpinBatch:
    def __call__(self, record: Record) -> bool:  # pragma: no cover - batch is used
        return True

    def evaluate_batch(self, records: Sequence[Record]) -> list[bool]:
        if any(r.output is not None and r.output.as_text() == "spin" for r in records):
            _spin_forever()
        return [True] * len(records)


def _outcomes(batch: object) -> list[tuple[Outcome, str | None]]:
    return [(r.outcome, r.reason or None) for r in batch]  # type: ignore[attr-defined]


def test_a_spinning_call_is_stopped_and_the_others_are_graded() -> None:
    runner = RecordRunner(spin.bind({}))
    batch = runner.run(_records("yes", "spin", "no", "skip", "boom", "yes"), time_limit=0.3)
    results = list(batch)
    assert [r.outcome for r in results] == [
        Outcome.SCORED,
        Outcome.ERROR,
        Outcome.SCORED,
        Outcome.SKIPPED,
        Outcome.ERROR,
        Outcome.SCORED,
    ]
    assert results[1].reason == "timed out after 0.3s"
    assert results[3].reason == "asked to"
    assert results[4].reason == "ValueError: bad"
    assert [r.scores[0].passed for r in results if r.outcome is Outcome.SCORED] == [
        True,
        False,
        True,
    ]


def test_a_call_that_swallows_the_stop_still_counts_as_timed_out() -> None:
    runner = RecordRunner(spin.bind({}))
    (result, after) = list(runner.run(_records("swallow", "yes"), time_limit=0.2))
    assert (result.outcome, result.reason) == (Outcome.ERROR, "timed out after 0.2s")
    assert after.outcome is Outcome.SCORED


def test_a_batch_call_over_the_limit_fails_its_records() -> None:
    runner = RecordRunner(SpinBatch.bind({}))  # type: ignore[attr-defined]
    results = list(runner.run(_records("a", "spin", "b"), time_limit=0.2))
    assert {(r.outcome, r.reason) for r in results} == {(Outcome.ERROR, "timed out after 0.2s")}
    assert {r.outcome for r in runner.run(_records("a", "b"), time_limit=0.2)} == {Outcome.SCORED}


def test_without_a_limit_the_results_are_the_same() -> None:
    runner = RecordRunner(spin.bind({}))
    records = _records("yes", "no", "skip", "boom")
    assert _outcomes(runner.run(records)) == _outcomes(runner.run(records, time_limit=30))


def test_calls_ending_near_their_deadline_never_leak_the_stop() -> None:
    """Thousands of calls whose limit falls inside or just after them: each either finishes
    with its own value or reports a time-out; none raises, none returns a wrong value."""
    for i in range(3000):
        value, expired = call_with_limit(lambda n: sum(range(n)), 2000 + i % 50, 0.0002)
        assert expired or value == sum(range(2000 + i % 50))
    value, expired = call_with_limit(lambda n: n + 1, 1, 5)
    assert (value, expired) == (2, False)
    time.sleep(0.05)  # a stop withdrawn too late would surface here


def test_limits_hold_in_several_threads_at_once() -> None:
    results: list[tuple[object, bool]] = []
    lock = threading.Lock()

    def work(spin_it: bool) -> None:
        out = call_with_limit(lambda _: _spin_forever() if spin_it else "done", None, 0.3)
        with lock:
            results.append(out)

    threads = [threading.Thread(target=work, args=(i % 2 == 0,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads)
    assert sorted(results, key=repr) == sorted(
        [(None, True), (None, True), ("done", False), ("done", False)], key=repr
    )
