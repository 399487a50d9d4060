"""Evidence projection: what a judge sees of a record, its byte budget (over it the judge is
never asked), its fingerprint in the judge cache key, and the ``evidence`` param."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalsi.connectors import close_shared_session
from evalsi.core import (
    Check,
    Content,
    Message,
    Outcome,
    ParamError,
    Record,
    Trajectory,
    Usage,
)
from evalsi.evaluators import JudgeReply, RecordRunner, use_judges
from evalsi.packs import builtin_registry
from evalsi.packs.agent._goal import GOAL_TEMPLATE
from evalsi.packs.judge import (
    LLM_JUDGE_TEMPLATE,
    PARTS,
    PROJECTION_VERSION,
    Projection,
    Unavailable,
    prompt_identity,
)
from evalsi.packs.rag._grounding import FAITHFULNESS_TEMPLATE
from evalsi.runs._judges import build_judges, judge_specs
from evalsi.store import SqlStore
from tests.support.stub_llm import OPENAI_PATH, StubLLM
from tests.unit.packs.agent_support import llm, tool
from tests.unit.packs.judge.judge_support import stub_judges

REG = builtin_registry(entry_points=False)
SRC = Path(__file__).resolve().parents[4] / "src"

SCORE = '{"score": 1, "explanation": "fine"}'
VERDICTS = {
    "llm-judge": SCORE,
    "g-eval": '{"steps": "ok", "score": 5, "explanation": "fine"}',
    "reference-correctness": '{"correct": true, "explanation": "same answer"}',
    "session-goal-completion": '{"goal": "g", "achieved": true, "explanation": "done"}',
    "faithfulness": '{"claims": [{"claim": "Paris is the capital", "supported": true}]}',
}
PARAMS: dict[str, dict[str, Any]] = {
    "llm-judge": {"rubric": "correct"},
    "g-eval": {"criteria": "Correctness"},
    "reference-correctness": {},
    "session-goal-completion": {},
    "faithfulness": {},
}


class CountingJudge:
    """A fake judge that counts its calls and records the messages and cache identity."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.asked: list[list[Message]] = []
        self.templates: list[str] = []

    async def complete(
        self, messages: list[Message], *, seed: int | None = None, template: str = ""
    ) -> JudgeReply:
        self.asked.append(list(messages))
        self.templates.append(template)
        return JudgeReply(self.answer, Usage(input_tokens=1, output_tokens=1, total_tokens=2))

    def identity(self) -> dict[str, Any]:
        return {"model": "counting"}

    def prompt(self, call: int = 0) -> str:
        return self.asked[call][-1].content or ""


def full_record(output: str = "Paris is the capital of France.") -> Record:
    """A record holding every part a projection can include."""
    return Record(
        id="r1",
        input=Content.of_text("Capital of France?"),
        output=Content.of_text(output),
        reference=Content.of_text("Paris"),
        context=[Content.of_json({"id": "d1", "text": "Paris is the capital of France."})],
        trajectory=Trajectory(
            [llm(output="thinking"), tool("search", {"q": "capital of France"}, output="Paris")],
            stop_reason="final_answer",
            checks=[Check("answered", True)],
            end_state={"answer": "Paris"},
        ),
        metadata={"tier": "gold", "goal": "learn the capital", "other": 1},
    )


def grade(name: str, record: Record, judge: CountingJudge, **params: Any) -> Any:
    runner = RecordRunner(REG.resolve(name).bind({**PARAMS[name], **params}))

    async def go() -> Any:
        with use_judges({"default": judge}):
            return await runner.run_async([record])

    (result,) = asyncio.run(go())
    return result


# -- what each part projects --------------------------------------------------------------------

