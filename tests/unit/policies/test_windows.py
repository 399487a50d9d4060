"""The policy window: intervals as statsmodels/scipy compute them, pruning by time."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from evalsi.core import PASSED as PASSED_KIND
from evalsi.core import Outcome, ResultBatch, Score
from evalsi.policies._windows import Window
from tests.support.proportions import wilson_reference


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def one(evaluator: str, *, passed: bool | None = None, number: float | None = None) -> ResultBatch:
    b = ResultBatch(evaluator, f"builtin/{evaluator}", evaluator, ["t"])
    if passed is not None:
        b.kind[0], b.value[0] = PASSED_KIND, 1.0 if passed else 0.0
    elif number is not None:
        b.set_scores(0, [Score(name=evaluator, number=number)])
    return b


def test_pass_fail_gets_the_wilson_interval() -> None:
    w = Window(300, clock=Clock())
    verdicts = [True] * 13 + [False] * 7
    for v in verdicts:
        w.add(one("check", passed=v))
    m = w.find("check")
    assert m is not None
    assert (m.n, m.kind, m.ci.method) == (20, "passed", "wilson")
    lo, hi = wilson_reference(13, 20)
    assert m.mean == pytest.approx(0.65)
    assert m.ci.low == pytest.approx(lo, abs=1e-12)
    assert m.ci.high == pytest.approx(hi, abs=1e-12)


def test_numbers_get_the_t_interval() -> None:
    w = Window(300, clock=Clock())
    values = [0.2, 0.9, 0.55, 0.7, 0.31, 0.8, 0.64]
    for v in values:
        w.add(one("judge", number=v))
    m = w.find("judge")
    assert m is not None
    assert m.ci.method == "t"
    mean, sem = np.mean(values), stats.sem(values)
    lo, hi = stats.t.interval(0.95, len(values) - 1, loc=mean, scale=sem)
    assert m.mean == pytest.approx(mean)
    assert m.std == pytest.approx(np.std(values, ddof=1))
    assert m.ci.low == pytest.approx(lo)
    assert m.ci.high == pytest.approx(hi)


def test_old_entries_leave_the_window() -> None:
    clock = Clock()
    w = Window(60, clock=clock)
    w.add(one("judge", number=0.0))
    w.add_trace()
    clock.now += 30
    w.add(one("judge", number=1.0))
    w.add_trace()
    assert w.n == 2
    assert w.functions()["mean"]("judge") == pytest.approx(0.5)
    clock.now += 45  # the first pair is now 75 s old
    assert w.n == 1
    assert w.functions()["mean"]("judge") == pytest.approx(1.0)
    clock.now += 60
    assert w.n == 0
    assert w.summaries() == []
    assert w.functions()["mean"]("judge") is None
    assert w.functions()["count"]("judge") == 0


def test_skips_and_errors_are_counted_apart_from_n() -> None:
    w = Window(300, clock=Clock())
    w.add(one("judge", number=0.5))
    skipped = one("judge")
    skipped.set_outcome(0, Outcome.SKIPPED, "cascade: `when` is false")
    w.add(skipped)
    failed = one("judge")
    failed.set_outcome(0, Outcome.ERROR, "ValueError: x")
    w.add(failed)
    lost = one("judge")
    lost.set_outcome(0, Outcome.ERROR, "infra_error(timeout): judge")
    w.add(lost)
    m = w.find("judge")
    assert m is not None
    assert (m.n, m.scored, m.skipped, m.errors, m.infra_errors) == (1, 1, 1, 1, 1)


def test_rate_is_only_for_pass_fail_and_names_may_carry_a_metric() -> None:
    w = Window(300, clock=Clock())
    w.declare("pii", "pii-leakage")
    b = ResultBatch("pii", "builtin/pii-leakage", "pii-leakage", ["t"])
    b.set_scores(0, [Score(name="pii-leakage", passed=False), Score(name="pii-count", number=3.0)])
    w.add(b)
    w.add(one("judge", number=0.4))
    f = w.functions()
    assert f["rate"]("pii") == 0.0
    assert f["mean"]("pii/pii-count") == 3.0
    assert f["mean"]("pii", "pii-count") == 3.0
    assert f["rate"]("judge") is None


def test_memory_is_capped_per_metric() -> None:
    w = Window(300, clock=Clock(), max_entries=10)
    for i in range(25):
        w.add(one("judge", number=float(i)))
    m = w.find("judge")
    assert m is not None
    assert m.n == 10
    assert m.mean == pytest.approx(np.mean(range(15, 25)))
    assert w.dropped == 15


def test_a_keyed_entry_replaces_the_earlier_one_of_its_key() -> None:
    w = Window(300, clock=Clock())
    w.add(one("fb", number=1.0), key="trace-a")
    w.add(one("fb", number=2.0), key="trace-a")  # graded again on new feedback
    w.add(one("fb", number=3.0), key="trace-a")
    w.add(one("fb", number=10.0), key="trace-b")
    m = w.find("fb")
    assert m is not None
    assert (m.n, m.mean) == (2, pytest.approx(6.5))  # 3.0 for a, 10.0 for b


# One step of a window's life: advance the clock, then add a score (or a skip) under a key.
_steps = st.lists(
    st.tuples(
        st.sampled_from([0.0, 0.0, 1.0, 7.0, 40.0]),  # seconds the clock moves first
        st.one_of(
            st.booleans(),
            st.floats(-1e6, 1e6, allow_nan=False),
            st.just(None),  # skipped
        ),
        st.one_of(st.none(), st.sampled_from(["a", "b", "c"])),  # key
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(_steps, st.booleans())
def test_running_totals_match_the_reference_statistics(steps: list[Any], numbers: bool) -> None:
    """Whatever was added, superseded and expired, the summary equals numpy/scipy/statsmodels
    on the entries still in the window (computed here from scratch)."""
    clock = Clock()
    w = Window(60, clock=clock, max_entries=25)
    for wait, value, key in steps:
        clock.now += wait
        if isinstance(value, bool) and numbers:
            value = float(value)
        if isinstance(value, float) and not numbers:
            value = value > 0
        batch = one("m")
        if value is None:
            batch.set_outcome(0, Outcome.SKIPPED, "no output")
        elif isinstance(value, bool):
            batch = one("m", passed=value)
        else:
            batch = one("m", number=value)
        w.add(batch, key=key)
    # the cap keeps the newest 25 entries added (superseded ones included)
    m = w.find("m")
    added = _alive_after_cap(steps, numbers, clock.now)
    values = [v for _, v, _ in added if v is not None]
    if m is None:
        assert added == []
        return
    assert m.skipped == sum(1 for _, v, _ in added if v is None)
    assert m.n == len(values)
    if not values:
        return
    if not numbers:
        successes = sum(values)
        assert m.mean == pytest.approx(successes / len(values))
        lo, hi = wilson_reference(successes, len(values))
        assert (m.ci.low, m.ci.high) == (pytest.approx(lo), pytest.approx(hi))
    else:
        scale = max(1.0, max(abs(v) for v in values))
        assert m.mean == pytest.approx(np.mean(values), rel=1e-12, abs=1e-12 * scale)
        if len(values) > 1:
            assert m.std == pytest.approx(np.std(values, ddof=1), rel=1e-9, abs=1e-9 * scale)
        else:
            assert m.std is None


def _alive_after_cap(steps: list[Any], numbers: bool, now: float) -> list[Any]:
    """The reference: every add in order, the cap of 25 dropping the oldest add, a key's
    newer add superseding its older one, then the window's 60 s."""
    clock = 1000.0
    added: list[list[Any]] = []  # [time, value, key, superseded]
    for wait, value, key in steps:
        clock += wait
        if isinstance(value, bool) and numbers:
            value = float(value)
        if isinstance(value, float) and not numbers:
            value = value > 0
        # expiry happens on every add: older than 60 s goes first
        added = [a for a in added if a[0] >= clock - 60]
        if key is not None:
            for a in added:
                if a[2] == key:
                    a[3] = True
        added.append([clock, value, key, False])
        if len(added) > 25:
            added.pop(0)
    return [(t, v, k) for t, v, k, gone in added if not gone and t >= now - 60]


def test_a_step_graded_again_replaces_all_its_metrics() -> None:
    w = Window(300, clock=Clock())
    first = ResultBatch("rubric", "builtin/rubric", "rubric", ["t"])
    first.set_scores(0, [Score(name="helpful", number=0.1), Score(name="safe", number=0.2)])
    w.add(first, key="trace-a")
    again = ResultBatch("rubric", "builtin/rubric", "rubric", ["t"])
    again.set_outcome(0, Outcome.ERROR, "judge failed")
    w.add(again, key="trace-a")
    by_metric = {m.metric: m for m in w.summaries()}
    assert set(by_metric) == {"rubric"}  # helpful and safe no longer count
    assert (by_metric["rubric"].n, by_metric["rubric"].errors) == (0, 1)


def test_keyed_entries_leave_the_window_in_linear_time() -> None:
    clock = Clock()
    w = Window(60, clock=clock)
    for i in range(20_000):
        w.add(one("fb", number=float(i)), key=f"trace-{i}")
    clock.now += 61
    import time

    started = time.perf_counter()
    assert w.find("fb") is None  # all 20,000 expire in one prune
    assert time.perf_counter() - started < 2.0  # a scan per entry took ~60 s at 100k
    assert w._keyed == {}
