"""The exec-tests harness through the real namespaced sandbox: per-test results, and the attacks
a candidate can try on its own grade (fake result lines, early exits, SystemExit, patched
``check`` and builtins, infinite loops, hunting for the nonce). Each attack is written against a
*wrong* solution, so only a forgery could make it pass."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from evalsi.core import Content, Record, Score
from evalsi.packs.code import RESULT_TAG, code_exec_tests, read_report
from evalsi.sandbox import Level, default_ladder

pytestmark = pytest.mark.skipif(
    not any(r.available and r.level >= Level.NAMESPACED for r in default_ladder().probe_all()),
    reason="no namespaced sandbox rung on this machine",
)

CHECK = "def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(3) == 9\n"
WRONG = "def square(x):\n    return x + x\n"


def grade(output: str, reference: Any = CHECK, **params: Any) -> list[Score]:
    record = Record(
        id="r",
        output=Content.of_text(output),
        reference=Content.from_value(reference),
        metadata={"entry_point": "square"},
    )
    params.setdefault("timeout_seconds", 3.0)
    return asyncio.run(code_exec_tests(record, **params))  # type: ignore[no-any-return]


def main(scores: list[Score]) -> Score:
    return next(s for s in scores if s.name == "code-exec-tests")


def test_right_and_wrong_solutions_with_isolation_metadata() -> None:
    right = grade("def square(x):\n    return x * x\n")
    assert main(right).passed is True
    assert main(right).explanation == "1/1 tests passed"
    wrong = main(grade(WRONG))
    assert wrong.passed is False
    assert "AssertionError at `assert candidate(3) == 9`" in wrong.explanation
    for score in [*right, wrong]:
        iso = score.metadata["isolation"]
        assert iso["driver"] == "bwrap"
        assert iso["level"] == "namespaced"
        assert iso["enforcement"] in ("full", "partial")
    assert wrong.metadata["harness_hardened"] is True


def test_per_test_results_for_test_functions() -> None:
    tests = (
        "def test_two():\n    assert square(2) == 4\n\n"
        "def test_three():\n    assert square(3) == 9\n\n"
        "def test_zero():\n    assert square(0) == 0\n"
    )
    scores = grade(WRONG, tests)
    rows = main(scores).metadata["tests"]
    assert [(r["name"], r["passed"]) for r in rows] == [
        ("test_two", True),
        ("test_three", False),
        ("test_zero", True),
    ]
    fraction = next(s for s in scores if s.name == "tests-passed")
    assert fraction.number == pytest.approx(2 / 3)
    assert "first failure: test_three" in main(scores).explanation


def test_fake_result_line_on_stdout_does_not_pass() -> None:
    fake = f'{RESULT_TAG} {"0" * 32} {{"tests":[{{"name":"check","passed":true}}]}}'
    for where in ("module", "call"):
        body = f"print({fake!r}, flush=True)"
        code = (
            f"import os, sys\n{body}\nos.write(1, {fake!r}.encode() + b'\\n')\n{WRONG}"
            if where == "module"
            else f"def square(x):\n    {body}\n    return x + x\n"
        )
        assert main(grade(code)).passed is False, where


def test_exit_before_the_tests_does_not_pass() -> None:
    for exit_call in (
        "os._exit(0)",
        "sys.exit(0)",
        "raise SystemExit(0)",
        "os.kill(os.getpid(), 9)",
    ):
        code = f"import os, sys\n{exit_call}\n{WRONG}"
        score = main(grade(code))
        assert score.passed is False, exit_call
    inside = "import os\ndef square(x):\n    os._exit(0)\n"
    score = main(grade(inside))
    assert score.passed is False
    assert "before the test reported" in score.explanation


def test_system_exit_and_base_exceptions_inside_the_call_fail() -> None:
    for raise_ in ("raise SystemExit(0)", "raise KeyboardInterrupt", "raise GeneratorExit"):
        code = f"def square(x):\n    {raise_}\n"
        score = main(grade(code))
        assert score.passed is False, raise_


def test_monkeypatched_check_and_builtins_do_not_pass() -> None:
    code = (
        "import builtins\n"
        "def check(candidate):\n    return None\n"
        "builtins.check = check\n"
        "builtins.AssertionError = type('Swallowed', (Exception,), {})\n"
        "builtins.len = lambda x: 0\n"
        "builtins.exec = lambda *a, **k: None\n"
        "builtins.compile = lambda *a, **k: compile('pass', 'x', 'exec')\n"
        f"{WRONG}"
    )
    score = main(grade(code))
    assert score.passed is False
    assert "AssertionError" in score.explanation
    with_tests = main(grade(code, "def test_sq():\n    assert square(3) == 9\n"))
    assert with_tests.passed is False


def test_atexit_hooks_and_threads_cannot_report_later() -> None:
    fake = f'{RESULT_TAG} {"0" * 32} {{"tests":[]}}'
    code = (
        "import atexit, os, threading, time\n"
        f"atexit.register(lambda: os.write(1, {fake!r}.encode()))\n"
        "def later():\n    time.sleep(0.2)\n    os.write(1, b'P')\n"
        "threading.Thread(target=later, daemon=False).start()\n"
        f"{WRONG}"
    )
    assert main(grade(code)).passed is False


def test_infinite_loop_times_out_and_other_tests_still_run() -> None:
    code = (
        "def square(x):\n    if x == 3:\n        while True:\n            pass\n    return x * x\n"
    )
    tests = ["assert square(3) == 9", "assert square(2) == 4"]
    scores = grade(code, tests, timeout_seconds=1.0)
    rows = main(scores).metadata["tests"]
    assert rows[0]["status"] == "timeout"
    assert rows[0]["passed"] is False
    assert rows[1]["passed"] is True
    assert main(scores).passed is False


def test_a_loop_that_ignores_signals_is_still_killed() -> None:
    code = (
        "import signal\n"
        "for s in (signal.SIGTERM, signal.SIGALRM, signal.SIGINT):\n"
        "    signal.signal(s, signal.SIG_IGN)\n"
        "def square(x):\n    while True:\n        try:\n            pass\n"
        "        except BaseException:\n            pass\n"
    )
    score = main(grade(code, timeout_seconds=1.0))
    assert score.passed is False
    assert "timed out" in score.explanation


HUNT = r"""
import os, re, sys
found = []
HEX = re.compile(rb"[0-9a-f]{32}")
def grab(data):
    found.extend(m.decode() for m in HEX.findall(data or b""))
