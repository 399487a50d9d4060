"""Gates on sandbox isolation: ``metric('x').isolation >= namespaced`` passes, fails with the
level and driver named, and cannot judge (never passes) when isolation was not reported; bad
levels are caught before any data is read, with their position."""

from __future__ import annotations

from typing import Any

import pytest

import evalsi
from evalsi.core import UserError
from evalsi.runs import EvaluatorMetrics, Gate, IsolationSummary, parse_gates
from tests.unit.runs.test_isolation_records import (
    BWRAP,
    BWRAP_PARTIAL,
    FIRECRACKER,
    LANDLOCK,
    iso_exec,
    iso_lint,
    records,
    row,
)

EVALUATORS = [
    EvaluatorMetrics("iso-exec", "iso-exec", ("iso-exec",)),
    EvaluatorMetrics("exact-match", "exact-match", ("exact-match",)),
]


def _evaluate(rows: list[dict[str, Any]], *gates: str, evaluators: Any = None) -> Any:
    return evalsi.evaluate(
        records(rows),
        evaluators if evaluators is not None else [iso_exec, iso_lint],
        gates=list(gates),
        store=":memory:",
    )


def _verdicts(result: Any) -> list[tuple[str, Any, str]]:
    return [(g["verdict"], g["value"], g["reason"]) for g in result.gates]


def test_a_level_gate_passes_at_or_above_and_fails_below_naming_level_and_driver() -> None:
    rows = [row(i, BWRAP, LANDLOCK if i == 2 else FIRECRACKER) for i in range(5)]
    result = _evaluate(
        rows,
        "metric('iso-exec').isolation >= namespaced",
        "metric('iso-lint').isolation >= namespaced",
        "namespaced <= metric('iso-exec').isolation",
        "metric('iso-lint').isolation > confined",
    )
    assert _verdicts(result) == [
        ("passed", 2, "iso-exec ran at namespaced (bwrap), >= namespaced"),
        (
            "failed",
            1,
            "iso-lint ran at confined (landlock), below namespaced; "
            "enforcement partial: missing cgroup-pids",
        ),
        ("passed", 2, "iso-exec ran at namespaced (bwrap), >= namespaced"),
        (
            "failed",
            1,
            "iso-lint ran at confined (landlock), not above confined; "
            "enforcement partial: missing cgroup-pids",
        ),
    ]
    assert result.exit_code == 1


def test_a_level_gate_cannot_judge_an_evaluator_that_reported_no_isolation() -> None:
    result = _evaluate(
        [row(i) for i in range(4)],
        "metric('iso-exec').isolation >= none",
    )
    (gate,) = result.gates
    assert gate["verdict"] == "inconclusive"
    assert gate["passed"] is None
    assert gate["reason"] == (
        "metric('iso-exec').isolation is undefined: no score of iso-exec "
        "reported sandbox isolation (it ran nothing in the sandbox, or did not say how)"
    )
    assert result.exit_code == 2


def test_a_level_gate_cannot_judge_while_some_scored_results_are_unreported() -> None:
    # Three results ran at vm, one did not say: the unreported one may have run anywhere.
    rows = [row(0, FIRECRACKER), row(1, FIRECRACKER), row(2, FIRECRACKER), row(3)]
    result = _evaluate(rows, "metric('iso-exec').isolation >= confined")
    (gate,) = result.gates
    assert gate["verdict"] == "inconclusive"
    assert gate["reason"] == (
        "metric('iso-exec').isolation is undefined: 1 of 4 scored results of "
        "iso-exec reported no sandbox isolation (the others ran at vm (firecracker))"
    )


def test_enforced_refuses_partial_enforcement() -> None:
    full = _evaluate(
        [row(0, BWRAP), row(1, FIRECRACKER)],
        "metric('iso-exec').isolation >= namespaced && metric('iso-exec').enforced",
    )
    partial = _evaluate(
        [row(0, BWRAP), row(1, BWRAP_PARTIAL)],
        "metric('iso-exec').isolation >= namespaced && metric('iso-exec').enforced",
        "metric('iso-exec').enforced == false",
    )
    assert [g["verdict"] for g in full.gates] == ["passed"]
    assert [g["verdict"] for g in partial.gates] == ["failed", "passed"]


