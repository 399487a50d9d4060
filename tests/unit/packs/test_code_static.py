"""compile-check and lint-check through the real namespaced sandbox: the compiler's message,
the command template for other tools, ruff findings, and a SKIP (never a pass) when no linter
is visible inside."""

from __future__ import annotations

import asyncio
import subprocess
from typing import Any

import pytest

from evalsi.core import Content, Outcome, Record
from evalsi.evaluators import make_runner
from evalsi.packs.code import compile_check, find_ruff, lint_check
from evalsi.sandbox import Level, default_ladder

pytestmark = pytest.mark.skipif(
    not any(r.available and r.level >= Level.NAMESPACED for r in default_ladder().probe_all()),
    reason="no namespaced sandbox rung on this machine",
)


def run(ev: Any, output: str, **params: Any) -> Any:
    record = Record(id="r", output=Content.of_text(output))
    return asyncio.run(make_runner(ev.bind(params)).run_async([record]))[0]


def test_compile_check_passes_and_fails_with_the_compilers_message() -> None:
    ok = run(compile_check, "```python\ndef f():\n    return 1\n```")
    assert ok.outcome is Outcome.SCORED
    assert ok.scores[0].passed is True
    assert ok.scores[0].metadata["isolation"]["level"] == "namespaced"
    bad = run(compile_check, "def f(:\n    pass\n")
    score = bad.scores[0]
    assert score.passed is False
    assert "SyntaxError" in score.explanation
    assert 'File "solution.py", line 1' in score.explanation
    assert score.metadata["exit_code"] != 0


def test_compile_check_command_template_for_another_language() -> None:
    # /bin/sh as the "compiler": a file passes when it holds no TODO.
    command = ["/bin/sh", "-c", "! grep -n TODO {file}"]
    ok = run(compile_check, "int main() {}\n", language="c", command=command, filename="m.c")
    assert ok.scores[0].passed is True
    assert ok.scores[0].metadata["argv"] == ["/bin/sh", "-c", "! grep -n TODO m.c"]
    bad = run(compile_check, "// TODO\n", language="c", command=command, filename="m.c")
    assert bad.scores[0].passed is False
    assert "1:// TODO" in bad.scores[0].explanation


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"language": "rust"}, "filename: needed for language 'rust'"),
        ({"language": "rust", "filename": "m.rs"}, "language 'rust' needs the command param"),
        ({"command": ["gcc", "main.c"]}, "no argument holds {file}"),
        ({"filename": "../x.py"}, "filename: expected a plain file name"),
    ],
)
def test_compile_check_bad_params_are_errors(params: dict[str, Any], words: str) -> None:
    result = run(compile_check, "x = 1\n", **params)
    assert result.outcome is Outcome.ERROR
    assert words in result.reason


def test_a_compiler_that_loops_is_a_failing_score() -> None:
    result = run(
        compile_check, "x\n", command=["/bin/sh", "-c", "while :; do :; done # {file}"],
        timeout_seconds=1.0,
    )  # fmt: skip
    assert result.outcome is Outcome.SCORED
    assert result.scores[0].passed is False
    assert "timed out" in result.scores[0].explanation


@pytest.mark.skipif(find_ruff() is None, reason="no ruff binary on this host")
def test_lint_check_with_ruff_counts_findings() -> None:
    dirty = run(lint_check, "import os\n\ndef f():\n    return undefined_name\n")
    score = dirty.scores[0]
    assert score.passed is False
    assert score.metadata["linter"] == "ruff"
    assert score.metadata["findings_count"] == 2
    codes = [f["code"] for f in score.metadata["findings"]]
    assert codes == ["F401", "F821"]
    assert score.explanation.startswith("2 finding(s); first: line 1: F401")
    capped = run(lint_check, "import os\n\ndef f():\n    return undefined_name\n", max_findings=1)
    assert capped.scores[0].metadata["findings_count"] == 2
    assert len(capped.scores[0].metadata["findings"]) == 1
    clean = run(lint_check, "def f():\n    return 1\n")
    assert clean.scores[0].passed is True
    assert clean.scores[0].metadata["findings_count"] == 0


def _sandbox_has_pyflakes() -> bool:
    probe = subprocess.run(["/usr/bin/python3", "-c", "import pyflakes"], capture_output=True)
    return probe.returncode == 0


def test_pyflakes_missing_is_a_skip_with_the_reason() -> None:
    result = run(lint_check, "import os\n", linter="pyflakes")
    if _sandbox_has_pyflakes():
        assert result.outcome is Outcome.SCORED
        assert result.scores[0].passed is False
    else:
        assert result.outcome is Outcome.SKIPPED
        assert "no linter is visible inside the sandbox" in result.reason
        assert "python3-pyflakes" in result.reason


def test_lint_check_command_lines_are_findings() -> None:
    command = ["/bin/sh", "-c", "grep -n 'print(' {file} && exit 1 || exit 0"]
    result = run(lint_check, "x = 1\nprint(x)\nprint(2)\n", command=command)
    score = result.scores[0]
    assert score.passed is False
    assert score.metadata["linter"] == "command"
    assert score.metadata["findings_count"] == 2
    assert score.metadata["findings"][0] == {"message": "2:print(x)"}
    clean = run(lint_check, "x = 1\n", command=command)
    assert clean.scores[0].passed is True