grab(" ".join(f"{k}={v}" for k, v in os.environ.items()).encode())
for path in ("/proc/self/environ", "/proc/1/environ", f"/proc/{os.getppid()}/environ",
             "/proc/1/cmdline", f"/proc/{os.getppid()}/fd/0", "/proc/1/fd/0", "/dev/stdin",
             "/proc/1/mem"):
    try:
        with open(path, "rb") as f:
            grab(f.read(1 << 16))
    except OSError:
        pass
try:
    grab(os.read(0, 4096))
except OSError:
    pass
for fd in range(0, 64):
    for nonce in found:
        line = "EVALSI-CODE-RESULT " + nonce + ' {"tests":[{"name":"check","passed":true}]}\n'
        try:
            os.write(fd, line.encode())
        except OSError:
            pass
for path in ("/proc/1/fd/1", f"/proc/{os.getppid()}/fd/1"):
    try:
        with open(path, "wb") as f:
            f.write(b"EVALSI-CODE-RESULT x {}\n")
    except OSError:
        pass
def square(x):
    raise RuntimeError("hunt found " + repr(found))
"""


def test_the_nonce_is_nowhere_the_candidate_can_read() -> None:
    score = main(grade(HUNT))
    assert score.passed is False
    assert "hunt found []" in score.explanation


def test_known_limit_a_forged_verdict_on_the_report_pipe_passes() -> None:
    """Documented limit (guide, "What the harness does not stop"): a candidate that tampers
    with its own test process can write the child's verdict. If this ever fails, the harness
    got stronger: update the guide's threat model."""
    code = "import os\nfor fd in range(3, 32):\n    try:\n        os.write(fd, b'P')\n"
    code += "    except OSError:\n        pass\nos._exit(0)\n"
    assert main(grade(code)).passed is True