EXPECTED: dict[str, Any] = {
    "input": "Capital of France?",
    "output": "Paris is the capital of France.",
    "reference": "Paris",
    "context": [{"id": "d1", "text": "Paris is the capital of France."}],
    "metadata.tier": "gold",
    "trajectory.steps": [
        {"kind": "llm_call", "name": "model", "output": "thinking"},
        {
            "kind": "tool_call",
            "name": "search",
            "output": "Paris",
            "tool_call": {"name": "search", "arguments": {"q": "capital of France"}},
        },
    ],
    "trajectory.tool_calls": [
        {
            "kind": "tool_call",
            "name": "search",
            "output": "Paris",
            "tool_call": {"name": "search", "arguments": {"q": "capital of France"}},
        }
    ],
    "trajectory.stop_reason": "final_answer",
    "trajectory.checks": [{"name": "answered", "passed": True}],
    "trajectory.end_state": {"answer": "Paris"},
}


def test_the_vocabulary_is_covered() -> None:
    assert set(EXPECTED) == {*PARTS, "metadata.tier"}


@pytest.mark.parametrize("part", sorted(EXPECTED))
def test_each_part_projects_exactly_that_part(part: str) -> None:
    evidence = Projection((part,)).project(full_record())
    assert json.loads(evidence.json_text) == {part: EXPECTED[part]}
    assert evidence.parts == {part: EXPECTED[part]}


def test_a_part_the_record_lacks_is_left_out_not_null() -> None:
    record = Record(id="r", output=Content.of_text("x"))
    projection = Projection(("output", "reference", "metadata.tier", "trajectory.steps"))
    assert projection.project(record).json_text == '{"output":"x"}'


def test_the_projected_record_holds_only_the_included_parts() -> None:
    projection = Projection(("output", "metadata.tier", "trajectory.tool_calls"))
    seen, _ = projection.apply(full_record())
    assert seen.input is None
    assert seen.reference is None
    assert seen.context == []
    assert seen.output == full_record().output
    assert seen.metadata == {"tier": "gold"}
    assert seen.trajectory is not None
    assert [s.name for s in seen.trajectory.steps] == ["search"]
    assert seen.trajectory.checks == []
    assert seen.trajectory.end_state is None
    assert seen.usage is None


# -- bytes and the budget --------------------------------------------------------------------------

TEXT = "Ça coûte 5 € — 日本語 🎉"  # 1-, 2-, 3- and 4-byte UTF-8 characters


def test_size_counts_utf8_bytes_of_unescaped_json() -> None:
    record = Record(id="r", output=Content.of_text(TEXT))
    evidence = Projection(("output",)).project(record)
    assert evidence.json_text == '{"output":"' + TEXT + '"}'  # no \\u escapes
    assert evidence.size == len(evidence.json_text.encode("utf-8"))
    assert evidence.size == 13 + len(TEXT.encode("utf-8"))
    assert evidence.size > len(evidence.json_text)  # characters are not bytes


def test_budget_boundaries() -> None:
    record = Record(id="r", output=Content.of_text(TEXT))
    size = Projection(("output",)).project(record).size
    Projection(("output",), max_bytes=size).apply(record)  # exactly at the budget: shown
    Projection(("output",), max_bytes=10**12).apply(record)
    for limit in (size - 1, 0):
        with pytest.raises(Unavailable) as caught:
            Projection(("output",), max_bytes=limit).apply(record)
        assert caught.value.code == "over_budget"
        assert caught.value.reason == (
            f"unavailable(over_budget): evidence is {size} bytes, the projection allows {limit}"
        )


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_over_budget_the_judge_is_not_called(name: str) -> None:
    record = full_record(output=TEXT)
    judge = CountingJudge(VERDICTS[name])
    scored = grade(name, record, judge, evidence={})
    assert scored.outcome is Outcome.SCORED, scored.reason
    size = scored.scores[0].metadata["evidence"]["size"]
    assert judge.asked
    assert scored.scores[0].metadata["evidence"]["max_bytes"] is None

    judge = CountingJudge(VERDICTS[name])
    at = grade(name, record, judge, evidence={"max_bytes": size})
    assert at.outcome is Outcome.SCORED, at.reason
    assert at.scores[0].metadata["evidence"]["size"] == size
    assert len(judge.asked) == 1

    judge = CountingJudge(VERDICTS[name])
    over = grade(name, record, judge, evidence={"max_bytes": size - 1})
    assert over.outcome is Outcome.SKIPPED
    assert over.reason == (
        f"unavailable(over_budget): evidence is {size} bytes, the projection allows {size - 1}"
    )
    assert judge.asked == []  # never called: nothing cut to fit


