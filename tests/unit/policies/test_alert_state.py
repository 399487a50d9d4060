"""An alert's state machine: fire on the transition to true, re-arm once false, and never
lose a firing to the cooldown (a condition still true after it fires then)."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from evalsi.policies._alerts import AlertState


def test_fires_once_while_true_and_again_after_false() -> None:
    a = AlertState()
    assert [a.update(h, t, 0.0) for t, h in enumerate([True, True, False, True, True])] == [
        True,
        False,
        False,
        True,
        False,
    ]
    assert a.fired == 2


def test_a_condition_true_through_the_cooldown_fires_when_it_ends() -> None:
    a = AlertState()
    assert a.update(True, 0.0, 100.0)
    assert not a.update(False, 10.0, 100.0)
    assert not a.update(True, 20.0, 100.0)  # inside the cooldown: held back, still armed
    assert not a.firing
    assert not a.update(True, 50.0, 100.0)
    assert a.update(True, 100.0, 100.0)  # cooldown over, still true: fires now
    assert a.fired == 2
    assert a.firing


@given(st.lists(st.tuples(st.booleans(), st.floats(0, 10)), max_size=60), st.floats(0, 30))
def test_firings_are_cooldown_apart_and_only_when_true(
    steps: list[tuple[bool, float]], cooldown: float
) -> None:
    a, now, fired_at = AlertState(), 0.0, []
    for holds, dt in steps:
        now += dt
        if a.update(holds, now, cooldown):
            assert holds
            fired_at.append(now)
    assert all(b - x >= cooldown for x, b in itertools.pairwise(fired_at))
    assert a.fired == len(fired_at)
