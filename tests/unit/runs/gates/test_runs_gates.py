"""Gates: the CEL language of issue 3 item 7, static checks, verdicts and the exit-code rule."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import evalsi
from evalsi.core import Interval, MetricSummary, UserError
from evalsi.runs import (
    EvaluatorMetrics,
    Gate,
    evaluate_gates,
    gate_rows,
    gates_exit_code,
    open_store,
    parse_gates,
)
from evalsi.runs.gates._gates import MAX_GATE_LENGTH, _tokens

EVALUATORS = [
    EvaluatorMetrics("exact-match", "exact-match", ("exact-match",)),
    EvaluatorMetrics("llm-judge", "llm-judge", ("llm-judge",)),
    EvaluatorMetrics("task", "task", ()),
    EvaluatorMetrics("cost", "cost", ("cost", "cost-within-budget")),
    EvaluatorMetrics("x", "x", ()),
    EvaluatorMetrics("classification", "classification", ("accuracy", "f1")),
    EvaluatorMetrics("em-strict", "exact-match", ("exact-match",)),  # an aliased instance
]


def summary(
    evaluator: str,
    metric: str | None = None,
    *,
    kind: Any = "passed",
    n: int = 100,
    mean: float | None = 0.9,
    ci: tuple[float | None, float | None] = (0.83, 0.95),
    scored: int | None = None,
    skipped: int = 0,
    errors: int = 0,
    **extra: Any,
) -> MetricSummary:
    return MetricSummary(
        evaluator=evaluator,
        metric=metric or evaluator,
        kind=kind,
        n=n,
        mean=mean,
        std=None if mean is None else 0.3,
        ci=Interval(ci[0], ci[1], "wilson" if ci[0] is not None else "none"),
        scored=n if scored is None else scored,
        skipped=skipped,
        errors=errors,
        **extra,
    )


METRICS = [
    summary("exact-match", pass_at_k={"1": 0.9, "3": 0.97}, pass_hat_k={"1": 0.9, "3": 0.71}),
    summary("llm-judge", kind="number", mean=0.72, ci=(0.64, 0.8)),
    summary("task", pass_at_k={"1": 0.86, "3": 0.95}, pass_hat_k={"1": 0.86, "3": 0.82}),
    summary("cost", kind="number", mean=0.21, ci=(0.18, 0.24)),
    summary("x", kind="number", n=40, mean=3.5, ci=(3.1, 3.9)),
    summary("classification", "accuracy", kind="number", n=100, mean=0.81, ci=(None, None)),
    summary("classification", "f1", kind="number", n=100, mean=0.77, ci=(0.7, 0.84)),
    summary("em-strict", "exact-match", mean=0.6, ci=(0.5, 0.69)),
]


def verdict(
    expr: str, metrics: list[MetricSummary] | None = None, **rates: float
) -> dict[str, Any]:
    gate = Gate.parse(expr, EVALUATORS)
    return gate.evaluate(METRICS if metrics is None else metrics, **rates).to_dict()


def static_error(expr: str, evaluators: list[EvaluatorMetrics] | None = None) -> str:
    with pytest.raises(UserError) as info:
        Gate.parse(expr, EVALUATORS if evaluators is None else evaluators)
    return str(info.value)


# --- the examples of issue 3 item 7, golden -------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "passed", "value"),
    [
        ("metric('exact-match').mean >= 0.8", True, 0.9),
        ("metric('llm-judge').ci.low > 0.6", True, 0.64),
        ("metric('llm-judge').ci.low > 0.7", False, 0.64),
        ("metric('exact-match').passAtK(3) >= 0.95", True, 0.97),
        ("metric('task').passHatK(3) >= 0.8", True, 0.82),
        ("metric('task').passHatK(3) >= 0.9", False, 0.82),
        ("metric('cost').mean <= 0.25", True, 0.21),
        ("metric('cost').mean <= 0.2", False, 0.21),
        ("metric('x').n >= 30", True, 40),
        ("metric('x').n >= 50", False, 40),
    ],
)
def test_issue_examples_give_golden_verdicts(expr: str, passed: bool, value: float) -> None:
    out = verdict(expr)
    assert out == {
        "expr": expr,
        "passed": passed,
        "verdict": "passed" if passed else "failed",
        "value": value,
        "reason": out["reason"],
    }
    assert str(value) in out["reason"]
    if not passed:
        assert "needs" in out["reason"]


@pytest.mark.parametrize("expr", ["metric('exact-match').passAtK(3)", "metric('x').n"])
def test_an_expression_that_is_not_a_condition_is_refused_with_a_fix(expr: str) -> None:
    # CEL has no truthiness: a bare number cannot gate; the hint shows the comparison to write.
    message = static_error(expr)
    assert "gives a number, not true or false" in message
    assert f"hint: compare it with a threshold, e.g. {expr} >= " in message


def test_metric_selects_own_named_and_slash_forms() -> None:
    assert verdict("metric('classification', 'f1').mean > 0.75")["value"] == 0.77
    assert verdict("metric('classification/accuracy').mean > 0.8")["value"] == 0.81
    assert verdict("metric('exact-match/exact-match').mean == 0.9")["passed"] is True
    assert verdict('metric("cost", "cost").mean < 1.0')["passed"] is True
    # An aliased instance: its own metric keeps the evaluator's metric name.
    assert verdict("metric('em-strict').mean >= 0.8") | {"reason": ""} == {
        "expr": "metric('em-strict').mean >= 0.8",
        "passed": False,
        "verdict": "failed",
        "value": 0.6,
        "reason": "",
    }
    gate = Gate.parse("metric('em-strict').n > 0 && metric('exact-match').n > 0", EVALUATORS)
    assert [r.label for r in gate.refs] == ["em-strict/exact-match", "exact-match/exact-match"]


def test_compound_gates_report_their_truth_value() -> None:
    expr = "metric('exact-match').mean >= 0.8 && metric('cost').mean <= 0.25"
    assert verdict(expr) | {"reason": ""} == {
        "expr": expr,
        "passed": True,
        "verdict": "passed",
        "value": True,
        "reason": "",
    }
    assert verdict("!(metric('cost').mean > 0.2)")["passed"] is False
    assert verdict("metric('x').n > 10 ? metric('x').mean < 4.0 : false")["passed"] is True
    assert verdict("double(metric('x').n) / 100.0 >= 0.4")["value"] == pytest.approx(0.4)
    assert verdict("metric('x').mean * 2.0 > 6.0")["value"] == 7.0


def test_threshold_on_the_left_reads_the_same_way() -> None:
    out = verdict("0.8 <= metric('exact-match').mean")
    assert out["value"] == 0.9
    assert out["reason"] == "0.9 >= 0.8"


def test_one_trial_gives_pass_at_1_as_the_pass_rate() -> None:
    single = [summary("exact-match", mean=0.75)]
    assert verdict("metric('exact-match').passAtK(1) >= 0.7", single)["value"] == 0.75
    assert verdict("metric('exact-match').passHatK(1) >= 0.8", single)["passed"] is False


# --- inconclusive, never failed ------------------------------------------------------------


def test_low_completion_is_inconclusive_with_value_null() -> None:
    thin = [summary("exact-match", n=70, scored=70, skipped=25, errors=5, mean=0.2)]
    out = verdict("metric('exact-match').mean >= 0.8", thin)
    assert out["passed"] is None
    assert out["verdict"] == "inconclusive"
    assert out["value"] is None
    assert "completion 70% is below 80%" in out["reason"]
    assert "25 skipped, 5 errors" in out["reason"]
    # The user may lower the bar, and the measured value then decides.
    assert verdict("metric('exact-match').mean >= 0.8", thin, min_completion_rate=0.7)[
        "verdict"
    ] == ("failed")


def test_completion_counts_lost_infrastructure_tasks() -> None:
    lost = [summary("exact-match", n=70, scored=70, infra_errors=30)]
    assert "30 infra errors" in verdict("metric('exact-match').mean > 0.1", lost)["reason"]


def test_completion_exactly_at_the_bar_is_enough() -> None:
    edge = [summary("exact-match", n=80, scored=80, skipped=20)]
    assert verdict("metric('exact-match').mean > 0.5", edge)["verdict"] == "passed"


def test_evaluator_error_rate_above_the_bar_is_inconclusive() -> None:
    # 12 errors of 100 attempted (skips are not attempts): 12% > 10%.
    noisy = [summary("llm-judge", kind="number", n=88, scored=88, errors=12, mean=0.9)]
    out = verdict("metric('llm-judge').mean > 0.5", noisy)
    assert out["verdict"] == "inconclusive"
    assert "evaluator error rate 12% is above 10% (12 of 100)" in out["reason"]
    assert verdict("metric('llm-judge').mean > 0.5", noisy, max_evaluator_error_rate=0.15)["passed"]


def test_no_scored_values_is_inconclusive() -> None:
    empty = [summary("x", kind="number", n=0, scored=0, mean=None, ci=(None, None))]
    out = verdict("metric('x').n >= 0", empty)
    assert out["verdict"] == "inconclusive"
    assert out["reason"] == "metric('x'): no scored values (n=0)"


def test_undefined_interval_is_inconclusive() -> None:
    out = verdict("metric('classification', 'accuracy').ci.low > 0.7")
    assert out["verdict"] == "inconclusive"
    assert out["value"] is None
    assert out["reason"] == (
        "metric('classification', 'accuracy').ci.low is undefined (interval method: none)"
    )
    # has() lets a gate fall back explicitly.
    fallback = (
        "has(metric('classification', 'accuracy').ci.low)"
        " ? metric('classification', 'accuracy').ci.low > 0.7"
        " : metric('classification', 'accuracy').mean > 0.8"
    )
    assert verdict(fallback)["passed"] is True


def test_undefined_mean_of_a_label_metric_is_inconclusive() -> None:
    labels = [summary("x", kind="label", n=10, mean=None, ci=(None, None), labels={"a": 10})]
    out = verdict("metric('x').mean > 0.5", labels)
    assert out["verdict"] == "inconclusive"
    assert out["reason"] == "metric('x').mean is undefined (label metric, n=10)"


def test_pass_at_k_without_enough_trials_is_inconclusive() -> None:
    out = verdict("metric('exact-match').passAtK(5) >= 0.9")
    assert out["verdict"] == "inconclusive"
    assert "passAtK(5) is undefined: this run has it for k in 1, 3" in out["reason"]
    single = [summary("task")]
    assert (
        "needs at least 3 trials" in verdict("metric('task').passHatK(3) > 0.5", single)["reason"]
    )
    number = verdict("metric('llm-judge').passAtK(1) > 0.5")["reason"]
    assert "pass@k needs a pass/fail metric" in number


def test_a_declared_metric_the_run_never_produced_is_inconclusive() -> None:
    out = verdict("metric('cost', 'cost-within-budget').mean > 0.5")
    assert out["verdict"] == "inconclusive"
    assert "this run has no such metric (cost produced cost)" in out["reason"]


def test_inconclusive_metric_decides_even_in_an_unevaluated_branch() -> None:
    thin = [*METRICS[:3], summary("cost", kind="number", n=1, scored=1, skipped=9, mean=9.0)]
    out = verdict("metric('exact-match').mean > 0.5 || metric('cost').mean < 1.0", thin)
    assert out["verdict"] == "inconclusive"


def test_runtime_arithmetic_errors_are_inconclusive() -> None:
    out = verdict("metric('x').n / metric('x').errors > 1")
    assert out["verdict"] == "inconclusive"
    assert out["reason"].startswith("could not evaluate: division by zero")


# --- static checks, before any data --------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "needle"),
    [
        ("metric('exact-match').mean >=", "syntax error: mismatched input '<EOF>' at column 30"),
        ("metric('exact-match'", "syntax error: missing ')' at '<EOF>' at column 21"),
        ("metric('exact-match').mean @ 1", "at column 28"),
        ("metric('nope').mean > 0.5", "no evaluator 'nope' in this run at column 8"),
        ("metric('exact-match', 'f1').mean > 0.5", "has no metric 'f1' at column 23"),
        ("metric('classification').mean > 0.5", "'classification' has several metrics at column 8"),
        ("metric('exact-match').avg > 0.5", "unknown field 'avg' at column 23"),
        ("metric('exact-match').low > 0.5", "'low' is a field of ci: write .ci.low at column 23"),
        ("metric('exact-match').ci > 0.5", "the types do not fit"),
        ("mean(metric('x').n) > 1", "unknown function 'mean'"),
        ("metric('x').n > threshold", "unknown name 'threshold' at column 17"),
        (
            "metric('x').passAtK(k) > 0.5",
            "passAtK(k) takes a whole number, e.g. passAtK(3) at column 21",
        ),
        ("metric('x').passAtK(0) > 0.5", "passAtK(k) needs 1 <= k"),
        ("passAtK(metric('x'), 3) > 0.5", "write metric('...').passAtK(k)"),
        ("metric('x').mean.passHatK(2) > 0.5", "passHatK(k) applies to metric(...)"),
        ("metric('x').size() > 1", "unknown method .size()"),
        ("metric(name) > 1", "metric() takes one or two quoted names at column 8"),
        ("metric('x', 'x', 'x').n > 1", "metric() takes one or two quoted names at column 16"),
        ("metric(b'x').n > 1", "metric() takes text, not bytes"),
        ("metric.n > 1", "metric needs a name"),
        ("1 < 2", "the gate reads no metric"),
        ("metric('x').mean * 100 >= 80", "Unsupported operation: float * int"),
        ("metric('x').mean > 'high'", "the types do not fit"),
        ("[1, 2].all(v, v > 0) && metric('x').n > 1", "unknown method .all()"),
        ("metric('x')['avg'] > 1", "no field 'avg'"),
        ("size(metric('x').mean) > 1", "size() does not take that type of argument at column 1"),
        ("  ", "the expression is empty"),
    ],
)
def test_static_errors_name_the_gate_and_the_position(expr: str, needle: str) -> None:
    message = static_error(expr)
    assert message.startswith("gate 1 `"), message
    assert needle in message, message


def test_static_errors_name_line_and_column_in_multiline_gates() -> None:
    expr = "metric('exact-match').mean >= 0.8 &&\n  metric('nope').n > 10"
    message = static_error(expr)
    assert "no evaluator 'nope' in this run at line 2, column 10" in message
    assert "hint: the evaluators are: exact-match, llm-judge" in message
    bad = "metric('x').n > 1 &&\n  metric('x').n >> 3"
    assert "at line 2, column 18" in static_error(bad)


def test_later_gates_are_numbered() -> None:
    with pytest.raises(UserError, match=r"^gate 2 `metric\('y'\)"):
        parse_gates(["metric('x').n > 1", "metric('y').n > 1"], EVALUATORS)


def test_length_and_count_are_capped() -> None:
    long = "metric('x').n > 1" + " && metric('x').n > 1" * 200
    assert len(long) > MAX_GATE_LENGTH
    assert "the limit is 2,000" in static_error(long)
    with pytest.raises(UserError, match="the limit is 100"):
        parse_gates(["metric('x').n > 1"] * 101, EVALUATORS)


def test_rates_and_types_are_checked() -> None:
    with pytest.raises(UserError, match="min_completion_rate must be a number between 0 and 1"):
        parse_gates([], EVALUATORS, min_completion_rate=1.5)
    with pytest.raises(UserError, match="max_evaluator_error_rate"):
        parse_gates([], EVALUATORS, max_evaluator_error_rate=-0.1)
    with pytest.raises(UserError, match="gate 1 must be a string, got int"):
        parse_gates([3], EVALUATORS)  # type: ignore[list-item]
    # One string is one gate, not a list of characters.
    assert len(parse_gates("metric('x').n > 1", EVALUATORS)) == 1


def test_lone_surrogates_are_a_user_error() -> None:
    assert "not valid Unicode" in static_error("metric('x').n > 1 \ud800")


# --- many gates, exit code, rendering ------------------------------------------------------


def test_evaluate_gates_gives_the_json_shape() -> None:
    gates = parse_gates(["metric('x').n >= 30", "metric('x').mean > 9.0"], EVALUATORS)
    out = evaluate_gates(gates, METRICS)
    assert [g["verdict"] for g in out] == ["passed", "failed"]
    for g in out:
        assert set(g) == {"expr", "passed", "verdict", "value", "reason"}
    assert json.loads(json.dumps(out)) == out


@pytest.mark.parametrize(
    ("verdicts", "code"),
    [
        ([], 0),
        (["passed"], 0),
        (["passed", "passed"], 0),
        (["passed", "failed"], 1),
        (["failed", "inconclusive"], 1),  # what was measured already breaks the bar
        (["passed", "inconclusive"], 2),
        (["inconclusive"], 2),
    ],
)
def test_exit_code_rule(verdicts: list[str], code: int) -> None:
    assert gates_exit_code([{"verdict": v} for v in verdicts]) == code


def test_gate_rows_use_marks_with_an_ascii_fallback() -> None:
    results: list[dict[str, Any]] = [
        {"expr": "a", "passed": True, "verdict": "passed", "value": 0.9, "reason": "0.9 >= 0.8"},
        {"expr": "b", "passed": False, "verdict": "failed", "value": True, "reason": "r"},
        {"expr": "c", "passed": None, "verdict": "inconclusive", "value": None, "reason": "thin"},
    ]
    fancy = gate_rows(results, ascii_only=False)
    assert [r[0] for r in fancy] == ["✔ passed", "✘ failed", "? inconclusive"]
    assert [r[2] for r in fancy] == ["0.9", "true", "-"]
    plain = gate_rows(results, ascii_only=True)
    assert [r[0] for r in plain] == ["+ passed", "x failed", "? inconclusive"]
    assert all(cell.isascii() for row in plain for cell in row)
    # Older stored dicts without "verdict" still render.
    assert gate_rows([{"expr": "d", "passed": None, "value": None}], ascii_only=True)[0][0] == (
        "? inconclusive"
    )


# --- through evalsi.evaluate ---------------------------------------------------------------


def rows(n: int, hits: int) -> list[dict[str, Any]]:
    return [{"id": str(i), "output": "a" if i < hits else "b", "reference": "a"} for i in range(n)]


def test_evaluate_stores_gates_in_the_result_and_the_run_summary(tmp_path: Path) -> None:
    db = tmp_path / "e.db"
    result = evalsi.evaluate(
        rows(40, 30),
        ["exact-match"],
        store=db,
        gates=["metric('exact-match').mean >= 0.7", "metric('exact-match').ci.low >= 0.7"],
    )
    mean = 30 / 40  # independent: 30 hits of 40
    assert result.metric("exact-match").mean == mean
    assert [(g["verdict"], g["value"]) for g in result.gates] == [
        ("passed", mean),
        ("failed", result.metric("exact-match").ci.low),
    ]
    assert result.exit_code == 1
    assert "✘ failed" in result.table() or "x failed" in result.table()
    assert "**gates**" in result.markdown()
    run = open_store(db, create=False).get_run(result.run_id)
    assert run.summary is not None
    assert run.summary["gates"] == result.gates
    assert run.spec["gates"] == [g["expr"] for g in result.gates]
    assert run.spec["min_completion_rate"] == 0.8


def test_evaluate_applies_the_rates(tmp_path: Path) -> None:
    data = [*rows(10, 10), *({"id": f"s{i}", "output": "a"} for i in range(5))]  # 5 skipped
    gate = "metric('exact-match').mean >= 0.9"
    strict = evalsi.evaluate(data, ["exact-match"], store=":memory:", gates=[gate])
    assert strict.gates[0]["verdict"] == "inconclusive"
    assert strict.exit_code == 2
    lenient = evalsi.evaluate(
        data, ["exact-match"], store=":memory:", gates=[gate], min_completion_rate=0.5
    )
    assert lenient.gates[0]["verdict"] == "passed"


def test_a_bad_gate_fails_before_any_data_is_read_or_run_stored(tmp_path: Path) -> None:
    db = tmp_path / "e.db"
    with pytest.raises(UserError, match=r"gate 1 .*no evaluator 'exact-matc'"):
        evalsi.evaluate(
            tmp_path / "missing.jsonl",  # never opened: the gate is checked first
            ["exact-match"],
            store=db,
            gates=["metric('exact-matc').mean > 0.5"],
        )
    assert not db.exists()


def test_no_gates_means_an_empty_list_and_exit_0() -> None:
    result = evalsi.evaluate(rows(3, 3), ["exact-match"], store=":memory:")
    assert result.gates == []
    assert result.exit_code == 0
    assert "gates" not in result.table()


# --- properties -----------------------------------------------------------------------------

_PIECES = [
    "metric", "(", ")", "'x'", '"exact-match"', "'cost'", "'classification/f1'", ",", ".",
    "mean", "ci", "low", "high", "n", "errors", "passAtK", "passHatK", "(3)", "0.5", "3", "1u",
    ">=", "<", "==", "&&", "||", "!", "-", "+", "*", "/", "%", "?", ":", "[", "]", "{", "}",
    "in", "true", "null", "has", "size", "double", "x", "r'a'", "b'a'", "'''", "\\", "\n", " ",
    "//", "é", "0x1F", ".5", "1e3",
]  # fmt: skip


def _soup() -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(_PIECES), max_size=16).map("".join)


_NAMES = ["'exact-match'", '"task"', "'classification', 'f1'", "'cost/cost'", "r'x'", "'nope'"]
_SUFFIXES = [".mean", ".n", ".errors", ".ci.low", ".ci.high", ".passAtK(3)", ".passHatK(7)", ""]
_LITERALS = ["0.5", "1", "30", "1u", "-1", "true", "null", "'a'", "[1, 2]", "{'a': 1}"]
_OPS = [">=", "<", "==", "!=", "in", "&&", "||", "+", "-", "*", "/", "%"]


def _gates() -> st.SearchStrategy[str]:
    """Mostly well-formed gates, so that evaluation paths are explored, not only the parser."""
    metric = st.builds("metric({}){}".format, st.sampled_from(_NAMES), st.sampled_from(_SUFFIXES))
    leaf = st.one_of(metric, st.sampled_from(_LITERALS))
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.builds("{} {} {}".format, inner, st.sampled_from(_OPS), inner),
            st.builds("({})".format, inner),
            st.builds("{}({})".format, st.sampled_from(["!", "-", "size", "double", "has"]), inner),
            st.builds("{} ? {} : {}".format, inner, inner, inner),
        ),
        max_leaves=8,
    )


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=80), _soup(), _gates()))
def test_any_string_is_a_gate_or_a_user_error(expr: str) -> None:
    try:
        gate = Gate.parse(expr, EVALUATORS)
    except UserError as e:
        message = str(e)
        assert message.startswith("gate 1"), message
        return
    out = gate.evaluate(METRICS).to_dict()
    assert out["verdict"] in ("passed", "failed", "inconclusive")
    assert out["passed"] in (True, False, None)
    json.dumps(out)


@settings(max_examples=300, deadline=None)
@given(st.one_of(_soup(), _gates()))
def test_the_position_finder_reads_everything_cel_parses(expr: str) -> None:
    import cel

    try:
        cel.compile(expr)
    except ValueError:
        return
    assert not isinstance(_tokens(expr), int), expr


def test_reasons_never_show_internal_keys() -> None:
    for expr in ("metric('exact-match').passAtK(9) > 0.5", "metric('x').mean > 1.0"):
        assert not re.search(r"__key", verdict(expr)["reason"])
