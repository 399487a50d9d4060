"""The pytest plugin, run by pytest itself (``pytester``) on small test files: the fixture, the
assertions and their messages, the store, the session's summary and report."""

from __future__ import annotations

import json
import re
import sys
import tomllib
from pathlib import Path

import pytest

from evalsi.store import SqlStore

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[3]


def _plugin_args() -> tuple[str, ...]:
    """The plugin by its entry point when evalsi is installed with it (then ``-p`` would load
    the module a second time), else by name: the same module either way."""
    from importlib.metadata import entry_points

    installed = any(e.value == "evalsi.testing._plugin" for e in entry_points(group="pytest11"))
    return ("-p", "no:cacheprovider") + (() if installed else ("-p", "evalsi.testing._plugin"))


PLUGIN = _plugin_args()


@pytest.fixture(autouse=True, scope="module")
def _imported() -> None:
    """What the inner sessions import, imported here first: pytester drops the modules an
    in-process run imported, and numpy cannot be imported twice in one process."""
    import evalsi
    from evalsi.reports import render_report

    store = SqlStore.open(":memory:")
    try:
        run = evalsi.evaluate([{"output": "a", "reference": "a"}], ["exact-match"], store=store)
        render_report(store, run.run_id, fmt="md", summary=True)
        evalsi.evaluate([{"output": "a", "reference": "a"}], ["contains"],
                        store=store, gates=["metric('contains').mean >= 0"])  # fmt: skip
    finally:
        store.close()


def _data(pytester: pytest.Pytester, name: str, right: int, n: int = 20) -> None:
    rows = [
        {"id": f"r{i}", "output": "yes" if i < right else "no", "reference": "yes"}
        for i in range(n)
    ]
    pytester.path.joinpath(name).write_text("".join(json.dumps(r) + "\n" for r in rows))


HEAD = """
from pathlib import Path
from evalsi.testing import assert_gates, assert_metric
HERE = Path(__file__).parent
"""


def test_passing_and_failing_metrics_with_their_intervals(pytester: pytest.Pytester) -> None:
    _data(pytester, "good.jsonl", right=19)  # 0.95, [0.751, 0.999]: strictly above 0.7
    _data(pytester, "weak.jsonl", right=12)  # 0.60, [0.361, 0.809]
    pytester.makepyfile(
        test_answers=HEAD
        + """
def test_good(evalsi_eval):
    r = evalsi_eval(HERE / "good.jsonl", ["exact-match"])
    m = assert_metric(r, "exact-match/exact-match", ">=", 0.7, strict=True)
    assert m.n == 20

def test_weak(evalsi_eval):
    r = evalsi_eval(HERE / "weak.jsonl", ["exact-match"])
    assert_metric(r, "exact-match", ">=", 0.8)

def test_weak_upper(evalsi_eval):
    r = evalsi_eval(HERE / "weak.jsonl", ["exact-match"])
    assert_metric(r, "exact-match", "<", 0.5)
"""
    )
    result = pytester.runpytest_inprocess(*PLUGIN)
    result.assert_outcomes(passed=1, failed=2)
    out = result.stdout.str()
    for message in (
        "E       AssertionError: exact-match/exact-match: mean 0.600, 95% CI [0.361, 0.809] "
        "(wilson, n=20): the mean is not >= 0.800",
        "E       AssertionError: exact-match/exact-match: mean 0.600, 95% CI [0.361, 0.809] "
        "(wilson, n=20): the mean is not < 0.500",
        "\nevalsi: 3 runs in memory (pytest --evalsi stores them); gates: no gates\n",
    ):
        assert message in out, out
    assert "_assertions.py" not in out  # the traceback ends at the test's line
    assert not (pytester.path / ".evalsi").exists()


