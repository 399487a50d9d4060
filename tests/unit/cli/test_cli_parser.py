"""A mistyped flag or command (issue 16): the usage of the command it was typed for, a "did you
mean", exit 2, and nothing on stdout. Driven through ``evalsi.cli.main`` with the real parser."""

from __future__ import annotations

import pytest

from evalsi.cli import main


def _error(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    assert exit_info.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "Traceback" not in err
    return err.splitlines()


def test_mistyped_flag_shows_the_subcommands_usage_and_a_suggestion(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # --data and --evaluators are missing too: the typo is reported, since it is the cause.
    err = _error(capsys, "eval", "--evaluater", "x")
    assert err[0].startswith("usage: evalsi eval ")
    assert "evalsi eval: error: unrecognized arguments: --evaluater" in err
    assert err[-1].startswith("  hint: did you mean --evaluators?")


def test_mistyped_flag_with_a_value_and_after_good_flags(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _error(capsys, "eval", "--data", "d.jsonl", "--evaluators", "a", "--formt=json")
    assert "evalsi eval: error: unrecognized arguments: --formt=json" in err
    assert "did you mean --format?" in err[-1]


def test_nested_subcommand_reports_its_own_usage(capsys: pytest.CaptureFixture[str]) -> None:
    err = _error(capsys, "runs", "list", "--limt", "3")
    assert err[0].startswith("usage: evalsi runs list ")
    assert "did you mean --limit?" in err[-1]


def test_mistyped_subcommand_and_choice(capsys: pytest.CaptureFixture[str]) -> None:
    err = _error(capsys, "evl", "--data", "x")
    assert err[0].startswith("usage: evalsi ")
    assert "invalid choice: 'evl'" in "\n".join(err)
    assert err[-1] == "  hint: did you mean 'eval'?"
    err = _error(capsys, "compare", "a", "b", "--format", "tabel")
    assert err[0].startswith("usage: evalsi compare ")
    assert err[-1] == "  hint: did you mean 'table'?"


def test_nothing_close_still_points_at_help(capsys: pytest.CaptureFixture[str]) -> None:
    err = _error(capsys, "eval", "--data", "d", "--evaluators", "a", "--zzzzzzzz")
    assert err[-1] == "  hint: `evalsi eval --help` lists every option"
    err = _error(capsys, "qqqqqq")
    assert err[-1] == "  hint: `evalsi --help` lists them"
    err = _error(capsys, "eval", "--data", "d", "--evaluators", "a", "stray")
    assert err[-1] == "evalsi eval: error: unrecognized arguments: stray"


def test_good_arguments_are_untouched(capsys: pytest.CaptureFixture[str]) -> None:
    # Abbreviations, negative numbers and a short flag are all known: no false alarms.
    err = _error(capsys, "compare", "a", "b", "--alph", "-0.5", "-q")
    assert "unrecognized arguments: -q" in "\n".join(err)
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", "--help"])
    assert exit_info.value.code == 0
    assert "--baseline" in capsys.readouterr().out
