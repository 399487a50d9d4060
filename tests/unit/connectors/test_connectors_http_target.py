"""The generic HTTP target: JSON templating by structure, JSONPath extraction."""

from __future__ import annotations

import pytest

from evalsi.connectors import (
    HttpTarget,
    InfraError,
    JsonPath,
    JsonPathMiss,
    Resilience,
    RetryPolicy,
    TargetError,
    render,
)
from evalsi.core import Content, Message, UserError
from tests.support.aio import run
from tests.support.stub_llm import Fault, StubLLM


def _target(stub: StubLLM, path: str = "/svc/answer", **kwargs: object) -> HttpTarget:
    resilience = Resilience(retry=RetryPolicy(max_attempts=2, base_delay=0.01))
    return HttpTarget(stub.url + path, resilience=resilience, **kwargs)  # type: ignore[arg-type]


# -- templating -----------------------------------------------------------------------------


def test_render_walks_the_structure() -> None:
    template = {
        "input": "{{input}}",
        "nested": [{"q": "Question: {{ input }}"}, 3, None, True],
        "meta": {"lang": "{{lang}}", "user": "{{user.name}}"},
    }
    variables = {"input": "2+2?", "lang": "en", "user": {"name": "ana"}}
    assert render(template, variables) == {
        "input": "2+2?",
        "nested": [{"q": "Question: 2+2?"}, 3, None, True],
        "meta": {"lang": "en", "user": "ana"},
    }


def test_a_whole_placeholder_keeps_the_type_and_a_partial_one_uses_json_text() -> None:
    messages = [{"role": "user", "content": "hi"}]
    assert render({"m": "{{input}}"}, {"input": messages}) == {"m": messages}
    assert render({"m": "x={{input}}"}, {"input": {"a": 1}}) == {"m": 'x={"a":1}'}
    assert render({"n": "{{input}}"}, {"input": 3}) == {"n": 3}


def test_input_cannot_change_the_shape_of_the_request() -> None:
    hostile = '", "admin": true, "x": "{{input}}'
    rendered = render({"q": "{{input}}", "note": "say {{input}}"}, {"input": hostile})
    assert rendered == {"q": hostile, "note": f"say {hostile}"}
    assert set(rendered) == {"q", "note"}  # substituted once, never re-read


def test_unknown_placeholders_are_refused_when_the_target_is_built() -> None:
    with pytest.raises(UserError, match=r"unknown template placeholder\(s\) \{\{question\}\}"):
        HttpTarget("http://h/x", body={"q": "{{question}}"})
    with pytest.raises(UserError, match="carries no body"):
        HttpTarget("http://h/x", method="GET", body={"q": "{{input}}"})


# -- JSONPath subset ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("$", {"a": {"b": [{"c": 1}, {"c": 2}]}, "odd key": "v"}),
        ("$.a.b[0].c", 1),
        ("$.a.b[-1].c", 2),
        ("$['odd key']", "v"),
        ('$["a"]["b"][1]', {"c": 2}),
    ],
)
def test_jsonpath_finds(path: str, expected: object) -> None:
    document = {"a": {"b": [{"c": 1}, {"c": 2}]}, "odd key": "v"}
    assert JsonPath(path).find(document) == expected


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("$.a.x", r"\$.a has no key 'x' \(keys: b\)"),
        ("$.a.b[5]", r"\$.a.b has 2 items; no index 5"),
        ("$.a.b.c", r"\$.a.b is an array, not an object"),
        ("$.a.b[0].c[0]", r"\$.a.b\[0\].c is a number, not an array"),
    ],
)
def test_jsonpath_misses_say_where(path: str, message: str) -> None:
    with pytest.raises(JsonPathMiss, match=message):
        JsonPath(path).find({"a": {"b": [{"c": 1}, {"c": 2}]}})


@pytest.mark.parametrize("path", ["a.b", "$.a[*]", "$..a", "$.a[?(@.x)]", "$.a[0:2]", "$.a."])
def test_unsupported_jsonpath_is_a_user_error(path: str) -> None:
    with pytest.raises(UserError, match="output path"):
        JsonPath(path)


# -- against the stub -----------------------------------------------------------------------


def test_post_with_a_template_and_extraction(stub_llm: StubLLM) -> None:
    stub_llm.configure({"answers": {"2+2?": "4"}})
    target = _target(
        stub_llm,
        body={"input": "{{input}}", "options": {"lang": "{{lang}}"}},
        variables={"lang": "en"},
        output="$.answer",
    )
    out = run(target.invoke(Content.of_text("2+2?")))
    assert out.output == Content.of_text("4")
    assert out.usage.latency_ms is not None
    request = stub_llm.requests()[0]
    assert request.method == "POST"
    assert request.body == {"input": "2+2?", "options": {"lang": "en"}}


def test_extraction_of_a_structured_value_gives_json(stub_llm: StubLLM) -> None:
    target = _target(stub_llm, body={"input": "{{input}}", "tags": ["a", "b"]}, output="$.json")
    out = run(target.invoke("x"))
    assert out.output == Content.of_json({"input": "x", "tags": ["a", "b"]})


def test_messages_input_is_sent_as_a_list(stub_llm: StubLLM) -> None:
    target = _target(stub_llm, body={"messages": "{{input}}"}, output="$.json.messages[0].content")
    out = run(target.invoke([Message(role="user", content="hello")]))
    assert out.output == Content.of_text("hello")


def test_get_with_an_url_encoded_placeholder(stub_llm: StubLLM) -> None:
    stub_llm.configure({"answers": {"a b&c": "ok"}})
    target = _target(stub_llm, path="/svc/q?q={{input}}", method="GET", output="$.answer")
    out = run(target.invoke("a b&c"))
    assert out.output == Content.of_text("ok")
    assert stub_llm.requests()[0].method == "GET"


def test_a_path_that_does_not_match_is_a_target_error(stub_llm: StubLLM) -> None:
    target = _target(stub_llm, body={"input": "{{input}}"}, output="$.result.text")
    with pytest.raises(TargetError, match=r"output path \$.result.text does not match") as caught:
        run(target.invoke("x"))
    assert "has no key 'result'" in str(caught.value)
    assert stub_llm.calls() == 1  # not retried


def test_no_output_path_takes_the_whole_reply(stub_llm: StubLLM) -> None:
    out = run(_target(stub_llm, body={"input": "{{input}}"}).invoke("x"))
    assert out.output.kind == "json"
    assert out.output.value["answer"] == "x"


def test_non_json_with_an_output_path_is_malformed_and_5xx_is_retried(stub_llm: StubLLM) -> None:
    target = _target(stub_llm, body={"input": "{{input}}"}, output="$.answer")
    stub_llm.schedule(Fault(status=502))
    assert run(target.invoke("x")).attempts == 2  # 502, then a good answer
    stub_llm.schedule(Fault(malformed=True), Fault(malformed=True))
    with pytest.raises(InfraError) as caught:
        run(target.invoke("x"))
    assert caught.value.kind == "malformed_response"
    assert caught.value.attempts == 2


def test_the_trial_seed_is_sent_only_where_the_template_asks(stub_llm: StubLLM) -> None:
    seeded = _target(stub_llm, body={"input": "{{input}}", "seed": "{{seed}}"}, output="$.json")
    plain = _target(stub_llm, body={"input": "{{input}}"}, output="$.json")
    assert seeded.supports_seed
    assert not plain.supports_seed
    assert run(seeded.invoke("x", seed=11)).output == Content.of_json({"input": "x", "seed": 11})
    assert run(plain.invoke("x", seed=11)).output == Content.of_json({"input": "x"})