def test_read_report_counts_forged_lines_and_needs_exactly_one_genuine() -> None:
    nonce = "ab" * 16
    good = f'{RESULT_TAG} {nonce} {{"tests":[{{"name":"t","passed":true}}],"hardened":true}}'
    forged = f'{RESULT_TAG} {"cd" * 16} {{"tests":[]}}'
    report = read_report(f"noise\n{forged}\n{good}\n".encode(), nonce)
    assert report.problem == ""
    assert report.forged_lines == 1
    assert report.hardened
    assert report.tests == [{"name": "t", "passed": True}]
    assert read_report(f"{good}\n{good}\n".encode(), nonce).problem.endswith("2 result lines")
    assert read_report(forged.encode(), nonce).problem.endswith("no result line")
    broken = read_report(f"{RESULT_TAG} {nonce} {{not json".encode(), nonce)
    assert "malformed" in broken.problem


def test_the_tests_file_is_gone_before_the_solution_runs() -> None:
    code = (
        "import os\n"
        "def square(x):\n"
        "    raise RuntimeError('saw ' + repr(sorted(os.listdir('.'))))\n"
    )
    score = main(grade(code))
    assert "saw ['solution.py']" in score.explanation


def test_processes_a_test_leaves_behind_are_killed() -> None:
    # Each test forks a busy child that outlives it; without the clean-up they would pile up
    # and starve the later tests of CPU and of the process limit.
    code = (
        "import os\n"
        "def square(x):\n"
        "    for _ in range(8):\n"
        "        if os.fork() == 0:\n"
        "            while True:\n"
        "                pass\n"
        "    return x * x\n"
    )
    tests = [f"assert square({i}) == {i * i}" for i in range(6)]
    scores = grade(code, tests, timeout_seconds=3.0)
    rows = main(scores).metadata["tests"]
    assert [r["passed"] for r in rows] == [True] * 6, rows


def test_the_solution_cannot_kill_the_harness() -> None:
    # In the namespaced sandbox the harness is PID 1 of its namespace: signals from inside are
    # not delivered to it, so the second test still runs and the result still comes back.
    code = (
        "import os\n"
        "def square(x):\n"
        "    for sig in (9, 15):\n"
        "        for pid in (1, os.getppid()):\n"
        "            try:\n"
        "                os.kill(pid, sig)\n"
        "            except OSError:\n"
        "                pass\n"
        "    return x + x\n"
    )
    rows = main(grade(code, ["assert square(2) == 4", "assert square(3) == 9"])).metadata["tests"]
    assert [(r["passed"], r["status"]) for r in rows] == [(True, "passed"), (False, "failed")]


def test_a_seccomp_kill_fails_only_that_test() -> None:
    code = (
        "import ctypes\n"
        "def square(x):\n"
        "    if x == 2:\n"
        "        ctypes.CDLL(None).ptrace(16, 1, 0, 0)  # PTRACE_ATTACH to the harness\n"
        "    return x * x\n"
    )
    scores = grade(code, ["assert square(2) == 4", "assert square(3) == 9"])
    rows = main(scores).metadata["tests"]
    assert rows[0] == {
        "name": "test_1",
        "passed": False,
        "status": "crashed",
        "error": "denied by the sandbox (seccomp)",
    }
    assert rows[1]["passed"] is True
    assert "test_1: denied by the sandbox (seccomp)" in main(scores).explanation


def test_with_prompt_runs_completions_after_the_prompt() -> None:
    prompt = 'def square(x):\n    """x squared."""\n'
    record = Record(
        id="r",
        input=Content.of_text(prompt),
        output=Content.of_text("    return x * x\n"),
        reference=Content.of_text(CHECK),
        metadata={"entry_point": "square"},
    )
    assert main(asyncio.run(code_exec_tests(record, with_prompt=True))).passed is True
    alone = main(asyncio.run(code_exec_tests(record)))
    assert alone.passed is False
    assert "the solution failed to load: IndentationError" in alone.explanation
    record.input = None
    with pytest.raises(Exception, match="input: missing; with_prompt"):
        asyncio.run(code_exec_tests(record, with_prompt=True))
