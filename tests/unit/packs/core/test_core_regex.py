"""regex: modes, flags, unicode and bind-time validation of the pattern."""

from __future__ import annotations

from typing import Any

import pytest

from evalsi.core import Content, EvaluationResult, Outcome, ParamError, Record
from evalsi.evaluators import RecordRunner, make_runner
from evalsi.packs import builtin_registry

REG = builtin_registry(entry_points=False)


def run(output: str | None, **params: Any) -> EvaluationResult:
    runner = make_runner(REG.resolve("regex").bind(params))
    assert isinstance(runner, RecordRunner)
    record = Record(id="r", output=None if output is None else Content.of_text(output))
    (result,) = runner.run([record])
    return result


def passed(output: str, **params: Any) -> bool:
    result = run(output, **params)
    assert result.outcome is Outcome.SCORED, result.reason
    (score,) = result.scores
    assert score.name == "regex"
    assert isinstance(score.passed, bool)
    return score.passed


def test_search_is_the_default() -> None:
    assert passed("The answer is 42.", pattern=r"\d+")
    assert not passed("The answer is forty-two.", pattern=r"\d+")


@pytest.mark.parametrize(
    ("mode", "text", "expected"),
    [
        ("search", "x 42 y", True),
        ("match", "x 42 y", False),
        ("match", "42 y", True),
        ("fullmatch", "42 y", False),
        ("fullmatch", "42", True),
    ],
)
def test_modes(mode: str, text: str, expected: bool) -> None:
    assert passed(text, pattern=r"\d+", mode=mode) is expected


def test_ignore_case() -> None:
    assert not passed("YES", pattern="^yes$")
    assert passed("YES", pattern="^yes$", ignore_case=True)


def test_multiline_and_dotall() -> None:
    text = "header\nANSWER: B\nfooter"
    assert not passed(text, pattern="^ANSWER: [A-D]$")
    assert passed(text, pattern="^ANSWER: [A-D]$", multiline=True)
    assert not passed(text, pattern="header.*footer")
    assert passed(text, pattern="header.*footer", dotall=True)


def test_unicode_classes() -> None:
    # \w, \d and \s keep Python's Unicode meaning (RE2's own are ASCII).
    assert passed("Ответ: да", pattern=r"^\w+: \w+$")
    assert passed("価格は１２円", pattern=r"\d+円")
    assert passed("a\u3000b", pattern=r"^a\sb$")
    assert not passed("Ответ", pattern=r"\W")
    assert passed("Ответ", pattern=r"^\p{Cyrillic}+$")


def test_ignore_case_folds_unicode() -> None:
    assert passed("ÉTÉ", pattern="^été$", ignore_case=True)
    assert not passed("ÉTÉ", pattern="^été$")


def test_flags_compose_with_inline_flags() -> None:
    text = "a\nB"
    assert passed(text, pattern="(?i)^b$", multiline=True)
    assert passed(text, pattern="a.b", dotall=True, ignore_case=True)


def test_invalid_mode_is_a_param_error() -> None:
    with pytest.raises(ParamError, match="regex: param 'mode' must be one of"):
        REG.resolve("regex").bind({"pattern": "x", "mode": "find"})


def test_invalid_pattern_is_a_param_error_at_bind() -> None:
    with pytest.raises(ParamError) as info:
        REG.resolve("regex").bind({"pattern": "(unclosed"})
    assert info.value.message == (
        "regex: param 'pattern': '(unclosed' is not a valid regular expression: "
        "missing ): (unclosed"
    )


@pytest.mark.parametrize(
    ("pattern", "hint"),
    [
        (r"(['\"])x\1", "no backreferences"),
        (r"foo(?=bar)", "no lookahead"),
        (r"(?<!x)foo", "no lookbehind"),
        (r"a++", "possessive quantifiers are not needed"),
        ("a" * 4097, None),
        ("", None),
    ],
)
def test_patterns_re2_refuses_are_param_errors_naming_the_pattern(
    pattern: str, hint: str | None
) -> None:
    with pytest.raises(ParamError) as info:
        REG.resolve("regex").bind({"pattern": pattern})
    message = info.value.message
    assert message.startswith("regex: param 'pattern': ")
    if hint is None:
        assert f"expected a regular expression of 1-4096 characters, got {len(pattern)}" in message
    else:
        assert repr(pattern) in message
        assert hint in (info.value.hint or "")


def test_catastrophic_backtracking_pattern_is_linear() -> None:
    """Python's re takes tens of seconds here (2**28 paths); RE2 takes microseconds. The
    guard is a generous timeout, not a speed target: it only fails on exponential time."""
    import threading

    done: list[bool] = []
    worker = threading.Thread(
        target=lambda: done.append(passed("a" * 28 + "!", pattern=r"^(a+)+$")), daemon=True
    )
    worker.start()
    worker.join(timeout=5)
    assert done == [False]
    assert passed("a" * 100_000, pattern=r"^(a+)+$")


def test_pattern_is_required() -> None:
    with pytest.raises(ParamError, match="regex: missing required param"):
        REG.resolve("regex").bind({})


def test_requires_output() -> None:
    result = run(None, pattern="x")
    assert result.outcome is Outcome.SKIPPED
    assert result.reason == "record has no output"
