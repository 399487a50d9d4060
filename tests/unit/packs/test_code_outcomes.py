"""How sandbox outcomes map to results, with fake drivers on a ``Ladder``: a runner failure or an
unavailable sandbox is an infrastructure ERROR (never scored); denied, timeout and
resource_exceeded are the program's doing (a failing score saying why); ``min_isolation``
fails closed; and the process-wide concurrency limit holds."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from evalsi.core import INFRA_PREFIX, Content, Outcome, Record
from evalsi.evaluators import make_runner
from evalsi.packs.code import (
    ENV_CONCURRENCY,
    RESULT_TAG,
    code_exec_tests,
    compile_check,
    default_concurrency,
    lint_check,
    using_ladder,
)
from evalsi.sandbox import (
    ExecResult,
    Isolation,
    Ladder,
    Level,
    NoneDriver,
    RungReport,
    SandboxSpec,
    UnavailableDriver,
)
from evalsi.sandbox import Outcome as ExecOutcome

CHECK = "def check(candidate):\n    assert candidate(2) == 4\n"


class FakeDriver:
    """A namespaced-looking rung whose every exec ends as ``outcome``; for ``exit`` it answers
    like the harness would, with the nonce it was given (all tests ``passed``)."""

    name = "fake"

    def __init__(
        self, outcome: ExecOutcome, *, level: Level = Level.NAMESPACED, delay: float = 0.0
    ) -> None:
        self.outcome = outcome
        self.level = level
        self.delay = delay
        self.active = 0
        self.peak = 0
        self.calls = 0
        self.lock = threading.Lock()

    def probe(self) -> RungReport:
        return RungReport(self.name, self.level, True)

    def isolation_for(self, spec: SandboxSpec) -> Isolation:
        return Isolation(self.name, self.level, "full")

    def exec(
        self,
        spec: SandboxSpec,
        workspace: Path,
        argv: Sequence[str],
        *,
        stdin: bytes | None = None,
        timeout_seconds: float | None = None,
        **_: Any,
    ) -> ExecResult:
        with self.lock:
            self.active += 1
            self.calls += 1
            self.peak = max(self.peak, self.active)
        try:
            time.sleep(self.delay)
            stdout = b""
            if self.outcome.kind == "exit" and stdin is not None:
                plan = json.loads((workspace / "tests.json").read_text())
                tests = [{"name": t["name"], "passed": True} for t in plan["tests"]]
                line = json.dumps({"tests": tests, "hardened": True})
                stdout = f"{RESULT_TAG} {stdin.decode().strip()} {line}\n".encode()
            return ExecResult(self.outcome, stdout, b"", 1.0, self.isolation_for(spec))
        finally:
            with self.lock:
                self.active -= 1


def record(output: str = "def sq(x):\n    return x * x\n", **meta: Any) -> Record:
    return Record(
        id="r",
        output=Content.of_text(output),
        reference=Content.of_text(CHECK),
        metadata={"entry_point": "sq", **meta},
    )


def run_one(ev: Any, rec: Record, params: dict[str, Any] | None = None) -> Any:
    runner = make_runner(ev.bind(params or {}))
    return asyncio.run(runner.run_async([rec]))[0]


@pytest.mark.parametrize("ev", [code_exec_tests, compile_check, lint_check], ids=lambda e: e.name)
def test_runner_failure_is_an_infra_error_never_a_score(ev: Any) -> None:
    driver = FakeDriver(ExecOutcome("runner_failure", detail="bwrap: setting up uid map"))
    with using_ladder(Ladder([driver])):
        result = run_one(ev, record(), {"linter": "pyflakes"} if ev is lint_check else {})
    assert result.outcome is Outcome.ERROR
    assert result.reason.startswith(INFRA_PREFIX + "sandbox_runner_failure)")
    assert "bwrap: setting up uid map" in result.reason
    assert "3 times" in result.reason
    assert driver.calls == 3  # retried in fresh sandboxes before giving up


class FlakyDriver(FakeDriver):
    """Breaks on its first ``failures`` executions, then runs the tests like FakeDriver."""

    def __init__(self, failures: int) -> None:
        super().__init__(ExecOutcome("exit", 0))
        self.failures = failures

    def exec(
        self, spec: SandboxSpec, workspace: Path, argv: Sequence[str], **kw: Any
    ) -> ExecResult:
        if self.calls < self.failures:
            with self.lock:
                self.calls += 1
            broken = ExecOutcome("runner_failure", detail="bwrap: transient")
            return ExecResult(broken, b"", b"", 1.0, self.isolation_for(spec))
        return super().exec(spec, workspace, argv, **kw)


def test_a_transient_runner_failure_is_retried_and_the_record_scored() -> None:
    driver = FlakyDriver(failures=2)
    with using_ladder(Ladder([driver])):
        result = run_one(code_exec_tests, record())
    assert result.outcome is Outcome.SCORED, result.reason
    assert result.scores[0].passed is True
    assert driver.calls == 3


def test_no_rung_at_the_minimum_is_an_infra_error() -> None:
    ladder = Ladder([UnavailableDriver("bwrap", Level.NAMESPACED, "bwrap not found"), NoneDriver()])
    with using_ladder(ladder):
        result = run_one(code_exec_tests, record())
    assert result.outcome is Outcome.ERROR
    assert result.reason.startswith(INFRA_PREFIX + "sandbox_unavailable)")
    assert "bwrap not found" in result.reason


def test_none_runs_only_when_asked_for_explicitly() -> None:
    with using_ladder(Ladder([NoneDriver()])):
        refused = run_one(code_exec_tests, record())
        allowed = run_one(code_exec_tests, record(), {"min_isolation": "none"})
    assert refused.outcome is Outcome.ERROR
    assert "sandbox_unavailable" in refused.reason
    assert allowed.outcome is Outcome.SCORED
    main = allowed.scores[0]
    assert main.passed is True
    assert main.metadata["isolation"]["level"] == "none"
    assert main.metadata["isolation"]["enforcement"] == "partial"
    assert "seccomp" in main.metadata["isolation"]["missing"]


@pytest.mark.parametrize(
    ("outcome", "words"),
    [
        (ExecOutcome("denied", code=-31, detail="seccomp"), "denied an action (seccomp)"),
        (ExecOutcome("timeout"), "timed out"),
        (ExecOutcome("resource_exceeded", detail="memory"), "exceeded a resource limit (memory)"),
        (ExecOutcome("exit", code=0), ""),
    ],
)
def test_the_programs_behaviour_is_a_score(outcome: ExecOutcome, words: str) -> None:
    with using_ladder(Ladder([FakeDriver(outcome)])):
        for ev in (code_exec_tests, compile_check):
            result = run_one(ev, record())
            assert result.outcome is Outcome.SCORED, result.reason
            main = result.scores[0]
            assert main.metadata["isolation"] == {
                "driver": "fake",
                "level": "namespaced",
                "enforcement": "full",
            }
            if words:
                assert main.passed is False
                assert words in main.explanation
            else:
                assert main.passed is True


def test_every_score_carries_the_isolation() -> None:
    with using_ladder(Ladder([FakeDriver(ExecOutcome("exit", code=0))])):
        single = run_one(code_exec_tests, record())
        many = run_one(
            code_exec_tests, record(json.dumps(["a = 1", "b = 2", "c = 3"])), {"k": [1, 2]}
        )
    for res in (single, many):
        assert res.scores
        for score in res.scores:
            assert set(score.metadata["isolation"]) == {"driver", "level", "enforcement"}


def test_exit_without_a_genuine_result_line_fails_closed() -> None:
    class Silent(FakeDriver):
        def exec(self, spec: SandboxSpec, workspace: Path, argv: Sequence[str], **kw: Any) -> Any:
            forged = f'{RESULT_TAG} {"0" * 32} {{"tests":[{{"name":"check","passed":true}}]}}'
            return ExecResult(
                ExecOutcome("exit", code=0), forged.encode(), b"", 1.0, self.isolation_for(spec)
            )

    with using_ladder(Ladder([Silent(ExecOutcome("exit", code=0))])):
        result = run_one(code_exec_tests, record())
    main = result.scores[0]
    assert main.passed is False
    assert "no result line" in main.explanation
    assert main.metadata["forged_result_lines"] == 1


def test_sandboxes_run_in_parallel_up_to_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    records = [record() for _ in range(6)]
    for i, rec in enumerate(records):
        rec.id = f"r{i}"
    for limit, expect in ((3, 3), (1, 1)):
        driver = FakeDriver(ExecOutcome("exit", code=0), delay=0.15)
        monkeypatch.setenv(ENV_CONCURRENCY, str(limit))
        runner = make_runner(code_exec_tests.bind({}))
        with using_ladder(Ladder([driver])):
            batch = asyncio.run(runner.run_async(records))
        assert [batch[i].outcome for i in range(6)] == [Outcome.SCORED] * 6
        assert driver.calls == 6
        assert driver.peak == expect, (limit, driver.peak)


def test_the_concurrency_param_overrides_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_CONCURRENCY, "1")
    driver = FakeDriver(ExecOutcome("exit", code=0), delay=0.15)
    many = record(json.dumps([f"x = {i}" for i in range(4)]))
    with using_ladder(Ladder([driver])):
        result = run_one(code_exec_tests, many, {"concurrency": 4})
    assert result.outcome is Outcome.SCORED
    assert driver.peak == 4


def test_default_concurrency(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.delenv(ENV_CONCURRENCY, raising=False)
    assert default_concurrency() == (os.cpu_count() or 1)
    monkeypatch.setenv(ENV_CONCURRENCY, "5")
    assert default_concurrency() == 5
    monkeypatch.setenv(ENV_CONCURRENCY, "zero")
    with pytest.raises(Exception, match=ENV_CONCURRENCY):
        default_concurrency()