def test_level_constants_combine_with_other_fields() -> None:
    rows = [row(0, FIRECRACKER, ok=True), row(1, FIRECRACKER, ok=False)]
    result = _evaluate(
        rows,
        "metric('iso-exec').mean >= 0.5 && metric('iso-exec').isolation == vm",
        "metric('iso-exec').isolation >= kernel || metric('iso-exec').mean > 0.9",
    )
    assert [g["verdict"] for g in result.gates] == ["passed", "passed"]


def test_gate_evaluate_without_isolation_data_is_inconclusive() -> None:
    # Callers that pass no isolation (an older server path) must not pass a level gate.
    result = _evaluate([row(0, FIRECRACKER)], "metric('iso-exec').mean >= 0.5")
    (gate,) = parse_gates(
        "metric('iso-exec').isolation >= none",
        [EvaluatorMetrics("iso-exec", "iso-exec", ("iso-exec",))],
    )
    unknown = gate.evaluate(result.metrics)
    assert (unknown.verdict, unknown.value) == ("inconclusive", None)
    assert (
        unknown.reason == "isolation is undefined: this run's sandbox isolation was not collected"
    )
    judged = gate.evaluate(result.metrics, isolation=result.isolation)
    assert (judged.verdict, judged.value) == ("passed", 4)


def test_an_unreadable_report_fails_a_level_gate() -> None:
    rows = [row(0, FIRECRACKER), row(1, {"driver": "mystery", "level": "ultra"})]
    result = _evaluate(rows, "metric('iso-exec').isolation >= confined")
    (gate,) = result.gates
    assert gate["verdict"] == "failed"
    assert gate["reason"].startswith("iso-exec ran at none (mystery), below confined")
    assert "unknown isolation level 'ultra'" in gate["reason"]


def test_isolation_summary_is_what_the_gate_reads() -> None:
    (gate,) = parse_gates("metric('iso-exec').isolation >= kernel", EVALUATORS)
    base = _evaluate([row(0, BWRAP)], "metric('iso-exec').mean >= 0")
    vm = IsolationSummary("iso-exec", "vm", "fc", ("fc",), "full", (), sandboxed=1)
    assert gate.evaluate(base.metrics, isolation=[vm]).verdict == "passed"
    assert gate.evaluate(base.metrics, isolation=base.isolation).verdict == "failed"


# -- static errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "needles"),
    [
        (
            "metric('iso-exec').isolation >= bogus",
            ["unknown name 'bogus'", "none, confined, namespaced, kernel, vm", "at column 33"],
        ),
        ("isolation >= vm", ["'isolation' is a field of metric(...)", "at column 1"]),
        (
            "metric('iso-exec').isolation >= vm()",
            ["unknown function 'vm'", "at column 33"],
        ),
        ("metric('iso-exec').isolation >= 'namespaced'", ["the types do not fit"]),
        ("metric('iso-exec').isolation", ["gives a number, not true or false"]),
        ("metric('iso-exec').isolaton >= vm", ["unknown field 'isolaton'", "column 20"]),
    ],
)
def test_bad_isolation_gates_are_refused_before_any_data(expr: str, needles: list[str]) -> None:
    with pytest.raises(UserError) as caught:
        Gate.parse(expr, EVALUATORS)
    message = caught.value.message
    for needle in needles:
        assert needle in message, message


def test_a_bare_isolation_gate_hints_at_a_level_threshold() -> None:
    with pytest.raises(UserError) as caught:
        Gate.parse("metric('iso-exec').isolation", EVALUATORS)
    assert caught.value.hint is not None
    assert caught.value.hint.endswith(">= namespaced")


def test_the_help_names_the_levels() -> None:
    with pytest.raises(UserError) as caught:
        Gate.parse("metric('iso-exec').mean >= nope", EVALUATORS)
    assert "isolation" in (caught.value.hint or "")
    assert "none < confined < namespaced < kernel < vm" in (caught.value.hint or "")
