"""``session-goal-completion``: the prompt it builds, parsing the verdict (with a scripted judge),
the records it skips, and the example dataset graded over HTTP by the stub LLM."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import evalsi
from evalsi.core import Content, Message, Outcome, ParamError, Record, Step, ToolCall
from evalsi.datasets import FieldMap, record_from_dict
from evalsi.evaluators import JudgeClient, RecordRunner, use_judges
from evalsi.packs.agent import TEMPLATES
from evalsi.packs.agent._goal import GOAL_TEMPLATE, session_goal_completion, steps_block
from evalsi.packs.judge import LLM_JUDGE_TEMPLATE, REPAIR_PROMPT
from evalsi.packs.judge._ask import PromptTemplate
from tests.support.stub_llm import OPENAI_PATH, StubLLM
from tests.unit.packs.agent_support import agent_record, llm, tool
from tests.unit.packs.judge.judge_support import ScriptedJudge, stub_judges

DATA = Path(__file__).resolve().parents[3] / "examples" / "agent" / "trips.jsonl"

ACHIEVED = '{"goal": "book a flight", "achieved": true, "explanation": "booked and confirmed"}'


def grade(record: Record, judge: JudgeClient, **params: Any) -> Any:
    runner = RecordRunner(session_goal_completion.bind(params))

    async def go() -> Any:
        with use_judges({"default": judge}):
            return await runner.run_async([record])

    (result,) = asyncio.run(go())
    return result


def booking() -> Record:
    return agent_record(
        llm(output="calling search"),
        tool("search_flights", '{"to": "LIS"}', output=[{"id": "TP523"}]),
        tool("book_flight", {"flight_id": "TP523"}, error="card declined"),
        input=Content.of_messages(
            [
                Message(role="system", content="You book trips."),
                Message(role="user", content="Book me a flight to Lisbon."),
            ]
        ),
        output=Content.of_text("I could not book it: your card was declined."),
    )


def test_the_prompt_shows_the_session() -> None:
    judge = ScriptedJudge(ACHIEVED)
    result = grade(booking(), judge)
    assert result.outcome is Outcome.SCORED, result.reason
    (system, user) = judge.asked[0]
    assert system.content == GOAL_TEMPLATE.system
    text = user.content or ""
    assert "# The user's goal" not in text  # none given: the judge reads it off the input
    assert "system: You book trips.\nuser: Book me a flight to Lisbon." in text
    assert (
        "1. [llm_call] model -> calling search\n"
        '2. [tool_call] search_flights({"to":"LIS"}) -> [{"id":"TP523"}]\n'
        '3. [tool_call] book_flight({"flight_id":"TP523"}) ERROR: card declined\n'
    ) in text
    assert "# Final answer\nI could not book it: your card was declined." in text


def test_the_verdict_becomes_pass_fail_with_metadata() -> None:
    result = grade(booking(), ScriptedJudge(ACHIEVED))
    (score,) = result.scores
    assert score.passed is True
    assert score.explanation == "booked and confirmed"
    assert score.metadata["goal"] == "book a flight"
    assert score.metadata["template"] == "session-goal-completion/v1"
    assert score.metadata["template_hash"] == GOAL_TEMPLATE.hash
    assert score.cost is not None
    assert score.cost.total_tokens == 15
    failed = grade(booking(), ScriptedJudge('{"achieved": "false", "explanation": "declined"}'))
    assert failed.scores[0].passed is False


def test_a_given_goal_is_shown() -> None:
    judge = ScriptedJudge(ACHIEVED)
    grade(booking(), judge, goal="Book the cheapest flight to Lisbon.")
    assert "# The user's goal\nBook the cheapest flight to Lisbon.\n" in (
        judge.asked[0][1].content or ""
    )
    record = booking()
    record.metadata["goal"] = "From metadata."
    judge = ScriptedJudge(ACHIEVED)
    grade(record, judge)
    assert "# The user's goal\nFrom metadata.\n" in (judge.asked[0][1].content or "")


def test_one_repair_request_then_an_error() -> None:
    judge = ScriptedJudge("Yes, it worked.", ACHIEVED)
    result = grade(booking(), judge)
    assert result.scores[0].metadata["repaired"] is True
    assert judge.asked[1][-1].content == REPAIR_PROMPT
    result = grade(booking(), ScriptedJudge("Yes.", '{"achieved": "maybe"}'))
    assert result.outcome is Outcome.ERROR
    assert "no boolean 'achieved'" in result.reason


def test_records_it_cannot_judge_are_skipped() -> None:
    judge = ScriptedJudge(ACHIEVED)
    no_goal = agent_record(tool("a"), output=Content.of_text("done"))
    assert grade(no_goal, judge).reason == (
        "record has no goal: give an input, metadata.goal or the param 'goal'"
    )
    nothing_done = Record(id="r", input=Content.of_text("Book a flight."))
    assert grade(nothing_done, judge).reason.startswith("record has no trajectory and no output")
    assert judge.asked == []
    with_goal = grade(no_goal, judge, goal="Do a.")
    assert with_goal.outcome is Outcome.SCORED
    bad = agent_record(tool("a"), metadata={"goal": 3})
    assert grade(bad, judge).reason == "ValueError: metadata.goal: expected a string, got int"


def test_no_judge_configured_is_a_skip() -> None:
    runner = RecordRunner(session_goal_completion.bind({"judge": "strict"}))
    (result,) = asyncio.run(runner.run_async([booking()]))
    assert result.outcome is Outcome.SKIPPED
    assert result.reason.startswith("no judge named 'strict' configured")


def test_long_trajectories_keep_the_first_and_last_steps() -> None:
    steps = [Step(kind="tool_call", tool_call=ToolCall(f"t{i:03d}")) for i in range(1, 201)]
    text = steps_block(steps, 100, 600)
    assert len(text) <= 600
    lines = text.splitlines()
    assert lines[0] == "1. [tool_call] t001({})"
    assert lines[-1] == "200. [tool_call] t200({})"
    (elided,) = [line for line in lines if "left out" in line]
    shown = len(lines) - 1
    assert elided == f"... ({200 - shown} steps left out) ..."
    assert steps_block([Step(output="x" * 50)], 20, 1000) == "1. [other] - -> " + "x" * 20 + "…"


def test_params() -> None:
    for params in ({"goal": " "}, {"step_chars": 5}, {"step_chars": 100, "max_chars": 50}):
        with pytest.raises(ParamError):
            session_goal_completion.bind(params)


def test_template_is_versioned_and_distinct() -> None:
    assert TEMPLATES == (GOAL_TEMPLATE,)
    assert isinstance(GOAL_TEMPLATE, PromptTemplate)
    assert GOAL_TEMPLATE.hash.startswith("sha256:")
    assert GOAL_TEMPLATE.hash != LLM_JUDGE_TEMPLATE.hash


def test_example_dataset_over_http(tmp_path: Path) -> None:
    """The judge answers each example record by its hand label (metadata.goal_achieved)."""
    rows = [json.loads(line) for line in DATA.read_text().splitlines()]
    bound = session_goal_completion.bind({})
    answers = {}
    for i, row in enumerate(rows, 1):
        record = record_from_dict(row, FieldMap(), line=i, path=str(DATA))
        prompt = bound.instance.messages(record)[-1].content
        label = row["metadata"]["goal_achieved"]
        answers[prompt] = json.dumps({"achieved": label, "explanation": row["id"]})
    with StubLLM(answers=answers, default="unexpected prompt") as stub:
        result = evalsi.evaluate(
            str(DATA),
            ["session-goal-completion"],
            judges=stub_judges(stub.openai_url),
            store=str(tmp_path / "s.db"),
        )
        assert stub.calls(OPENAI_PATH) == len(rows)
    by_id = {r.record_id: r.scores[0] for r in result.results}
    assert {k: s.passed for k, s in by_id.items()} == {
        r["id"]: r["metadata"]["goal_achieved"] for r in rows
    }
    assert all(s.explanation == k for k, s in by_id.items())
    metric = result.metric("session-goal-completion")
    assert metric.n == 10
    assert metric.mean == pytest.approx(0.7)  # 7 of 10 achieved, by hand
