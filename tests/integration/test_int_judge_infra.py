"""A judge that keeps failing is infrastructure: its results are infra errors, not evaluator
errors, never in n; a gate on that metric is inconclusive, not failed (an infrastructure
failure is never scored)."""

from __future__ import annotations

import evalsi
from tests.support.stub_llm import OPENAI_PATH, Fault, StubLLM


def test_judge_5xx_after_retries_counts_as_infra_error() -> None:
    rows = [{"id": f"r{i}", "input": f"q{i}", "output": f"a{i}"} for i in range(3)]
    with StubLLM(default='{"score": 1, "explanation": "ok"}') as judge:
        # the judge keeps answering 503: retried, then its circuit breaker opens
        judge.schedule(*[Fault(status=503, retry_after="0")] * 40, path=OPENAI_PATH)
        result = evalsi.evaluate(
            rows,
            [{"ref": "llm-judge", "params": {"rubric": "right?"}}],
            judges={
                "default": {
                    "connector": "openai-compatible",
                    "baseUrl": judge.openai_url,
                    "model": "j",
                    "maxConcurrency": 1,
                }
            },
            gates=["metric('llm-judge').mean >= 0.5"],
            min_completion_rate=0.9,
            store=":memory:",
        )
    m = result.metric("llm-judge")
    assert (m.n, m.errors, m.infra_errors) == (0, 0, 3)  # never scored, never a failure
    reasons = sorted(r.reason.split(":")[0] for r in result.results)
    assert all(r.startswith("infra_error(") for r in reasons)
    assert "infra_error(server_error)" in reasons  # retried, then given up
    assert result.gates[0]["verdict"] == "inconclusive"  # no eligible data: not "failed"
    assert result.exit_code == 3  # nothing judged: the judge was lost to infrastructure
