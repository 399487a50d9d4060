"""``code-exec-tests``: run candidate programs against unit tests in the sandbox; pass@k.

One sandbox per candidate; inside it, the harness (``_harness``) runs each test in its own
process and reports through a nonce-tagged line the candidate cannot write. Every score
carries ``metadata["isolation"]`` (how the sandbox confined the run).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Literal

from evalsi.core import Record, Score, UserError
from evalsi.packs._declare import builtin, clip, number, passed
from evalsi.packs.code._harness import HARNESS, new_nonce, read_report
from evalsi.packs.code._sandboxed import (
    IsolationName,
    behaviour,
    make_spec,
    run_program_async,
    tail,
)
from evalsi.packs.code._shapes import ShapeError, SuitePlan, candidates_of, read_tests
from evalsi.sandbox import Level
from evalsi.stats import pass_at_k

_ERROR_CHARS = 300
_TESTS_KEPT = 50
_STARTUP_SECONDS = 10.0  # interpreter start and forks, on top of the per-test timeouts


@dataclass(slots=True)
class CandidateResult:
    """One candidate's run: per-test results, how it ended, how it was confined."""

    tests: list[dict[str, Any]]
    outcome: str
    isolation: dict[str, object]
    level: Level
    forged_lines: int
    hardened: bool
    problem: str = ""

    @property
    def passed_count(self) -> int:
        return sum(1 for t in self.tests if t.get("passed") is True)

    @property
    def passed(self) -> bool:
        return bool(self.tests) and self.passed_count == len(self.tests) and not self.problem

    def first_failure(self) -> str:
        if self.problem:
            return self.problem
        for t in self.tests:
            if t.get("passed") is not True:
                return clip(f"{t.get('name')}: {t.get('error') or t.get('status')}", _ERROR_CHARS)
        return ""


async def run_candidate(
    code: str,
    plan: SuitePlan,
    *,
    min_isolation: str = "namespaced",
    timeout_seconds: float = 5.0,
    memory_mb: int = 512,
    concurrency: int | None = None,
    python: str = "python3",
) -> CandidateResult:
    """Run one candidate program against ``plan`` in a fresh sandbox."""
    n = len(plan.tests)
    budget = timeout_seconds * n + _STARTUP_SECONDS
    spec = make_spec(
        min_isolation=min_isolation,
        timeout_seconds=budget,
        memory_mb=memory_mb,
        cpu_seconds=budget,
    )
    nonce = new_nonce()
    files = {
        "harness.py": HARNESS.encode(),
        "solution.py": code.encode("utf-8", "surrogatepass"),
        "tests.json": json.dumps(plan.to_json(timeout_seconds)).encode(),
    }
    result = await run_program_async(
        files,
        [python, "-I", "harness.py"],
        spec,
        stdin=(nonce + "\n").encode(),
        concurrency=concurrency,
    )
    isolation = result.isolation.to_dict()
    level = result.isolation.level
    names = [t["name"] for t in plan.tests]
    if result.outcome.kind != "exit":
        # The whole program overran or was stopped: every test that did not report fails.
        why = behaviour(result)
        failed = [_failed(name, result.outcome.kind, why) for name in names]
        return CandidateResult(failed, result.outcome.kind, isolation, level, 0, False, why)
    report = read_report(result.stdout, nonce)
    if report.problem:
        stderr = tail(result.stderr)
        why = f"{report.problem} ({behaviour(result)})" + (f": {stderr}" if stderr else "")
        failed = [_failed(name, "no-result", why) for name in names]
        return CandidateResult(failed, "exit", isolation, level, report.forged_lines, False, why)
    got = {str(t.get("name")): t for t in report.tests}
    tests = [
        got.get(name) or _failed(name, "no-result", "the harness did not run it") for name in names
    ]
    return CandidateResult(tests, "exit", isolation, level, report.forged_lines, report.hardened)


def _failed(name: str, status: str, error: str) -> dict[str, Any]:
    return {"name": name, "passed": False, "status": status, "error": error}


