"""The stub LLM server: an aiohttp application with deterministic answers and injectable faults.

It speaks enough of five APIs to exercise the connectors:

- ``POST /v1/chat/completions`` (OpenAI-compatible: choices, tool_calls, usage);
- ``POST /v1/messages`` (Anthropic Messages: content blocks, tool_use, usage);
- ``POST /openai/deployments/{deployment}/chat/completions?api-version=...`` (Azure OpenAI:
  OpenAI's body, the key in ``api-key``; no ``api-version`` is a 404 as Azure answers);
- ``POST /{version}/models/{model}:generateContent`` (Gemini: contents of parts,
  functionCall / functionResponse, usageMetadata; the key in ``x-goog-api-key``);
- ``POST /model/{modelId}/converse`` (Bedrock Converse: content blocks, toolUse / toolResult,
  usage, stopReason; an ``Authorization`` of SigV4 or Bearer is required, and the raw path,
  headers and body bytes are recorded so a test can check the signature);
- ``/svc/{anything}`` (any method): a generic JSON service for the HTTP target; it answers
  ``{"method", "path", "query", "json", "answer"}``.

Answers are deterministic. The rule looks at the last user (or tool) message's text: an exact
entry in ``tool_calls`` makes the model call those tools; an exact entry in ``answers`` is the
answer; otherwise ``default`` (``"echo"`` repeats the text). Usage counts words.

Faults are injected per request (an ``X-Stub-Fault`` header holding a fault as JSON) or by
schedule (consumed in order by the next requests, ``null`` meaning a normal answer): latency,
an HTTP status (429 with ``Retry-After``, 5xx, 4xx), a malformed JSON body, a truncated body
(the connection drops mid-body) and a hang (no answer until the client gives up). Every request
is recorded with its arrival time (``time.monotonic``).

This module imports nothing from the test tree, so it also runs as a process (benchmarks,
examples): ``python tests/support/stub_llm_server.py --port 0 --latency-ms 50`` prints
``STUB_URL http://127.0.0.1:PORT`` and serves until killed; ``POST /stub/config`` takes the
configuration JSON (``answers``, ``tool_calls``, ``default``, ``latency_ms``, ``require_key``,
``models``, ``faults``) and ``GET /stub/stats`` returns the call counters. In tests, use
``StubLLM`` (``tests/support/stub_llm.py``) or the ``stub_llm`` fixture.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import threading
import time
from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import orjson
from aiohttp import web

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"
AZURE_ROUTE = "/openai/deployments/{deployment}/chat/completions"
GEMINI_ROUTE = "/{version}/models/{model}:generateContent"
BEDROCK_ROUTE = "/model/{model}/converse"
SERVICE_PREFIX = "/svc/"
HANG_LIMIT_S = 600.0


@dataclass(frozen=True)
class Fault:
    """What to do wrong with one request. Several fields may combine (latency + status).

    Attributes:
        latency_ms: wait this long before answering.
        status: answer with this HTTP status and an error body in the API's shape.
        retry_after: the ``Retry-After`` header to send with ``status`` (seconds or an HTTP date).
        malformed: answer 200 with a body that is not JSON.
        truncated: announce a full body, send half of it, then drop the connection.
        hang: never answer (until the client disconnects or the server stops).
    """

    latency_ms: float = 0.0
    status: int | None = None
    retry_after: str | None = None
    malformed: bool = False
    truncated: bool = False
    hang: bool = False

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Fault:
        names = {f.name for f in fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"unknown fault field(s): {sorted(unknown)}")
        return cls(**dict(data))


@dataclass
class StubRequest:
    """One request the stub received."""

    path: str
    method: str
    started: float
    headers: dict[str, str]
    body: Any
    fault: Fault | None = None
    status: int = 0
    finished: float | None = None
    raw_path: str = ""  # as sent, percent-encoding and query included
    query: dict[str, str] = field(default_factory=dict)
    raw: bytes = b""  # the body's bytes


@dataclass
class StubScript:
    """The answer rule (JSON-configurable through ``StubLLM.configure``)."""

    answers: dict[str, str] = field(default_factory=dict)
    tool_calls: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    default: str = "echo"
    latency_ms: float = 0.0
    require_key: str | None = None
    models: list[str] | None = None

    def answer(self, text: str) -> tuple[str, list[dict[str, Any]]]:
        if text in self.tool_calls:
            return "", self.tool_calls[text]
        if text in self.answers:
            return self.answers[text], []
        return (text if self.default == "echo" else self.default), []


class StubState:
    """What the server knows: the script, the fault schedule, the recorded requests.

    Shared between the test's thread and the server's thread, hence the lock.
    """

    def __init__(self, script: StubScript | None = None) -> None:
        self.lock = threading.Lock()
        self.script = script or StubScript()
        self.faults: deque[tuple[str | None, Fault | None]] = deque()
        self.requests: list[StubRequest] = []
        self.counts: Counter[str] = Counter()

    def next_fault(self, path: str) -> Fault | None:
        with self.lock:
            for index, (only, fault) in enumerate(self.faults):
                if only is None or only == path:
                    del self.faults[index]
                    return fault
        return None


def _words(text: str) -> int:
    return len(text.split())


def _last_openai_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") in ("user", "tool"):
            return _text_of(message.get("content"))
    return ""


def _last_anthropic_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list) and content:
                last = content[-1]
                if isinstance(last, dict) and last.get("type") == "tool_result":
                    return _text_of(last.get("content"))
            return _text_of(content)
    return ""


def _last_gemini_text(contents: list[dict[str, Any]]) -> str:
    """The last user turn's text, or its last function response's ``result`` (else the
    response), as text or JSON."""
    for content in reversed(contents):
        if content.get("role") == "user":
            parts = content.get("parts") or []
            last = parts[-1] if parts else {}
            if isinstance(last, dict) and isinstance(last.get("functionResponse"), dict):
                response = last["functionResponse"].get("response")
                if isinstance(response, dict) and "result" in response:
                    response = response["result"]
                return response if isinstance(response, str) else orjson.dumps(response).decode()
            return _text_of(parts)
    return ""


def _last_converse_text(messages: list[dict[str, Any]]) -> str:
    """The last user message's text, or its last tool result's text."""
    for message in reversed(messages):
        if message.get("role") == "user":
            blocks = message.get("content") or []
            last = blocks[-1] if blocks else {}
            if isinstance(last, dict) and isinstance(last.get("toolResult"), dict):
                return _text_of(last["toolResult"].get("content"))
            return _text_of(blocks)
    return ""


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", "")) for part in content if isinstance(part, dict)
        ) or "".join(str(part) for part in content if isinstance(part, str))
    return orjson.dumps(content).decode()


def _prompt_words(messages: list[dict[str, Any]], system: Any = None) -> int:
    total = _words(_text_of(system))
    for message in messages:
        total += _words(_text_of(message.get("content")))
    return max(1, total)


class StubApp:
    """The aiohttp application around a ``StubState``."""

    def __init__(self, state: StubState) -> None:
        self.state = state
        self.stopping = asyncio.Event()
        self.app = web.Application(client_max_size=64 * 1024 * 1024)
        self.app.router.add_post(OPENAI_PATH, self._openai)
        self.app.router.add_post(ANTHROPIC_PATH, self._anthropic)
        self.app.router.add_post(AZURE_ROUTE, self._azure)
        self.app.router.add_post(GEMINI_ROUTE, self._gemini)
        self.app.router.add_post(BEDROCK_ROUTE, self._bedrock)
        self.app.router.add_route("*", SERVICE_PREFIX + "{tail:.*}", self._service)
        self.app.router.add_post("/stub/config", self._config)
        self.app.router.add_get("/stub/stats", self._stats)

    # -- control ----------------------------------------------------------------------------
    async def _config(self, request: web.Request) -> web.Response:
        configure(self.state, orjson.loads(await request.read()))
        return web.json_response({"ok": True})

    async def _stats(self, request: web.Request) -> web.Response:
        with self.state.lock:
            counts = dict(self.state.counts)
        return web.json_response({"calls": counts})

    # -- the common path ----------------------------------------------------------------------
    async def _begin(self, request: web.Request) -> tuple[StubRequest, Fault | None]:
        started = time.monotonic()
        raw = await request.read()
        try:
            body = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            body = raw.decode("utf-8", "replace")
        fault: Fault | None = None
        header = request.headers.get("X-Stub-Fault")
        if header:
            fault = Fault.from_dict(orjson.loads(header))
        if fault is None:
            fault = self.state.next_fault(request.path)
        record = StubRequest(
            path=request.path,
            method=request.method,
            started=started,
            headers=dict(request.headers),
            body=body,
            fault=fault,
            raw_path=request.raw_path,
            query=dict(request.query),
            raw=raw,
        )
        with self.state.lock:
            self.state.requests.append(record)
            self.state.counts[request.path] += 1
            latency = self.state.script.latency_ms
        if fault is not None and fault.latency_ms:
            latency = fault.latency_ms
        if latency:
            await asyncio.sleep(latency / 1000.0)
        if fault is not None and fault.hang:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), HANG_LIMIT_S)
        return record, fault

    async def _finish(
        self,
        request: web.Request,
        record: StubRequest,
        fault: Fault | None,
        payload: Any,
        error: tuple[int, Any] | None = None,
    ) -> web.StreamResponse:
        headers: dict[str, str] = {}
        if fault is not None and fault.status is not None:
            status = fault.status
            payload = self._error_body(record.path, status, f"injected HTTP {status}")
            if fault.retry_after is not None:
                headers["Retry-After"] = fault.retry_after
        elif error is not None:
            status, payload = error
        else:
            status = 200
        record.status = status
        record.finished = time.monotonic()
        data = orjson.dumps(payload)
        if fault is not None and fault.malformed and status == 200:
            data = b'{"choices": [{"message": {"content": "cut' + b" <not json>"
        if fault is not None and fault.truncated and status == 200:
            response = web.StreamResponse(status=200, headers=headers)
            response.content_type = "application/json"
            response.content_length = len(data)
            await response.prepare(request)
            await response.write(data[: len(data) // 2])
            transport = request.transport
            if transport is not None:
                transport.close()
            return response
        return web.Response(
            body=data, status=status, headers=headers, content_type="application/json"
        )

    def _error_body(self, path: str, status: int, message: str) -> Any:
        if path.startswith("/model/"):  # Bedrock: {"message"} and the type in a header
            return {"message": message}
        if ":generateContent" in path:
            return {"error": {"code": status, "message": message, "status": "INVALID_ARGUMENT"}}
        if path == ANTHROPIC_PATH:
            kind = {
                400: "invalid_request_error",
                401: "authentication_error",
                404: "not_found_error",
                429: "rate_limit_error",
                529: "overloaded_error",
            }
            return {
                "type": "error",
                "error": {"type": kind.get(status, "api_error"), "message": message},
            }
        return {"error": {"message": message, "type": "stub_error", "code": status}}

    def _check(self, record: StubRequest, key: str | None, model: Any) -> tuple[int, Any] | None:
        script = self.state.script
        if script.require_key is not None and key != script.require_key:
            return 401, self._error_body(record.path, 401, "invalid API key")
        if script.models is not None and model not in script.models:
            return 404, self._error_body(record.path, 404, f"model {model!r} does not exist")
        if not isinstance(record.body, dict) or not isinstance(record.body.get("messages"), list):
            return 400, self._error_body(record.path, 400, "messages: a list is required")
        return None

    # -- OpenAI-compatible ----------------------------------------------------------------------
    async def _openai(self, request: web.Request) -> web.StreamResponse:
        record, fault = await self._begin(request)
        auth = request.headers.get("Authorization", "")
        key = auth[7:] if auth.startswith("Bearer ") else None
        body = record.body if isinstance(record.body, dict) else {}
        error = self._check(record, key, body.get("model"))
        return await self._chat_completion(request, record, fault, body, error)

    async def _azure(self, request: web.Request) -> web.StreamResponse:
        """Azure's address for OpenAI's format: the deployment is the model, the key is
        ``api-key`` (or an Entra ID bearer token), ``api-version`` is required."""
        record, fault = await self._begin(request)
        auth = request.headers.get("Authorization", "")
        key = request.headers.get("api-key") or (auth[7:] if auth.startswith("Bearer ") else None)
        body = record.body if isinstance(record.body, dict) else {}
        error = self._check(record, key, request.match_info["deployment"])
        if error is None and not request.query.get("api-version"):
            error = 404, self._error_body(record.path, 404, "Resource not found")
        return await self._chat_completion(request, record, fault, body, error)

    async def _chat_completion(
        self,
        request: web.Request,
        record: StubRequest,
        fault: Fault | None,
        body: dict[str, Any],
        error: tuple[int, Any] | None,
    ) -> web.StreamResponse:
        if error is not None or (fault is not None and fault.status is not None):
            return await self._finish(request, record, fault, None, error)
        messages: list[dict[str, Any]] = body["messages"]
        text, calls = self.state.script.answer(_last_openai_text(messages))
        message: dict[str, Any] = {"role": "assistant", "content": text if not calls else None}
        if calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": orjson.dumps(call.get("arguments", {})).decode(),
                    },
                }
                for i, call in enumerate(calls)
            ]
        prompt = _prompt_words(messages)
        completion = max(1, _words(text)) if not calls else len(calls)
        payload = {
            "id": f"chatcmpl-{len(self.state.requests)}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", ""),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if calls else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }
        return await self._finish(request, record, fault, payload)

    # -- Anthropic Messages ---------------------------------------------------------------------
    async def _anthropic(self, request: web.Request) -> web.StreamResponse:
        record, fault = await self._begin(request)
        body = record.body if isinstance(record.body, dict) else {}
        error = self._check(record, request.headers.get("x-api-key"), body.get("model"))
        if error is None and "max_tokens" not in body:
            error = 400, self._error_body(record.path, 400, "max_tokens: field required")
        if error is None and not request.headers.get("anthropic-version"):
            error = 400, self._error_body(record.path, 400, "anthropic-version header required")
        if error is not None or (fault is not None and fault.status is not None):
            return await self._finish(request, record, fault, None, error)
        messages: list[dict[str, Any]] = body["messages"]
        text, calls = self.state.script.answer(_last_anthropic_text(messages))
        content: list[dict[str, Any]] = []
        if text:
            content.append({"type": "text", "text": text})
        for i, call in enumerate(calls):
            content.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{i}",
                    "name": call["name"],
                    "input": call.get("arguments", {}),
                }
            )
        payload = {
            "id": f"msg_{len(self.state.requests)}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", ""),
            "content": content,
            "stop_reason": "tool_use" if calls else "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": _prompt_words(messages, body.get("system")),
                "output_tokens": max(1, _words(text)) if not calls else len(calls),
            },
        }
        return await self._finish(request, record, fault, payload)

    # -- Gemini generateContent -----------------------------------------------------------------
    async def _gemini(self, request: web.Request) -> web.StreamResponse:
        record, fault = await self._begin(request)
        body = record.body if isinstance(record.body, dict) else {}
        model = request.match_info["model"]
        script = self.state.script
        error: tuple[int, Any] | None = None
        contents = body.get("contents")
        if script.require_key is not None and (
            request.headers.get("x-goog-api-key") != script.require_key
        ):
            error = 400, self._error_body(record.path, 400, "API key not valid")
        elif script.models is not None and model not in script.models:
            error = 404, self._error_body(record.path, 404, f"models/{model} is not found")
        elif (
            not isinstance(contents, list)
            or not contents
            or any(
                not isinstance(c, dict)
                or c.get("role") not in ("user", "model")
                or not isinstance(c.get("parts"), list)
                for c in contents
            )
        ):
            error = 400, self._error_body(record.path, 400, "contents: user/model turns of parts")
        if error is not None or (fault is not None and fault.status is not None):
            return await self._finish(request, record, fault, None, error)
        assert isinstance(contents, list)
        text, calls = script.answer(_last_gemini_text(contents))
        parts: list[dict[str, Any]] = [{"text": text}] if text else []
        parts += [
            {"functionCall": {"name": call["name"], "args": call.get("arguments", {})}}
            for call in calls
        ]
        system = body.get("systemInstruction", {}).get("parts", [])
        prompt = _words(_text_of(system)) + sum(_words(_text_of(c["parts"])) for c in contents)
        output = max(1, _words(text)) if not calls else len(calls)
        payload = {
            "candidates": [
                {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {
                "promptTokenCount": max(1, prompt),
                "candidatesTokenCount": output,
                "totalTokenCount": max(1, prompt) + output,
            },
            "modelVersion": model,
        }
        return await self._finish(request, record, fault, payload)

    # -- Bedrock Converse --------------------------------------------------------------------
    async def _bedrock(self, request: web.Request) -> web.StreamResponse:
        record, fault = await self._begin(request)
        body = record.body if isinstance(record.body, dict) else {}
        model = request.match_info["model"]
        script = self.state.script
        auth = request.headers.get("Authorization", "")
        error: tuple[int, Any] | None = None
        messages = body.get("messages")
        if not auth.startswith(("AWS4-HMAC-SHA256 Credential=", "Bearer ")):
            error = 403, self._error_body(record.path, 403, "Missing Authentication Token")
        elif (
            script.require_key is not None
            and auth.startswith("Bearer ")
            and (auth[7:] != script.require_key)
        ):
            error = 403, self._error_body(record.path, 403, "invalid API key")
        elif script.models is not None and model not in script.models:
            error = (
                404,
                self._error_body(record.path, 404, "The provided model identifier is invalid."),
            )
        elif (
            not isinstance(messages, list)
            or not messages
            or any(
                not isinstance(m, dict)
                or m.get("role") not in ("user", "assistant")
                or not isinstance(m.get("content"), list)
                for m in messages
            )
        ):
            error = 400, self._error_body(record.path, 400, "messages: content blocks required")
        if error is not None or (fault is not None and fault.status is not None):
            return await self._finish(request, record, fault, None, error)
        assert isinstance(messages, list)
        text, calls = script.answer(_last_converse_text(messages))
        blocks: list[dict[str, Any]] = [{"text": text}] if text else []
        blocks += [
            {
                "toolUse": {
                    "toolUseId": f"tooluse_{i}",
                    "name": call["name"],
                    "input": call.get("arguments", {}),
                }
            }
            for i, call in enumerate(calls)
        ]
        prompt = max(1, sum(_words(_text_of(m["content"])) for m in messages))
        output = max(1, _words(text)) if not calls else len(calls)
        payload = {
            "output": {"message": {"role": "assistant", "content": blocks}},
            "stopReason": "tool_use" if calls else "end_turn",
            "usage": {
                "inputTokens": prompt,
                "outputTokens": output,
                "totalTokens": prompt + output,
            },
            "metrics": {"latencyMs": 1},
        }
        return await self._finish(request, record, fault, payload)

    # -- a generic JSON service -----------------------------------------------------------------
    async def _service(self, request: web.Request) -> web.StreamResponse:
        record, fault = await self._begin(request)
        body = record.body
        asked = body if isinstance(body, str) else ""
        if isinstance(body, dict):
            asked = _text_of(body.get("input", body.get("question", "")))
        elif request.query.get("q") is not None:
            asked = request.query["q"]
        text, _ = self.state.script.answer(asked)
        payload = {
            "method": request.method,
            "path": request.path,
            "query": dict(request.query),
            "json": body,
            "answer": text,
        }
        return await self._finish(request, record, fault, payload)


def configure(state: StubState, config: Mapping[str, Any]) -> None:
    """Apply a JSON config: ``answers``, ``tool_calls``, ``default``, ``latency_ms``,
    ``require_key``, ``models`` and ``faults`` (a list of fault objects or nulls, appended to
    the schedule)."""
    known = {f.name for f in fields(StubScript)} | {"faults"}
    unknown = set(config) - known
    if unknown:
        raise ValueError(f"unknown stub config field(s): {sorted(unknown)}")
    with state.lock:
        for name in known - {"faults"}:
            if name in config:
                setattr(state.script, name, config[name])
        for item in config.get("faults", ()):
            state.faults.append((None, None if item is None else Fault.from_dict(item)))


async def _serve_forever(args: argparse.Namespace) -> None:
    state = StubState(StubScript(latency_ms=args.latency_ms))
    if args.config:
        with open(args.config, "rb") as f:
            configure(state, orjson.loads(f.read()))
    app = StubApp(state)
    runner = web.AppRunner(app.app, access_log=None, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, args.host, args.port, backlog=1024)
    await site.start()
    server = site._server
    assert server is not None
    port = (getattr(server, "sockets", None) or [])[0].getsockname()[1]
    print(f"STUB_URL http://{args.host}:{port}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--config", help="a JSON file with the stub config")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve_forever(args))


if __name__ == "__main__":
    main()