# -- what the judge is shown --------------------------------------------------------------------


def test_without_the_param_prompts_and_cache_identity_are_as_before() -> None:
    plain, budgeted = CountingJudge(SCORE), CountingJudge(SCORE)
    grade("llm-judge", full_record(), plain)
    result = grade("llm-judge", full_record(), budgeted, evidence={"max_bytes": 10_000})
    assert plain.templates == [LLM_JUDGE_TEMPLATE.hash]  # the cache keys of old runs hold
    assert (
        "evidence" not in grade("llm-judge", full_record(), CountingJudge(SCORE)).scores[0].metadata
    )
    assert budgeted.asked == plain.asked  # the default include renders the same prompt
    evidence = result.scores[0].metadata["evidence"]
    assert budgeted.templates == [
        prompt_identity(LLM_JUDGE_TEMPLATE, Projection(("input", "output", "reference"), 10_000)
                        .project(full_record()))
    ]  # fmt: skip
    assert evidence["include"] == ["input", "output", "reference"]
    assert evidence["version"] == PROJECTION_VERSION
    assert evidence["fingerprint"].startswith("sha256:")


def test_included_parts_without_a_section_get_one_and_left_out_parts_are_not_shown() -> None:
    judge = CountingJudge(SCORE)
    include = ["output", "metadata.tier", "trajectory.tool_calls"]
    grade("llm-judge", full_record(), judge, evidence={"include": include})
    prompt = judge.prompt()
    assert "# metadata.tier\ngold\n" in prompt
    assert '# trajectory.tool_calls\n[{"kind":"tool_call","name":"search"' in prompt
    assert "Capital of France?" not in prompt  # the input is not included
    assert "# Reference answer" not in prompt
    assert "thinking" not in prompt  # the llm step is not a tool call
    assert "Paris is the capital of France." in prompt


def test_goal_completion_shows_only_the_tool_calls() -> None:
    judge = CountingJudge(VERDICTS["session-goal-completion"])
    include = ["input", "output", "trajectory.tool_calls", "trajectory.checks"]
    result = grade("session-goal-completion", full_record(), judge, evidence={"include": include})
    assert result.outcome is Outcome.SCORED, result.reason
    prompt = judge.prompt()
    assert '1. [tool_call] search({"q":"capital of France"}) -> Paris' in prompt
    assert "thinking" not in prompt
    assert "learn the capital" not in prompt  # metadata.goal not included
    assert '# trajectory.checks\n[{"name":"answered","passed":true}]' in prompt
    assert result.scores[0].metadata["template_hash"] == GOAL_TEMPLATE.hash


def test_faithfulness_without_the_question() -> None:
    judge = CountingJudge(VERDICTS["faithfulness"])
    result = grade(
        "faithfulness", full_record(), judge, evidence={"include": ["context", "output"]}
    )
    assert result.outcome is Outcome.SCORED, result.reason
    assert "# Question\n(not given)" in judge.prompt()
    assert result.scores[0].metadata["template_hash"] == FAITHFULNESS_TEMPLATE.hash


# -- the fingerprint -------------------------------------------------------------------------------

PINNED = "sha256:94d54fdea9fc3b1c3bd3ed72a08a87f9c4e743b6ea2cce8a72947becaaf6f58d"


def pinned_record(*, reverse: bool = False) -> Record:
    metadata = {"tier": "gold", "b": 1}
    if reverse:
        metadata = dict(reversed(metadata.items()))
    return Record(
        id="r",
        input=Content.of_text("Où est la gare ?"),
        output=Content.of_text("À gauche, 200 m."),
        metadata=metadata,
    )


