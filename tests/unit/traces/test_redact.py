"""Redaction at ingest: rules, key globs, nested values, shared resources, config errors."""

from __future__ import annotations

import pytest

from evalsi.core import Span, SpanEvent, SpanLink, UserError
from evalsi.traces import Redactor, parse_rules

EMAIL = r"[\w.+-]+@[\w-]+\.[\w.]+"


def rules(*items: dict[str, object]) -> Redactor:
    return Redactor(parse_rules(list(items)))


def test_replaces_matches_in_attributes_events_links_resource_and_status() -> None:
    resource = {"service.name": "svc", "owner": "ops@example.com"}
    s = Span(
        trace_id="1" * 32,
        span_id="2" * 16,
        attributes={"input.value": "mail bob@example.com now", "n": 3},
        events=[SpanEvent("gen_ai.user.message", 0, {"content": "a@b.io and c@d.io"})],
        resource=resource,
        status_message="failed for x@y.org",
        links=[SpanLink("3" * 32, "4" * 16, {"from": "me@example.com"})],
    )
    rules({"pattern": EMAIL, "replacement": "[EMAIL]"}).spans([s])
    assert s.links[0].attributes == {"from": "[EMAIL]"}
    assert s.attributes == {"input.value": "mail [EMAIL] now", "n": 3}
    assert s.events[0].attributes["content"] == "[EMAIL] and [EMAIL]"
    assert resource["owner"] == "[EMAIL]"
    assert s.status_message == "failed for [EMAIL]"


def test_nested_lists_and_maps_are_redacted() -> None:
    s = Span(
        trace_id="1" * 32,
        span_id="2" * 16,
        attributes={"msgs": ["hi", {"content": "key sk-abcdef0123456789abcd"}]},
    )
    rules({"pattern": r"sk-[A-Za-z0-9]{20,}", "replacement": "[KEY]"}).spans([s])
    assert s.attributes["msgs"] == ["hi", {"content": "key [KEY]"}]


def test_key_globs_limit_a_rule() -> None:
    s = Span(
        trace_id="1" * 32,
        span_id="2" * 16,
        attributes={"gen_ai.prompt": "4111 1111", "http.url": "4111 1111"},
    )
    rules({"pattern": r"\d{4} \d{4}", "keys": ["gen_ai.*"]}).spans([s])
    assert s.attributes == {"gen_ai.prompt": "[REDACTED]", "http.url": "4111 1111"}


def test_key_globs_reach_message_events_by_their_name() -> None:
    """``keys: ['gen_ai.*']`` redacts a message's content whether it is an attribute, a span
    event's ``content`` or a log record's body (``event.body``), and nothing else's."""
    key = "sk-abcdef0123456789abcd"
    rule = {"pattern": r"sk-[A-Za-z0-9]{20,}", "replacement": "[KEY]", "keys": ["gen_ai.*"]}
    on_span = SpanEvent("gen_ai.user.message", 0, {"content": f"use {key}"})
    other = SpanEvent("exception", 0, {"exception.message": f"bad {key}"})
    s = Span(trace_id="1" * 32, span_id="2" * 16, events=[on_span, other])
    logged = SpanEvent("gen_ai.choice", 0, {"event.body": {"message": {"content": key}}})
    redactor = rules(rule)
    redactor.spans([s])
    redactor.events([logged])
    assert on_span.attributes == {"content": "use [KEY]"}
    assert logged.attributes == {"event.body": {"message": {"content": "[KEY]"}}}
    assert other.attributes == {"exception.message": f"bad {key}"}  # not a gen_ai.* event


def test_rules_apply_in_order() -> None:
    s = Span(trace_id="1" * 32, span_id="2" * 16, attributes={"a": "secret"})
    rules({"pattern": "secret", "replacement": "XX"}, {"pattern": "XX", "replacement": "Y"}).spans(
        [s]
    )
    assert s.attributes["a"] == "Y"


def test_no_rules_changes_nothing_and_is_falsy() -> None:
    r = Redactor(())
    attrs = {"a": "bob@example.com"}
    r.spans([Span(trace_id="1" * 32, span_id="2" * 16, attributes=attrs)])
    assert not r
    assert attrs == {"a": "bob@example.com"}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("x", "expected a list of rules"),
        ([3], "traces.redaction[0]: expected a mapping"),
        (
            [{"pattern": "("}],
            "traces.redaction[0].pattern: '(' is not a valid regular expression: missing ): (",
        ),
        (
            [{"pattern": "a"}, {"pattern": r"(a)x\1"}],
            "traces.redaction[1].pattern: '(a)x\\\\1' is not a valid regular expression",
        ),
        ([{"pattern": "(?<=key=)\\w+"}], "hint: patterns use RE2 syntax"),
        ([{"pattern": "a" * 1001}], "traces.redaction[0].pattern: expected a regex of 1-1000"),
        ([{"pattern": ""}], "traces.redaction[0].pattern: expected a regex"),
        ([{"pattern": "a", "colour": 1}], "unknown field(s) colour"),
        ([{"pattern": "a", "keys": "x"}], "traces.redaction[0].keys"),
        ([{"pattern": "a", "replacement": 1}], "traces.redaction[0].replacement"),
    ],
)
def test_bad_rules_name_the_place(value: object, message: str) -> None:
    with pytest.raises(UserError, match=None) as e:
        parse_rules(value)
    assert message in str(e.value)


@pytest.mark.parametrize(
    "items",
    [
        # inline flags mid-pattern: RE2 scopes them to their group
        [{"pattern": "zzz"}, {"pattern": r"(?i)SK-\w+"}],
        # the same group name in two rules: the union is compiled without captures
        [{"pattern": r"(?P<k>tok)-\d+"}, {"pattern": r"(?P<k>'sk)-\w+'"}],
    ],
)
def test_rules_with_flags_or_groups_combine_and_redact(items: list[dict[str, object]]) -> None:
    redactor = rules(*items)
    assert redactor._any is not None
    s = Span(trace_id="1" * 32, span_id="2" * 16, attributes={"a": "x='sk-secret123' y"})
    redactor.spans([s])
    assert "secret123" not in s.attributes["a"]


def test_replacement_templates_and_unicode_classes() -> None:
    s = Span(
        trace_id="1" * 32,
        span_id="2" * 16,
        attributes={"a": "ключ=Секрет42 и token=abc", "b": "x\u3000y"},
    )
    rules(
        {"pattern": r"(?P<k>\w+)=\w+", "replacement": r"\g<k>=[\1]"},
        {"pattern": r"x\sy", "replacement": "XY"},
    ).spans([s])
    assert s.attributes == {"a": "ключ=[ключ] и token=[token]", "b": "XY"}


def test_a_catastrophic_pattern_redacts_in_linear_time() -> None:
    """Python's re would try 2**40 ways to split the a's before failing on the "!"."""
    import threading

    s = Span(trace_id="1" * 32, span_id="2" * 16, attributes={"a": "a" * 40 + "!"})
    redactor = rules({"pattern": r"^(a+)+$"}, {"pattern": "!", "replacement": "?"})
    worker = threading.Thread(target=redactor.spans, args=([s],), daemon=True)
    worker.start()
    worker.join(timeout=5)
    assert s.attributes == {"a": "a" * 40 + "?"}
