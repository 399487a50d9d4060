"""The agent pack from the CLI, with the commands of docs/guides/packs/agent.md as written, on
examples/agent/trips.jsonl (and harness-steps.jsonl, predicates.jsonl); the judge metric against
the stub LLM through the example's judges.yaml. Expected values are the guide's hand-labelled
table, computed here by hand."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evalsi.core import Outcome
from evalsi.store import SqlStore
from tests.support.guides import guide_commands, load_jsonl, run_json
from tests.support.stub_llm import OPENAI_PATH, StubLLM

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guides" / "packs" / "agent.md"
EXAMPLES = ROOT / "examples" / "agent"
ROWS = load_jsonl(EXAMPLES / "trips.jsonl")

# Per record, by hand from each session and its reference (see the guide's table):
# tool-call-accuracy, tool-name-accuracy, strict, unordered, subset, superset;
# None: skipped (no reference calls).
HAND: dict[str, tuple[float, float, bool, bool, bool, bool] | None] = {
    "weather-paris": (1, 1, True, True, True, True),
    "book-lisbon": (1, 1, True, True, True, True),
    "search-wrong-date": (0, 1, True, True, True, True),  # right tool, wrong date
    "hotel-loop": (1 / 3, 1 / 3, False, False, False, True),  # 3 calls, 1 expected
    "flight-not-booked": (1 / 2, 1 / 2, False, False, True, False),  # never booked
    "weather-extra-call": (1 / 2, 1 / 2, False, False, False, True),
    "rome-any-order": (1 / 2, 1 / 2, False, True, True, True),
    "weather-zurich": (1, 1, True, True, True, True),
    "thanks": (1, 1, True, True, True, True),  # nothing expected, nothing called
    "no-reference": None,
}
STEPS = {"weather-paris": 3, "book-lisbon": 5, "search-wrong-date": 3, "hotel-loop": 7,
         "flight-not-booked": 3, "weather-extra-call": 5, "rome-any-order": 5,
         "weather-zurich": 3, "thanks": 1, "no-reference": 3}  # fmt: skip


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("agent")
    shutil.copytree(EXAMPLES, tmp / "examples" / "agent")
    return tmp


def command_with(evaluators: str) -> list[str]:
    (args,) = [a for a in guide_commands(GUIDE) if a[a.index("--evaluators") + 1] == evaluators]
    return args


def stored(workdir: Path, run_id: str) -> dict[tuple[str, str], Any]:
    store = SqlStore.open(workdir / ".evalsi" / "evalsi.db")
    try:
        return {(r.record_id, r.evaluator): r for _, _, r in store.iter_results(run_id)}
    finally:
        store.close()


def test_the_guide_and_the_example_agree() -> None:
    assert len(guide_commands(GUIDE)) == 9
    assert [r["id"] for r in ROWS] == list(HAND)
    assert {r["id"]: len(r["trajectory"]) for r in ROWS} == STEPS


def test_tool_call_accuracy_and_strict_match(run_evalsi: Callable[..., Any], workdir: Path) -> None:
    out = run_json(run_evalsi, workdir, command_with("tool-call-accuracy,trajectory-match"))
    metrics = {m["metric"]: m for m in out["metrics"]}
    scored = [v for v in HAND.values() if v is not None]
    assert metrics["tool-call-accuracy"]["mean"] == pytest.approx(mean([v[0] for v in scored]))
    assert metrics["tool-call-accuracy"]["mean"] == pytest.approx(35 / 54)  # 5.8333 / 9
    assert metrics["tool-name-accuracy"]["mean"] == pytest.approx(mean([v[1] for v in scored]))
    assert metrics["tool-args-accuracy"]["mean"] == pytest.approx(7 / 8)  # thanks has no pair
    assert metrics["trajectory-match"]["mean"] == pytest.approx(5 / 9)
    for name in ("tool-call-accuracy", "trajectory-match"):
        assert (metrics[name]["n"], metrics[name]["skipped"], metrics[name]["errors"]) == (9, 1, 0)
    results = stored(workdir, out["run_id"])
    skipped = results[("no-reference", "tool-call-accuracy")]
    assert skipped.outcome is Outcome.SKIPPED
    assert skipped.reason.startswith("record has no reference tool calls")
    rome = results[("rome-any-order", "tool-call-accuracy")].scores[0]
    assert rome.explanation == (
        "1 of 2 calls right (agent 2, reference 2); out of order: search_hotels at step 2"
    )
    booked = results[("flight-not-booked", "trajectory-match")].scores[0]
    assert booked.explanation == "the agent made 1 of 2 calls; call 2 should be book_flight"


def test_unordered_match_with_arguments(run_evalsi: Callable[..., Any], workdir: Path) -> None:
    out = run_json(run_evalsi, workdir, command_with("trajectory-match"))
    (metric,) = out["metrics"]
    # unordered passes, minus search-wrong-date whose arguments differ
    want = [v[3] and rid != "search-wrong-date" for rid, v in HAND.items() if v is not None]
    assert metric["mean"] == pytest.approx(mean([float(w) for w in want]))
    assert metric["mean"] == pytest.approx(5 / 9)


def test_loops_and_budgets(run_evalsi: Callable[..., Any], workdir: Path) -> None:
    out = run_json(run_evalsi, workdir, command_with("loop-detection,step-efficiency"))
    metrics = {m["metric"]: m for m in out["metrics"]}
    looped = [r["metadata"]["looped"] for r in ROWS]
    assert metrics["loop-detection"]["mean"] == pytest.approx(1 - mean(looped))
    assert metrics["redundant-calls"]["mean"] == pytest.approx(2 / 10)  # hotel-loop: 2
    assert metrics["step-efficiency"]["mean"] == pytest.approx(9 / 10)  # only hotel-loop > 6
    assert metrics["agent-steps"]["mean"] == pytest.approx(mean(list(STEPS.values())))
    assert metrics["steps-budget-used"]["mean"] == pytest.approx(mean(list(STEPS.values())) / 6)
    # record usage where given; weather-zurich's tokens are its llm steps' (130 + 110)
    tokens = [r["usage"]["total_tokens"] if "usage" in r else 240 for r in ROWS]
    assert metrics["agent-tokens"]["mean"] == pytest.approx(mean(tokens))
    assert metrics["tokens-budget-used"]["mean"] == pytest.approx(mean(tokens) / 2000)
    assert "latency-budget-used" not in metrics  # no latency budget
    assert all(m["n"] == 10 and m["errors"] == 0 for m in metrics.values())
    results = stored(workdir, out["run_id"])
    loop = results[("hotel-loop", "loop-detection")].scores[0]
    assert loop.explanation == (
        'loop: search_hotels({"check_in":"2026-04-10","city":"Kyoto","nights":2}) '
        "3 times in a row (steps 2-6)"
    )


def test_goal_completion_against_a_stub_judge(
    run_evalsi: Callable[..., Any], workdir: Path
) -> None:
    judges = workdir / "examples" / "agent" / "judges.yaml"
    verdict = '{"goal": "travel", "achieved": true, "explanation": "done"}'
    with StubLLM(default=verdict) as stub:
        text = judges.read_text()
        assert "http://127.0.0.1:8000/v1" in text
        judges.write_text(text.replace("http://127.0.0.1:8000/v1", stub.openai_url))
        args = command_with("session-goal-completion")
        out = run_json(run_evalsi, workdir, args)
        first_calls = stub.calls(OPENAI_PATH)
        sent = stub.requests(OPENAI_PATH)[0].body
        again = run_json(run_evalsi, workdir, args)  # unchanged: answered from the cache
        calls = stub.calls(OPENAI_PATH)
    assert (first_calls, calls) == (10, 10)
    assert sent["model"] == "qwen2.5-7b-instruct"
    assert "# What the agent did" in sent["messages"][-1]["content"]
    for run in (out, again):
        (metric,) = run["metrics"]
        assert (metric["n"], metric["mean"], metric["errors"]) == (10, 1.0, 0)
    score = stored(workdir, out["run_id"])[("hotel-loop", "session-goal-completion")].scores[0]
    assert score.metadata["template"] == "session-goal-completion/v1"
    assert score.metadata["goal"] == "travel"


def test_what_the_harness_recorded_is_counted_by_hand(
    run_evalsi: Callable[..., Any], workdir: Path
) -> None:
    out = run_json(
        run_evalsi, workdir, command_with("policy-violations,approval-requests,fault-recovery")
    )
    m = {x["metric"]: x for x in out["metrics"]}
    # harness-steps.jsonl: one policy block (wipe-attempt), one denied approval
    # (refund-blocked), two faults: search-retry got past its timeout, gave-up did not
    assert (m["policy-violations"]["n"], m["policy-violations"]["mean"]) == (4, 0.25)
    assert m["policy-clean"]["mean"] == 0.75
    assert m["approval-requests"]["mean"] == m["approvals-denied"]["mean"] == 0.25
    assert (m["fault-recovery"]["n"], m["fault-recovery"]["skipped"]) == (2, 2)
    assert m["fault-recovery"]["mean"] == m["recovered-all"]["mean"] == 0.5


# predicates.jsonl, by hand: the booking (2 turns, 10 steps), the blocked wipe (5 steps), the
# refund (a timed-out lookup, JSON answer, a failed check; 7 steps), the hotel search (3 failed
# calls, no checks; 7 steps).
PREDICATES = ["book-then-weather", "wipe-blocked", "refund-failed", "search-loop"]


def test_predicates_as_the_guide_runs_them(run_evalsi: Callable[..., Any], workdir: Path) -> None:
    assert [r["id"] for r in load_jsonl(EXAMPLES / "predicates.jsonl")] == PREDICATES
    out = run_json(run_evalsi, workdir, command_with("tool-called,tool-order,final-answer"))
    m = {x["metric"]: x for x in out["metrics"]}
    # book_flight with flight_id TP523 and search→book in turn 1: the booking only; a JSON
    # answer with status refunded: the refund only
    assert {k: (v["n"], v["mean"]) for k, v in m.items()} == {
        "tool-called": (4, 0.25),
        "tool-order": (4, 0.25),
        "final-answer": (4, 0.25),
    }
    results = stored(workdir, out["run_id"])
    assert results[("book-then-weather", "tool-order")].scores[0].explanation == (
        "in order in turn 1: search_flights at step 3, book_flight at step 5"
    )
    out = run_json(
        run_evalsi, workdir, command_with("tool-not-called,tool-count,no-tool-error,within-budget")
    )
    m = {x["metric"]: x for x in out["metrics"]}
    assert m["tool-not-called"]["mean"] == 1.0  # the blocked wipe was not a call
    assert m["tool-count"]["mean"] == 0.75  # search_hotels 3 times
    assert m["no-tool-error"]["mean"] == 0.5  # the refund's lookup, the hotel search
    assert m["within-budget"]["mean"] == 0.75  # the booking: 10 steps of 8
    results = stored(workdir, out["run_id"])
    assert results[("search-loop", "tool-count")].scores[0].explanation == (
        "search_hotels called 3 time(s) (steps 2, 4, 6); expected at most 2"
    )


def test_a_call_the_policy_blocked_is_not_measured(
    run_evalsi: Callable[..., Any], workdir: Path
) -> None:
    out = run_json(run_evalsi, workdir, command_with("tool-called"))
    (metric,) = out["metrics"]
    assert (metric["n"], metric["skipped"], metric["mean"]) == (3, 1, 0.0)
    wipe = stored(workdir, out["run_id"])[("wipe-blocked", "tool-called")]
    assert wipe.outcome is Outcome.SKIPPED
    assert wipe.reason == (
        "not_measured(blocked_by_policy): wipe_db was blocked by the tool policy at step 2 "
        "(wipe_db is destructive, blocked by default) and never called"
    )


def test_task_success_and_agent_efficiency(run_evalsi: Callable[..., Any], workdir: Path) -> None:
    out = run_json(run_evalsi, workdir, command_with("task-success,agent-efficiency"))
    m = {x["metric"]: x for x in out["metrics"]}
    assert (m["task-success"]["n"], m["task-success"]["skipped"]) == (3, 1)  # search: no checks
    assert m["task-success"]["mean"] == pytest.approx(2 / 3)
    assert m["checks-passed"]["mean"] == pytest.approx((1 + 1 + 0.5) / 3)
    assert m["agent-efficiency"]["mean"] == 0.75
    assert m["task-steps"]["mean"] == pytest.approx((10 + 5 + 7 + 7) / 4)
    assert m["task-tokens"]["mean"] == pytest.approx((760 + 410 + 540 + 520) / 4)
    assert m["task-cost-usd"]["n"] == 3  # the hotel search's steps carry no cost
    assert m["steps-budget-share"]["mean"] == pytest.approx((10 + 5 + 7 + 7) / 4 / 8)
    refund = stored(workdir, out["run_id"])[("refund-failed", "task-success")].scores[0]
    assert (
        refund.explanation == "1 of 2 check(s) failed: refund_amount (expected 40 EUR, got 4 EUR)"
    )