def test_the_fingerprint_is_pinned_and_the_same_in_another_process() -> None:
    projection = Projection(("output", "input", "metadata.tier"), max_bytes=100)
    evidence = projection.project(pinned_record())
    assert evidence.json_text == (
        '{"input":"Où est la gare ?","metadata.tier":"gold","output":"À gauche, 200 m."}'
    )
    assert evidence.fingerprint == PINNED  # a change here changes every projected cache key
    code = (
        "from evalsi.packs.judge import Projection\n"
        "from tests.unit.packs.judge.test_judge_projection import pinned_record\n"
        "r = pinned_record(reverse=True)\n"
        "print(Projection(('metadata.tier', 'input', 'output'), 100).project(r).fingerprint)\n"
    )
    path = os.pathsep.join([str(SRC), str(SRC.parent)])
    env = {**os.environ, "PYTHONPATH": path, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip() == PINNED


def test_the_fingerprint_changes_with_include_budget_version_and_content() -> None:
    record = full_record()
    base = Projection(("input", "output"), max_bytes=1000)
    prints = {
        base.project(record).fingerprint,
        Projection(("input", "output", "metadata.absent"), 1000).project(record).fingerprint,
        Projection(("input", "output"), max_bytes=1001).project(record).fingerprint,
        Projection(("input", "output")).project(record).fingerprint,
        Projection(("input", "output"), 1000, version="v2").project(record).fingerprint,
        base.project(full_record(output="Lyon")).fingerprint,
    }
    assert len(prints) == 6
    # the same declaration in another order is the same projection
    assert Projection(("output", "input", "input"), 1000) == base
    assert Projection(("output", "input"), 1000).project(record) == base.project(record)


def test_two_projections_never_share_a_cache_entry_in_the_store() -> None:
    """Two projections rendering the very same prompt, through the store-backed judge cache
    over HTTP: each is asked once; a re-run of either is a cache hit."""
    record = full_record()  # no metadata.absent: both projections render the same prompt
    shown = {"include": ["input", "output"]}
    wider = {"include": ["input", "output", "metadata.absent"]}
    bound = [
        REG.resolve("llm-judge").bind({"rubric": "r", "evidence": shown}, alias="a"),
        REG.resolve("llm-judge").bind({"rubric": "r", "evidence": wider}, alias="b"),
        REG.resolve("llm-judge").bind({"rubric": "r"}, alias="plain"),
    ]
    store = SqlStore.open(":memory:")
    with StubLLM(default=SCORE) as stub:
        judges = build_judges(judge_specs(stub_judges(stub.openai_url)), store, bound)

        async def go() -> list[Any]:
            out: list[Any] = []
            try:
                with use_judges(judges):
                    for b in [*bound, *bound]:
                        out.extend(await RecordRunner(b).run_async([record]))
            finally:
                await close_shared_session()
            return out

        results = asyncio.run(go())
        bodies = [r.body["messages"] for r in stub.requests(OPENAI_PATH)]
    assert len(bodies) == 3  # one call per projection (and one without), none on the re-run
    assert bodies[0] == bodies[1]  # the same prompt...
    prints = [r.scores[0].metadata["evidence"]["fingerprint"] for r in results[:2]]
    assert prints[0] != prints[1]  # ...under two fingerprints, so two cache entries
    assert [r.scores[0].metadata["cached"] for r in results] == [False] * 3 + [True] * 3
    judge = judges["default"]

    def key(body: list[dict[str, Any]], template: str) -> str:
        messages = [Message(role=m["role"], content=m["content"]) for m in body]
        return judge.cache_key(messages, seed=None, template=template)

    projected = [
        Projection(tuple(e["include"])).project(record) for e in (shown, wider)
    ]  # fmt: skip
    keys = [key(bodies[i], prompt_identity(LLM_JUDGE_TEMPLATE, projected[i])) for i in (0, 1)]
    plain = key(bodies[2], LLM_JUDGE_TEMPLATE.hash)  # without the param: the key it always had
    assert len({*keys, plain}) == 3
    for k in keys:
        hit = store.judge_cache_get(k)
        assert hit is not None
        assert hit[0] == SCORE
    assert store.judge_cache_get(plain) is not None
    store.close()


# -- the param ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "evidence", "message"),
    [
        ("llm-judge", {"max_byte": 10}, r"param 'evidence' has an unknown key 'max_byte'"),
        ("llm-judge", {"include": "output"}, r"param 'evidence\.include' must be a non-empty"),
        ("llm-judge", {"include": []}, r"param 'evidence\.include' must be a non-empty"),
        ("llm-judge", {"include": ["output", 3]}, r"param 'evidence\.include' must be a non"),
        ("llm-judge", {"include": ["output", "inputs"]}, r"unknown part 'inputs'"),
        ("llm-judge", {"include": ["output", "metadata."]}, r"unknown part 'metadata\.'"),
        ("llm-judge", {"include": ["input"]}, r"'evidence\.include' must list 'output'"),
        ("g-eval", {"include": ["input"]}, r"g-eval: param 'evidence\.include' must list 'out"),
        ("reference-correctness", {"include": ["output"]}, r"must list 'reference'"),
        (
            "llm-judge",
            {"include": ["output", "trajectory.steps", "trajectory.tool_calls"]},
            "lists both",
        ),
        ("llm-judge", {"max_bytes": -1}, r"param 'evidence\.max_bytes' must be a whole number"),
        ("llm-judge", {"max_bytes": 1.5}, r"param 'evidence\.max_bytes' must be a whole number"),
        ("llm-judge", {"max_bytes": True}, r"param 'evidence\.max_bytes' must be a whole number"),
        ("llm-judge", {"max_bytes": "1k"}, r"param 'evidence\.max_bytes' must be a whole number"),
        ("faithfulness", {"include": ["output", "context", "metadata.x"]}, r"cannot show"),
        ("session-goal-completion", {"include": ["outputs"]}, r"unknown part 'outputs'"),
        ("llm-judge", ["output"], r"param 'evidence' must be an object"),
    ],
)
def test_bad_evidence_params_are_refused_naming_the_key(
    name: str, evidence: Any, message: str
) -> None:
    with pytest.raises(ParamError, match=message):
        REG.resolve(name).bind({**PARAMS[name], "evidence": evidence})


