"""``assert_metric`` and ``assert_gates``: a run's statistics as pytest assertions.

A mean above a threshold is weak evidence when its interval reaches below it; ``strict=True``
asks the whole 95% interval to clear the threshold (its lower bound for ``>=``/``>``, its
upper bound for ``<=``/``<``), as a gate on ``ci.low`` does.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from evalsi.core import UserError
from evalsi.runs import format_number

if TYPE_CHECKING:
    from evalsi.core import MetricSummary
    from evalsi.runs import ScoreResult

OPERATORS: Final[dict[str, Callable[[float, float], bool]]] = {
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
}


def assert_metric(
    result: ScoreResult,
    name: str,
    op: str,
    threshold: float,
    *,
    strict: bool = False,
) -> MetricSummary:
    """Fail the test unless metric ``name`` of ``result`` compares to ``threshold`` by ``op``.

    Args:
        result: what ``evalsi.evaluate`` (or the ``evalsi_eval`` fixture) returned.
        name: ``"evaluator/metric"``, or ``"evaluator"`` for its own (or only) metric.
        op: ``">="``, ``">"``, ``"<="`` or ``"<"``.
        threshold: the number the mean is compared with.
        strict: compare the interval's far bound instead of the mean, so a mean that clears
            the threshold while its interval straddles it fails.

    Returns:
        The metric's summary (``mean``, ``ci``, ``n``), for further checks.

    Raises:
        AssertionError: the comparison does not hold; the message shows the mean, its interval,
            n and the method.
        UserError: an unknown metric (the message lists the run's), operator or threshold.

    Example:
        >>> import evalsi
        >>> from evalsi.testing import assert_metric
        >>> r = evalsi.evaluate([{"output": "a", "reference": "a"}], ["exact-match"],
        ...                     store=":memory:")
        >>> assert_metric(r, "exact-match", ">=", 0.5).n
        1
    """
    __tracebackhide__ = True  # pytest shows the test's line, not this one
    compare = OPERATORS.get(op)
    if compare is None:
        raise UserError(f"assert_metric: unknown operator {op!r}", hint="use >=, >, <= or <")
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise UserError(f"assert_metric: the threshold {threshold!r} is not a number")
    m = _find(result, name)
    label = _label(m)
    if m.kind == "label":
        raise UserError(
            f"assert_metric: {label} is a label metric: it has counts per label, no mean",
            hint="compare a pass/fail or numeric metric, or read result.metric(...).labels",
        )
    shown = _shown(m)
    if m.mean is None or m.n == 0:
        raise AssertionError(
            f"{label}: no scored values ({shown}); cannot compare {op} {threshold}"
        )
    if strict:
        bound = m.ci.low if op in (">=", ">") else m.ci.high
        which = "lower" if op in (">=", ">") else "upper"
        if bound is None:
            raise AssertionError(f"{label}: {shown}: no interval, so strict {op} cannot hold")
        if not compare(bound, threshold):
            side = "straddles" if compare(m.mean, threshold) else "misses"
            raise AssertionError(
                f"{label}: {shown}: the interval {side} {format_number(threshold)}: its {which} "
                f"bound {format_number(bound)} is not {op} {format_number(threshold)} (strict)"
            )
        return m
    if not compare(m.mean, threshold):
        raise AssertionError(f"{label}: {shown}: the mean is not {op} {format_number(threshold)}")
    return m


def assert_gates(result: ScoreResult) -> None:
    """Fail the test unless every gate of the run passed (``gates=`` of ``evaluate``); the
    message lists each gate that did not, with its value and reason."""
    __tracebackhide__ = True
    if not result.gates:
        raise UserError("assert_gates: the run has no gates", hint="pass gates=[...] to evaluate")
    bad = [
        g for g in result.gates if g.get("verdict", "passed" if g.get("passed") else "") != "passed"
    ]
    if bad:
        lines = [
            f"{g.get('verdict') or 'failed'}: {g.get('expr')} (value {g.get('value')}; "
            f"{g.get('reason') or '-'})"
            for g in bad
        ]
        raise AssertionError(
            f"{len(bad)} of {len(result.gates)} gates did not pass:\n" + "\n".join(lines)
        )


def _find(result: ScoreResult, name: str) -> MetricSummary:
    if not isinstance(name, str) or not name:
        raise UserError(f"assert_metric: a metric name is a non-empty string, got {name!r}")
    exact = [m for m in result.metrics if name in (f"{m.evaluator}/{m.metric}", m.evaluator)]
    own = [m for m in exact if f"{m.evaluator}/{m.metric}" == name or m.metric == m.evaluator]
    found = own or exact
    if len(found) == 1:
        return found[0]
    known = ", ".join(_label(m) for m in result.metrics) or "none"
    if found:
        raise UserError(
            f"assert_metric: {name!r} has several metrics; name one of: "
            + ", ".join(_label(m) for m in found)
        )
    raise UserError(f"assert_metric: no metric {name!r} in run {result.run_id}; known: {known}")


def _label(m: MetricSummary) -> str:
    return f"{m.evaluator}/{m.metric}"


def _shown(m: MetricSummary) -> str:
    ci = ""
    if m.ci.low is not None and m.ci.high is not None:
        ci = f", {m.ci.level:.0%} CI [{format_number(m.ci.low)}, {format_number(m.ci.high)}]"
    return f"mean {format_number(m.mean)}{ci} ({m.ci.method}, n={m.n})"
