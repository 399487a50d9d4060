"""Inputs that once slipped through decoding and then failed the store (found in review):
a lone surrogate in OTLP/JSON, and token counts too large for a 64-bit column."""

from __future__ import annotations

import pytest

from evalsi.core import Span
from evalsi.server.otlp._decode import DecodeError, decode_json
from evalsi.traces import normalize


def test_a_lone_surrogate_in_json_is_a_400_not_a_store_failure() -> None:
    body = (
        b'{"resourceSpans":[{"resource":{"attributes":[{"key":"a","value":'
        b'{"stringValue":"\\ud800"}}]}}]}'
    )
    with pytest.raises(DecodeError, match="surrogate"):
        decode_json(body)


@pytest.mark.parametrize("count", [1e300, 2**63, 2**53, "9999999999999999999"])
def test_absurd_token_counts_are_unknown(count: object) -> None:
    span = Span(
        "ab" * 16,
        "cd" * 8,
        attributes={"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": count},
    )
    view = normalize(span)
    assert view.usage is None or view.usage.input_tokens is None
