"""pass@k over n candidates through the real sandbox, against the unbiased estimator computed
here independently from binomial coefficients (``math.comb``)."""

from __future__ import annotations

import asyncio
from math import comb

import pytest

from evalsi.core import Content, Outcome, Record
from evalsi.evaluators import make_runner
from evalsi.packs.code import code_exec_tests
from evalsi.sandbox import Level, default_ladder

pytestmark = pytest.mark.skipif(
    not any(r.available and r.level >= Level.NAMESPACED for r in default_ladder().probe_all()),
    reason="no namespaced sandbox rung on this machine",
)

CHECK = "def check(candidate):\n    assert candidate([3, 1, 2]) == [1, 2, 3]\n"
RIGHT = ["def srt(xs):\n    return sorted(xs)\n", "def srt(xs):\n    return sorted(xs, key=int)\n"]
WRONG = [
    "def srt(xs):\n    return xs\n",
    "def srt(xs):\n    return sorted(xs, reverse=True)\n",
    "def srt(xs):\n    raise ValueError('no')\n",
    "import os\nos._exit(0)\n",
]


def reference_pass_at_k(n: int, c: int, k: int) -> float:
    """Chen et al. (2021): 1 - C(n - c, k) / C(n, k)."""
    return 1.0 - comb(n - c, k) / comb(n, k)


@pytest.mark.parametrize(("c", "n"), [(0, 4), (1, 4), (2, 6), (2, 3)])
def test_pass_at_k_matches_the_binomial_formula(c: int, n: int) -> None:
    programs = (RIGHT[:c] + WRONG)[:n] if c else WRONG[:n]
    assert sum(p in RIGHT for p in programs) == c
    assert len(programs) == n
    record = Record(
        id="r",
        output=Content.from_value(programs),
        reference=Content.of_text(CHECK),
        metadata={"entry_point": "srt"},
    )
    ks = list(range(1, n + 1))
    runner = make_runner(code_exec_tests.bind({"k": ks, "timeout_seconds": 3.0}))
    result = asyncio.run(runner.run_async([record]))[0]
    assert result.outcome is Outcome.SCORED, result.reason
    by_name = {s.name: s for s in result.scores}
    assert sorted(by_name) == sorted(f"pass-at-{k}" for k in ks)
    for k in ks:
        assert by_name[f"pass-at-{k}"].number == pytest.approx(reference_pass_at_k(n, c, k))
    meta = by_name["pass-at-1"].metadata
    assert meta["n"] == n
    assert meta["c"] == c
    assert [row["passed"] for row in meta["candidates"]] == [p in RIGHT for p in programs]
    assert meta["isolation"]["level"] == "namespaced"