def test_strict_fails_a_mean_above_the_threshold_whose_interval_straddles_it(
    pytester: pytest.Pytester,
) -> None:
    _data(pytester, "d.jsonl", right=17)  # 0.85, [0.621, 0.968]
    pytester.makepyfile(
        test_strict=HEAD
        + """
def test_mean_only(evalsi_eval):
    assert_metric(evalsi_eval(HERE / "d.jsonl", ["exact-match"]), "exact-match", ">=", 0.8)

def test_strict(evalsi_eval):
    r = evalsi_eval(HERE / "d.jsonl", ["exact-match"])
    assert_metric(r, "exact-match", ">=", 0.8, strict=True)

def test_strict_upper(evalsi_eval):
    r = evalsi_eval(HERE / "d.jsonl", ["exact-match"])
    assert_metric(r, "exact-match", "<=", 0.9, strict=True)
"""
    )
    result = pytester.runpytest_inprocess(*PLUGIN)
    result.assert_outcomes(passed=1, failed=2)
    out = result.stdout.str()
    for message in (
        "exact-match/exact-match: mean 0.850, 95% CI [0.621, 0.968] (wilson, n=20): the "
        "interval straddles 0.800: its lower bound 0.621 is not >= 0.800 (strict)",
        "exact-match/exact-match: mean 0.850, 95% CI [0.621, 0.968] (wilson, n=20): the "
        "interval straddles 0.900: its upper bound 0.968 is not <= 0.900 (strict)",
    ):
        assert message in out, out


def test_bad_arguments_are_clear_errors(pytester: pytest.Pytester) -> None:
    _data(pytester, "d.jsonl", right=10)
    pytester.makepyfile(
        test_bad=HEAD
        + """
import pytest
from evalsi import UserError

@pytest.fixture
def r(evalsi_eval):
    return evalsi_eval(HERE / "d.jsonl", ["exact-match", "contains"])

def test_unknown_metric(r):
    assert_metric(r, "exact-mach", ">=", 0.8)

def test_unknown_operator(r):
    assert_metric(r, "exact-match", "=>", 0.8)

def test_threshold_not_a_number(r):
    assert_metric(r, "exact-match", ">=", "0.8")

def test_errors_are_user_errors(r):
    with pytest.raises(UserError):
        assert_metric(r, "nope", ">=", 0.1)

def test_no_gates(r):
    assert_gates(r)
"""
    )
    result = pytester.runpytest_inprocess(*PLUGIN)
    result.assert_outcomes(passed=1, failed=4)
    out = result.stdout.str()
    assert re.search(
        r"UserError: assert_metric: no metric 'exact-mach' in run \S+; known: "
        r"exact-match/exact-match, contains/contains",
        out,
    ), out
    assert "assert_metric: unknown operator '=>'" in out
    assert "hint: use >=, >, <= or <" in out
    assert "assert_metric: the threshold '0.8' is not a number" in out
    assert "assert_gates: the run has no gates" in out


def test_gates_pass_and_fail_as_assertions(pytester: pytest.Pytester) -> None:
    _data(pytester, "d.jsonl", right=12)
    pytester.makepyfile(
        test_gates=HEAD
        + """
GATES = ["metric('exact-match').mean >= 0.5", "metric('exact-match').ci.low >= 0.5"]

def test_gates(evalsi_eval):
    assert_gates(evalsi_eval(HERE / "d.jsonl", ["exact-match"], gates=GATES))
"""
    )
    result = pytester.runpytest_inprocess(*PLUGIN)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: 1 of 2 gates did not pass:",
            "*failed: metric('exact-match').ci.low >= 0.5 (value 0.36*",
        ]
    )


