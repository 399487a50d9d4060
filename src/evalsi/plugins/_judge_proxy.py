"""The host side of judge forwarding: one of the run's judges served to a plugin as an
OpenAI-compatible chat-completions endpoint on loopback, for the duration of one batch.

Each ``POST /v1/chat/completions`` becomes one ``JudgeClient.complete`` of the run's judge, so a
plugin's judge calls are cached in the store, counted in the run's judge usage and cost (and so
in its budgets), rate-limited by the judge's ``maxConcurrency``, and made by the judge's own
connector: an Anthropic or Bedrock judge answers a plugin that speaks only OpenAI's wire format.
Sampling settings are the judge's (``spec.judges.NAME.params``); a request's own are ignored,
as an evaluator in process cannot choose them either.

It must not become a way into the judge for anyone else, so it is served on ``127.0.0.1`` at a
random port, for one batch, and refuses:

- a request without the batch's bearer token (401): another local user, another process;
- a ``Host`` other than the address it listens on (421): a web page reaching it through DNS
  rebinding names its own host;
- any ``Origin`` (403): browsers send one on every cross-origin POST, and no plugin does;
- a body over ``MAX_BODY`` (413), read only after the token matched.

The run's judges (their connectors and ``aiohttp`` sessions) belong to the run's event loop, so
the server runs on that loop, while the plugin's batch is awaited on it.
"""

from __future__ import annotations

import hmac
import itertools
import secrets
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from evalsi.connectors import InfraError
from evalsi.core import INFRA_PREFIX, Message, UserError
from evalsi.evaluators import JudgeClient, RecordError, find_judge
from evalsi.plugins._judge_endpoint import JudgeEndpoint

MAX_BODY = 8 * 1024 * 1024
"""Largest request body served (a judge prompt of about two million tokens of text)."""
PATH = "/v1/chat/completions"
_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
_UNSERVED = ("tools", "functions", "tool_choice", "function_call")
"""Request fields whose answer a judge's text cannot carry."""


class _BadRequest(Exception):
    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message, self.param = message, param


