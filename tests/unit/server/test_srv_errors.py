"""The one exception mapping of every protocol: evalsi's errors keep their message and hint with
the right code and REST status; a bug of ours is INTERNAL with a fixed message, never its text."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
import sqlalchemy.exc
from connectrpc.code import Code
from connectrpc.errors import ConnectError

from evalsi.core import NotFoundError, RunError, SpecError, UserError
from evalsi.server._errors import (
    INTERNAL_MESSAGE,
    ErrorInterceptor,
    OversizeError,
    error_body,
    http_status,
    to_connect_error,
)


@pytest.mark.parametrize(
    ("exc", "code", "status"),
    [
        (UserError("evaluators[0].ref: unknown"), Code.INVALID_ARGUMENT, 400),
        (SpecError("spec.trials: expected an integer"), Code.INVALID_ARGUMENT, 400),
        (NotFoundError("no run 'x'"), Code.NOT_FOUND, 404),
        (OversizeError(1024), Code.RESOURCE_EXHAUSTED, 413),
        (RunError("the store is locked"), Code.UNAVAILABLE, 503),
    ],
)
def test_evalsi_errors_keep_their_message_with_their_code(
    exc: Exception, code: Code, status: int
) -> None:
    err = to_connect_error(exc)
    assert (err.code, http_status(err.code)) == (code, status)
    assert err.message.startswith(str(getattr(exc, "message", exc)))


def test_the_hint_travels_with_the_message() -> None:
    err = to_connect_error(UserError("page_size: too big", hint="ask for 1000 or fewer"))
    assert err.message == "page_size: too big (hint: ask for 1000 or fewer)"
    assert "maxBodyBytes" in to_connect_error(OversizeError(10)).message


def test_a_bug_is_internal_and_its_text_stays_in_the_log(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="evalsi.server"):
        err = to_connect_error(KeyError("secret-internal-detail"))
    assert (err.code, err.message, http_status(err.code)) == (Code.INTERNAL, INTERNAL_MESSAGE, 500)
    assert "secret-internal-detail" not in err.message
    assert any(r.exc_info for r in caplog.records)  # the traceback is the server's


def test_a_value_the_database_refused_is_bad_input_however_wrapped() -> None:
    refused = sqlalchemy.exc.DataError("INSERT ...", {}, ValueError("NUL in text\nDETAIL: ..."))
    try:
        try:
            raise refused
        except sqlalchemy.exc.DataError as inner:
            raise RunError("write failed") from inner
    except RunError as outer:
        err = to_connect_error(outer)
    assert err.code == Code.INVALID_ARGUMENT
    assert err.message == "the store cannot hold a value: NUL in text"


def test_a_connect_error_passes_unchanged_and_rest_bodies_have_connect_s_shape() -> None:
    original = ConnectError(Code.FAILED_PRECONDITION, "run already finished")
    assert to_connect_error(original) is original
    assert http_status(Code.FAILED_PRECONDITION) == 409
    assert error_body(original) == {
        "code": "failed_precondition",
        "message": "run already finished",
        "details": [],
    }


def test_the_interceptor_maps_unary_and_streaming_calls() -> None:
    interceptor = ErrorInterceptor()

    async def unary(request: Any, ctx: Any) -> Any:
        raise NotFoundError("no run 'x'")

    async def stream(request: Any, ctx: Any) -> AsyncIterator[int]:
        yield 1
        raise ValueError("internal detail")

    async def main() -> tuple[ConnectError, list[int], ConnectError]:
        with pytest.raises(ConnectError) as first:
            await interceptor.intercept_unary(unary, None, None)
        got: list[int] = []

        async def drain() -> None:
            async for item in interceptor.intercept_server_stream(stream, None, None):
                got.append(item)

        with pytest.raises(ConnectError) as second:
            await drain()
        return first.value, got, second.value

    unary_err, items, stream_err = asyncio.run(main())
    assert (unary_err.code, unary_err.message) == (Code.NOT_FOUND, "no run 'x'")
    assert items == [1]  # what was sent before the failure stays sent
    assert (stream_err.code, stream_err.message) == (Code.INTERNAL, INTERNAL_MESSAGE)