def test_with_evalsi_the_runs_are_stored_listed_and_reported(pytester: pytest.Pytester) -> None:
    _data(pytester, "d.jsonl", right=18)
    pytester.makepyfile(
        test_stored=HEAD
        + """
import pytest

@pytest.mark.parametrize("cut", [0.5, 0.95])
def test_answers(evalsi_eval, cut):
    gate = f"metric('exact-match').mean >= {cut}"
    r = evalsi_eval(HERE / "d.jsonl", ["exact-match"], gates=[gate])
    assert r.records == 20
"""
    )
    result = pytester.runpytest_inprocess(
        *PLUGIN, "--evalsi-store", "results/e.db", "--evalsi-report", "evalsi.md"
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*- evalsi -*",
            "20??????-*  test_stored.py::test_answers?0.5?  20 records, 1 passed",
            "20??????-*  test_stored.py::test_answers?0.95?  20 records, 1 failed",
            f"evalsi: wrote {pytester.path / 'evalsi.md'}",
            f"evalsi: 2 runs stored in {pytester.path / 'results' / 'e.db'} (`evalsi runs list`); "
            "gates: 1 failed, 1 passed",
        ]
    )
    db = SqlStore.open(pytester.path / "results" / "e.db")
    try:
        names = sorted(r.name for r in db.list_runs())
    finally:
        db.close()
    assert names == ["test_stored.py::test_answers[0.5]", "test_stored.py::test_answers[0.95]"]
    report = (pytester.path / "evalsi.md").read_text()
    assert report.count("### evalsi · run") == 2
    assert "**test\\_stored.py::test\\_answers\\[0.95\\]** · score, done" in report
    assert "| exact-match | exact-match | 20 | 0.900 | [0.683, 0.988] |" in report
    assert "| `metric('exact-match').mean >= 0.95` | **failed** | 0.900 |" in report


def test_the_default_store_and_a_store_a_test_names(pytester: pytest.Pytester) -> None:
    _data(pytester, "d.jsonl", right=20)
    pytester.makepyfile(
        test_default=HEAD
        + """
def test_default(evalsi_eval):
    evalsi_eval(HERE / "d.jsonl", ["exact-match"])

def test_own_store(evalsi_eval, tmp_path):
    evalsi_eval(HERE / "d.jsonl", ["exact-match"], store=str(tmp_path / "own.db"), name="mine")
"""
    )
    result = pytester.runpytest_inprocess(*PLUGIN, "--evalsi")
    result.assert_outcomes(passed=2)
    db = SqlStore.open(pytester.path / ".evalsi" / "evalsi.db")
    try:
        assert [r.name for r in db.list_runs()] == ["test_default.py::test_default"]
    finally:
        db.close()
    result.stdout.fnmatch_lines(["evalsi: 2 runs stored in *evalsi.db*"])


def test_a_session_without_the_fixture_says_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_x():\n    assert True\n")
    result = pytester.runpytest_inprocess(*PLUGIN, "--evalsi")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "evalsi:" not in out
    assert " evalsi " not in out
    assert not (pytester.path / ".evalsi").exists()


def test_the_plugin_loads_in_a_real_pytest_process_and_shows_its_options(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    # this tree first; the rest as this process has it (where an entry point may come from)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT / "src"), *sys.path[1:]]))
    result = pytester.runpytest_subprocess(*PLUGIN, "--help")
    result.stdout.fnmatch_lines(
        ["evalsi: evaluations as tests*", "*--evalsi *", "*--evalsi-store=PATH*"]
    )


def test_the_entry_point_names_the_plugin_module() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"evalsi": "evalsi.testing._plugin"}
    import evalsi.testing._plugin as plugin

    assert callable(plugin.pytest_addoption)
    assert callable(plugin.evalsi_eval)


def test_loading_the_plugin_imports_nothing_of_evalsi() -> None:
    """pytest loads it in every session of an environment where evalsi is installed."""
    import subprocess
    import sys

    code = (
        "import sys, pytest; before = set(sys.modules); import evalsi.testing._plugin; "
        "print(sorted(m for m in set(sys.modules) - before if m.startswith('evalsi')))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert proc.stdout.strip() == "['evalsi', 'evalsi.testing', 'evalsi.testing._plugin']"