class JudgeProxy:
    """One judge served on loopback while a batch runs (``async with``); ``endpoint`` is what
    the plugin is told.

    Answers are kept in the judge cache only on ``keep()``: the host calls it once the batch
    came back without an ERROR record, because it cannot tell which call a malformed verdict
    came from, and a cached malformed answer would make every re-run fail the same way.
    """

    def __init__(self, judge: JudgeClient, name: str, *, max_body: int = MAX_BODY) -> None:
        self.judge = judge
        self.name = name
        self.model = str(judge.identity().get("model") or name)
        self.max_body = max_body
        self.token = secrets.token_urlsafe(32)
        self.calls = 0
        """Completions answered (from the judge or its cache)."""
        self.lost: InfraError | None = None
        """The first call the judge's infrastructure failed (after its connector's retries)."""
        self._keeps: list[Callable[[], Awaitable[None]]] = []
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._hosts: frozenset[str] = frozenset()
        self.endpoint = JudgeEndpoint(name)

    async def __aenter__(self) -> JudgeProxy:
        app = web.Application(client_max_size=self.max_body, middlewares=[self._guard])
        app.router.add_post(PATH, self._complete)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind(("127.0.0.1", 0))
            await web.SockSite(runner, sock).start()
        except BaseException:
            sock.close()
            await runner.cleanup()
            raise
        self._runner = runner
        port = sock.getsockname()[1]
        self._hosts = frozenset({f"127.0.0.1:{port}", f"localhost:{port}"})
        self.endpoint = JudgeEndpoint(
            self.name, f"http://127.0.0.1:{port}/v1", self.model, self.token
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def keep(self) -> None:
        """Store the answers served so far in the judge cache."""
        keeps, self._keeps = self._keeps, []
        for keep in keeps:
            await keep()

    # -- serving --------------------------------------------------------------------------------
    @web.middleware
    async def _guard(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if request.host not in self._hosts:
            return _error(421, f"Host {request.host!r} is not this endpoint", "misdirected")
        if "Origin" in request.headers:
            return _error(403, "requests from web pages are refused", "forbidden")
        given = request.headers.get("Authorization", "").encode()
        if not hmac.compare_digest(given, f"Bearer {self.token}".encode()):
            return _error(401, "missing or wrong bearer token", "invalid_api_key")
        return await handler(request)

    async def _complete(self, request: web.Request) -> web.StreamResponse:
        if request.content_length is not None and request.content_length > self.max_body:
            return _too_large(self.max_body)
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _too_large(self.max_body)
        try:
            messages, seed = _read(body)
        except _BadRequest as e:
            return _error(400, e.message, "invalid_request_error", e.param)
        try:
            reply = await self.judge.complete(messages, seed=seed)
        except InfraError as e:
            self.lost = self.lost or e
            return _error(502, f"judge {self.name!r}: {e}", "judge_error")
        except UserError as e:
            return _error(502, f"judge {self.name!r}: {e}", "judge_error")
        self.calls += 1
        if reply.keep is not None:
            self._keeps.append(reply.keep)
        usage = reply.usage
        answer = {
            "id": f"chatcmpl-evalsi-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply.text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": usage.input_tokens or 0,
                "completion_tokens": usage.output_tokens or 0,
                "total_tokens": usage.tokens() or 0,
            },
        }
        return web.Response(
            body=orjson.dumps(answer),
            content_type="application/json",
            headers={"X-Evalsi-Judge-Cache": "hit" if reply.cached else "miss"},
        )


def _read(body: bytes) -> tuple[list[Message], int | None]:
    """The messages and seed of a chat-completions request; ``_BadRequest`` names what is
    wrong."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise _BadRequest(f"the body is not JSON: {e}") from None
    if not isinstance(data, dict):
        raise _BadRequest("the body must be a JSON object")
    if data.get("stream"):
        raise _BadRequest("streaming is not served: send stream false", "stream")
    if data.get("n") not in (None, 1):
        raise _BadRequest("one choice per request: n must be 1", "n")
    for name in _UNSERVED:
        if data.get(name):
            raise _BadRequest(f"{name} is not served: a judge answers in text", name)
    seed = data.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise _BadRequest("seed must be an integer", "seed")
    raw = data.get("messages")
    if not isinstance(raw, list) or not raw:
        raise _BadRequest("messages must be a non-empty list", "messages")
    return [_message(m, i) for i, m in enumerate(raw)], seed


def _message(raw: Any, i: int) -> Message:
    where = f"messages[{i}]"
    if not isinstance(raw, dict):
        raise _BadRequest(f"{where} must be an object", where)
    role = _ROLES.get(raw.get("role"))  # type: ignore[arg-type]
    if role is None:
        known = ", ".join(_ROLES)
        raise _BadRequest(f"{where}.role must be one of {known}, got {raw.get('role')!r}", where)
    content = raw.get("content")
    if isinstance(content, list):
        parts = []
        for j, part in enumerate(content):
            if not (isinstance(part, dict) and part.get("type") == "text"):
                raise _BadRequest(f"{where}.content[{j}]: only text parts are served", where)
            parts.append(str(part.get("text", "")))
        content = "".join(parts)
    if not isinstance(content, str):
        raise _BadRequest(f"{where}.content must be a string or a list of text parts", where)
    return Message(role=role, content=content)


def _error(status: int, message: str, kind: str, param: str | None = None) -> web.Response:
    body = {"error": {"message": message, "type": kind, "param": param, "code": None}}
    # the judge's connector retried already; an OpenAI SDK honours this and does not again
    return web.Response(
        status=status,
        body=orjson.dumps(body),
        content_type="application/json",
        headers={"X-Should-Retry": "false"},
    )


def _too_large(limit: int) -> web.Response:
    return _error(413, f"the body is over {limit} bytes", "request_too_large")


async def with_run_judge(
    name: str, grade: Callable[[JudgeEndpoint], Awaitable[list[Any]]]
) -> list[Any]:
    """``grade`` a batch with the run's judge ``name`` served to it; with no judge of that
    name the endpoint is empty, and an evaluator that reads it gets an ERROR naming it.

    When the judge's infrastructure failed a call of the batch, the batch's ERROR records are
    infrastructure errors (``infra_error(KIND): judge 'NAME': …``), as a judge evaluator's in
    process: the plugin's library words the failure its own way, and a lost judge must not
    count against the records. (A record that failed for another reason in the same batch is
    counted so too; the host cannot tell them apart.)"""
    judge = find_judge(name)
    if judge is None:
        return await grade(JudgeEndpoint(name))
    async with JudgeProxy(judge, name) as proxy:
        values = await grade(proxy.endpoint)
        if not any(isinstance(v, RecordError) for v in values):
            await proxy.keep()
    if proxy.lost is not None:
        lost = RecordError(f"{INFRA_PREFIX}{proxy.lost.kind}): judge {name!r}: {proxy.lost}")
        values = [lost if isinstance(v, RecordError) else v for v in values]
    return values
