"""Judge specs: from mappings, from YAML, cache keys, and the no-default-judge rule."""

from __future__ import annotations

import pytest

from evalsi.core import Message, UserError
from evalsi.packs import builtin_registry
from evalsi.runs._judges import StoreJudge, check_judges, judge_specs
from evalsi.specs import JudgeSpec
from evalsi.store import SqlStore

REG = builtin_registry(entry_points=False)


def test_specs_from_mappings() -> None:
    specs = judge_specs({"default": {"baseUrl": "http://x/v1", "model": "m", "maxConcurrency": 4}})
    assert specs["default"] == JudgeSpec(
        model="m", base_url="http://x/v1", name="default", max_concurrency=4
    )
    with pytest.raises(UserError, match="unknown field"):
        judge_specs({"default": {"model": "m", "apiKey": "sk-1"}})
    with pytest.raises(UserError, match="model is required"):
        judge_specs({"default": {"baseUrl": "http://x/v1"}})


def test_missing_judge_is_refused() -> None:
    bound = [REG.resolve("llm-judge").bind({"rubric": "r", "judge": "strict"}, alias="strict")]
    with pytest.raises(UserError, match="strict needs a judge named 'strict'"):
        check_judges(bound, {"default": JudgeSpec(model="m", base_url="http://x/v1")})
    check_judges(bound, {"strict": JudgeSpec(model="m", base_url="http://x/v1")})
    check_judges([REG.resolve("exact-match").bind()], {})  # no judge evaluator, no judge needed


def test_cache_key_covers_model_params_template_and_messages() -> None:
    store = SqlStore.open(":memory:")
    base = JudgeSpec(model="m", base_url="http://x/v1", params={"temperature": 0})
    msgs = [Message(role="user", content="grade this")]

    def key(spec: JudgeSpec, messages: list[Message] = msgs, template: str = "t1") -> str:
        return StoreJudge(spec, store).cache_key(messages, seed=None, template=template)

    k = key(base)
    assert key(JudgeSpec(model="m", base_url="http://x/v1", params={"temperature": 0})) == k
    assert key(JudgeSpec(model="m2", base_url="http://x/v1", params={"temperature": 0})) != k
    assert key(JudgeSpec(model="m", base_url="http://x/v1", params={"temperature": 1})) != k
    assert key(base, template="t2") != k
    assert key(base, [Message(role="user", content="grade that")]) != k
    # the name and the secret reference are not part of what determines an answer
    assert (
        key(JudgeSpec(model="m", base_url="http://x/v1", params={"temperature": 0}, name="x")) == k
    )
    store.close()


def test_unknown_connector() -> None:
    with pytest.raises(UserError, match="unknown connector"):
        StoreJudge(
            JudgeSpec(model="m", base_url="http://x", connector="bard"), SqlStore.open(":memory:")
        )