def _test_rows(tests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for t in tests[:_TESTS_KEPT]:
        row = {"name": t.get("name"), "passed": t.get("passed") is True, "status": t.get("status")}
        if t.get("error"):
            row["error"] = clip(str(t["error"]), 200)
        rows.append(row)
    return rows


def _single_scores(result: CandidateResult, metric: str) -> list[Score]:
    total, ok = len(result.tests), result.passed_count
    if result.passed:
        explanation = f"{ok}/{total} tests passed"
    else:
        explanation = f"{ok}/{total} tests passed; first failure: {result.first_failure()}"
    meta: dict[str, Any] = {
        "isolation": result.isolation,
        "tests": _test_rows(result.tests),
        "tests_passed": ok,
        "tests_total": total,
        "outcome": result.outcome,
        "harness_hardened": result.hardened,
    }
    if result.forged_lines:
        meta["forged_result_lines"] = result.forged_lines
    return [
        Score(name=metric, passed=result.passed, explanation=explanation, metadata=meta),
        Score(
            name="tests-passed",
            number=ok / total if total else 0.0,
            explanation=f"{ok}/{total}",
            metadata={"isolation": result.isolation},
        ),
    ]


def _pass_at_k_scores(results: list[CandidateResult], ks: list[int]) -> list[Score]:
    n = len(results)
    c = sum(1 for r in results if r.passed)
    weakest = min(results, key=lambda r: int(r.level))
    rows = [
        {
            "passed": r.passed,
            "tests_passed": r.passed_count,
            "tests_total": len(r.tests),
            **({"first_failure": r.first_failure()} if not r.passed else {}),
        }
        for r in results[:_TESTS_KEPT]
    ]
    meta: dict[str, Any] = {"isolation": weakest.isolation, "n": n, "c": c, "candidates": rows}
    forged = sum(r.forged_lines for r in results)
    if forged:
        meta["forged_result_lines"] = forged
    return [
        Score(
            name=f"pass-at-{k}",
            number=pass_at_k(n, c, k),
            explanation=f"{c}/{n} candidates passed every test; unbiased pass@{k}",
            metadata=dict(meta),
        )
        for k in ks
    ]


@builtin(
    "code",
    "code-exec-tests",
    passed("code-exec-tests", "every test passed"),
    number("tests-passed", "share of the tests passed"),
    number("pass-at-1", "unbiased pass@1 (n candidates)"),
    example="evalsi eval --data examples/code/solutions.jsonl --evaluators code-exec-tests "
    "--format json",
)
async def code_exec_tests(
    record: Record,
    *,
    language: str = "python",
    entry_point: str = "",
    tests_field: str = "",
    candidates: Literal["auto", "one", "list"] = "auto",
    with_prompt: bool = False,
    k: list[int] | None = None,
    min_isolation: IsolationName = "namespaced",
    timeout_seconds: float = 5.0,
    memory_mb: int = 512,
    concurrency: int | None = None,
) -> list[Score]:
    """Run candidate programs against unit tests in the sandbox: pass/fail, or pass@k over n.

    One candidate in ``output``: ``code-exec-tests`` (every test passed) and ``tests-passed``
    (the share); a JSON list of candidates: unbiased ``pass-at-<k>`` for each ``k``.

    Tests are HumanEval-style ``check(candidate)`` code (with an entry point), ``def test_*``
    functions, top-level asserts, or a list of snippets; each runs in its own process, with
    ``timeout_seconds`` per test; ``with_prompt`` runs ``input`` + ``output`` (completions
    that continue the prompt). ``min_isolation`` (default namespaced) is the weakest
    sandbox accepted; none only when asked for. Guide: docs/guides/packs/code.md.
    """
    if language.strip().lower() not in ("python", "py", "python3"):
        raise UserError(
            f"code-exec-tests: language {language!r} is not supported yet (python only; "
            "compile-check takes a command for other languages)"
        )
    try:
        programs, many = candidates_of(
            record.output,  # type: ignore[arg-type]  # requires guarantees it
            multiple={"auto": None, "one": False, "list": True}[candidates],
        )
        plan = read_tests(record, tests_field=tests_field, entry_point=entry_point)
        if with_prompt:  # HumanEval-style completions: the body only, after the prompt
            if record.input is None:
                raise ShapeError("input: missing; with_prompt puts the prompt before the output")
            prompt = record.input.as_text()
            programs = [prompt + p for p in programs]
    except ShapeError as e:
        raise UserError(f"code-exec-tests: {e}") from None
    ks = sorted(set(k or [1]))
    if many:
        bad = [x for x in ks if x < 1 or x > len(programs)]
        if bad:
            raise UserError(
                f"code-exec-tests: k={bad[0]} is outside 1..{len(programs)} (the record holds "
                f"{len(programs)} candidates)"
            )
    options: dict[str, Any] = {
        "min_isolation": min_isolation,
        "timeout_seconds": timeout_seconds,
        "memory_mb": memory_mb,
        "concurrency": concurrency,
    }
    results = await asyncio.gather(*(run_candidate(p, plan, **options) for p in programs))
    if many:
        return _pass_at_k_scores(list(results), ks)
    return _single_scores(results[0], "code-exec-tests")