def test_a_close_miss_gets_a_hint_and_the_cli_spelling_binds() -> None:
    with pytest.raises(ParamError) as caught:
        REG.resolve("llm-judge").bind({"rubric": "r", "evidence": {"include": ["ouput"]}})
    assert caught.value.hint == "did you mean 'output'?"
    bound = REG.resolve("llm-judge").bind(
        {"rubric": "r", "evidence": '{"include": ["output"], "max_bytes": 4096}'}
    )
    assert bound.instance.projection == Projection(("output",), 4096)
    schema = REG.resolve("llm-judge").manifest.params_schema["properties"]["evidence"]
    assert schema["type"] == ["object", "null"]


# -- properties --------------------------------------------------------------------------------

json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    output=st.text(),
    metadata=st.dictionaries(st.text(min_size=1), json_value, max_size=4),
    limit=st.none() | st.integers(min_value=0, max_value=400),
)
def test_size_is_the_utf8_length_and_nothing_is_ever_cut(
    output: str, metadata: dict[str, Any], limit: int | None
) -> None:
    record = Record(id="r", output=Content.of_text(output), metadata=metadata)
    include = ("output", *(f"metadata.{k}" for k in metadata))
    projection = Projection(include, max_bytes=limit)
    evidence = projection.project(record)
    assert evidence.size == len(evidence.json_text.encode("utf-8"))
    expected = {"output": output} | {
        f"metadata.{k}": v for k, v in metadata.items() if v is not None
    }
    assert json.loads(evidence.json_text) == expected  # every byte of every part, uncut
    assert evidence.over_budget == (limit is not None and evidence.size > limit)
    if evidence.over_budget:
        with pytest.raises(Unavailable):
            projection.apply(record)
    else:
        assert projection.apply(record)[1] == evidence


def test_a_value_json_cannot_hold_is_an_error_naming_the_record() -> None:
    record = Record(id="big", output=Content.of_text("x"), metadata={"n": 2**70})
    with pytest.raises(ValueError, match="evidence of record 'big' is not JSON"):
        Projection(("output", "metadata.n")).project(record)
