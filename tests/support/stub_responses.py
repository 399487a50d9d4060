"""A stub OpenAI Responses-compatible server (``POST /v1/responses``) with scripted turns.

A conversation is scripted by its first user message: ``{"conversations": {TEXT: [turn, ...]}}``
where turn N answers the N-th request of that conversation. A turn is ``{"output": [item, ...]}``
with optional ``status`` (``incomplete``/``failed``), ``incomplete_details``, ``error`` and
``usage``; or ``{"body": ANY}`` (sent as the reply, as is: malformed replies) or ``{"raw":
TEXT}`` (a body that is not JSON). Items are short forms the stub completes with ids:

- ``{"type": "function_call", "name": N, "arguments": {...}}`` (ids ``call_T_I``);
- ``{"type": "message", "text": T, "repeat": K}`` — ``{outputs}`` in T becomes the
  ``function_call_output`` outputs the request sent (joined by ``; ``), ``repeat`` repeats T;
- ``{"type": "reasoning", "summary": T, "text": T2, "encrypted": E}``;
- anything else (``web_search_call``, ``mcp_call``…) is sent as written, with an id added.

A conversation without a script gets ``echo: TEXT``. Which turn a request is in is read from
the conversation itself (the ids of the stub's own items in it), so it works both with
``previous_response_id`` (the stub keeps every response unless ``stateless``) and with the
whole item list sent each time (``store: false``; ``stateless`` also answers ``store: false``
and refuses ``previous_response_id``). Usage is 10 input tokens per conversation item and 5
output tokens per output item, unless a turn says otherwise. Faults (HTTP statuses, with
``Retry-After``) are consumed in order by the next requests; ``require_key`` checks the Bearer
key. Every request is recorded and counted.

In tests: ``with StubResponses(script) as stub: stub.url`` (the API root, ``.../v1``). As a
process: ``python -m tests.support.stub_responses --port 18120 --script FILE`` prints
``STUB_URL http://127.0.0.1:PORT/v1`` and serves until killed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

PATH = "/v1/responses"
_OWN_ID = re.compile(r"^(?:call|fc|msg|rs|ws|mcp|item)_(\d+)_\d+$")


@dataclass
class Recorded:
    path: str
    body: Any
    headers: dict[str, str]


@dataclass
class ResponsesState:
    """The script, the stored responses, the faults to come and what was received."""

    conversations: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    stateless: bool = False
    require_key: str | None = None
    faults: deque[dict[str, Any]] = field(default_factory=deque)
    stored: dict[str, list[Any]] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def from_script(cls, script: Mapping[str, Any]) -> ResponsesState:
        return cls(
            conversations={k: list(v) for k, v in script.get("conversations", {}).items()},
            stateless=bool(script.get("stateless", False)),
            require_key=script.get("require_key"),
            faults=deque(script.get("faults", ())),
        )


def _json(data: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.Response(
        body=orjson.dumps(data), status=status, content_type="application/json", headers=headers
    )


def _error(status: int, message: str, headers: Mapping[str, str] | None = None) -> web.Response:
    return _json({"error": {"message": message, "type": "stub"}}, status, headers)


def _first_user_text(items: list[Any]) -> str:
    for item in items:
        if isinstance(item, dict) and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _turn_number(items: list[Any]) -> int:
    seen = [
        int(m.group(1))
        for item in items
        if isinstance(item, dict)
        for key in ("id", "call_id")
        if isinstance(item.get(key), str) and (m := _OWN_ID.match(item[key]))
    ]
    return max(seen) + 1 if seen else 0


def _outputs(items: list[Any]) -> str:
    return "; ".join(
        str(i.get("output"))
        for i in items
        if isinstance(i, dict) and i.get("type") == "function_call_output"
    )


def _item(short: dict[str, Any], turn: int, index: int, outputs: str) -> dict[str, Any]:
    kind = short.get("type")
    ident = f"{turn}_{index}"
    if kind == "function_call":
        args = short.get("arguments", {})
        return {
            "type": "function_call",
            "id": f"fc_{ident}",
            "call_id": f"call_{ident}",
            "name": short["name"],
            "arguments": args if isinstance(args, str) else orjson.dumps(args).decode(),
            "status": "completed",
        }
    if kind == "message" and "text" in short:
        text = str(short["text"]).replace("{outputs}", outputs) * int(short.get("repeat", 1))
        return {
            "type": "message",
            "id": f"msg_{ident}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
    if kind == "reasoning":
        out: dict[str, Any] = {
            "type": "reasoning",
            "id": f"rs_{ident}",
            "summary": [{"type": "summary_text", "text": short.get("summary", "")}],
        }
        if "text" in short:
            out["content"] = [{"type": "reasoning_text", "text": short["text"]}]
        if "encrypted" in short:
            out["encrypted_content"] = short["encrypted"]
        return out
    return {"id": f"item_{ident}", **short}


class ResponsesApp:
    """The aiohttp application over a ``ResponsesState``."""

    def __init__(self, state: ResponsesState) -> None:
        self.state = state
        self.app = web.Application(client_max_size=64 * 1024 * 1024)
        self.app.router.add_post(PATH, self.responses)

    async def responses(self, request: web.Request) -> web.Response:
        state = self.state
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return _error(400, "the body is not JSON")
        with state.lock:
            state.requests.append(Recorded(request.path, body, dict(request.headers)))
            fault = state.faults.popleft() if state.faults else None
        if fault:
            headers = {"Retry-After": str(fault["retry_after"])} if "retry_after" in fault else None
            return _error(int(fault["status"]), "stub fault", headers)
        key = state.require_key
        if key is not None and request.headers.get("Authorization") != f"Bearer {key}":
            return _error(401, "invalid API key")
        if not isinstance(body, dict) or not isinstance(body.get("input"), list | str):
            return _error(400, "input is required")
        given = body["input"]
        items = [{"role": "user", "content": given}] if isinstance(given, str) else list(given)
        previous = body.get("previous_response_id")
        if previous is not None:
            with state.lock:
                before = None if state.stateless else state.stored.get(previous)
            if before is None:
                return _error(400, f"previous response {previous!r} not found")
            items = [*before, *items]
        turn = _turn_number(items)
        text = _first_user_text(items)
        script = state.conversations.get(text)
        with state.lock:
            ident = f"resp_{len(state.requests)}"
        if script is None:
            spec: dict[str, Any] = {"output": [{"type": "message", "text": f"echo: {text}"}]}
        elif turn < len(script):
            spec = script[turn]
        else:
            spec = {"output": [{"type": "message", "text": "(the script has no more turns)"}]}
        if "raw" in spec:
            return web.Response(text=str(spec["raw"]), content_type="text/plain")
        if "body" in spec:
            return _json(spec["body"])
        output = [
            _item(short, turn, i, _outputs(items)) for i, short in enumerate(spec.get("output", []))
        ]
        store = not state.stateless and body.get("store", True) is not False
        if store:
            with state.lock:
                state.stored[ident] = [*items, *output]
        usage = spec.get("usage") or {
            "input_tokens": 10 * len(items),
            "output_tokens": 5 * len(output),
        }
        usage = {**usage, "total_tokens": usage["input_tokens"] + usage["output_tokens"]}
        reply: dict[str, Any] = {
            "id": ident,
            "object": "response",
            "model": body.get("model", "stub"),
            "status": spec.get("status", "completed"),
            "output": output,
            "usage": usage,
            "store": store,
        }
        for key in ("incomplete_details", "error"):
            if key in spec:
                reply[key] = spec[key]
        return _json(reply)


class ThreadedApp:
    """An aiohttp application served on loopback from a background thread."""

    def __init__(self, app: web.Application, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.app = app
        self.host = host
        self.port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    def start(self) -> None:
        ready = threading.Event()
        failure: list[BaseException] = []
        loop = asyncio.new_event_loop()
        self._loop = loop

        async def serve() -> None:
            self._runner = web.AppRunner(self.app, access_log=None, shutdown_timeout=1.0)
            await self._runner.setup()
            site = web.TCPSite(self._runner, self.host, self.port)
            await site.start()
            server = site._server
            assert server is not None
            self.port = (getattr(server, "sockets", None) or [])[0].getsockname()[1]

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(serve())
            except BaseException as e:  # noqa: BLE001 - handed to the starting thread
                failure.append(e)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            if self._runner is not None:
                loop.run_until_complete(self._runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=run, name="stub-agent", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the stub did not start within 10 s")
        if failure:
            raise failure[0]

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        self._loop = self._thread = None

    @property
    def root(self) -> str:
        return f"http://{self.host}:{self.port}"


class StubResponses:
    """The stub in a background thread: ``url`` is the API root (``.../v1``).

    Example (in a test)::

        with StubResponses({"conversations": {"hi": [{"output": [...]}]}}) as stub:
            ...  # responses: {baseUrl: stub.url, model: m}
            assert stub.calls() == 2
    """

    def __init__(self, script: Mapping[str, Any] | None = None, *, port: int = 0) -> None:
        self.state = ResponsesState.from_script(script or {})
        self._server = ThreadedApp(ResponsesApp(self.state).app, port=port)

    def __enter__(self) -> StubResponses:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._server.stop()

    @property
    def url(self) -> str:
        return f"{self._server.root}/v1"

    def fail_next(self, *statuses: int, retry_after: float | None = None) -> None:
        """The next requests answer these HTTP statuses, in order."""
        with self.state.lock:
            for status in statuses:
                fault: dict[str, Any] = {"status": status}
                if retry_after is not None:
                    fault["retry_after"] = retry_after
                self.state.faults.append(fault)

    def calls(self) -> int:
        with self.state.lock:
            return len(self.state.requests)

    def bodies(self) -> list[Any]:
        with self.state.lock:
            return [r.body for r in self.state.requests]

    def requests(self) -> list[Recorded]:
        with self.state.lock:
            return list(self.state.requests)


async def serve_forever(
    make: Callable[[], web.Application], host: str, port: int, path: str
) -> None:
    """Serve ``make()`` until killed, printing ``STUB_URL`` once it listens."""
    runner = web.AppRunner(make(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    server = site._server
    assert server is not None
    bound = (getattr(server, "sockets", None) or [])[0].getsockname()[1]
    print(f"STUB_URL http://{host}:{bound}{path}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def run_main(
    description: str, make: Callable[[Mapping[str, Any]], web.Application], path: str
) -> Callable[[list[str] | None], None]:
    """A ``main(argv)`` for a stub: ``--host``, ``--port`` and ``--script FILE``."""

    def main(argv: list[str] | None = None) -> None:
        parser = argparse.ArgumentParser(description=description)
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=0)
        parser.add_argument("--script", help="a JSON file with the script")
        args = parser.parse_args(argv)
        script: Mapping[str, Any] = {}
        if args.script:
            with open(args.script, "rb") as f:
                script = orjson.loads(f.read())
        serving = serve_forever(lambda: make(script), args.host, args.port, path)
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serving)

    return main


main = run_main(
    "A stub OpenAI Responses-compatible server with scripted turns.",
    lambda script: ResponsesApp(ResponsesState.from_script(script)).app,
    "/v1",
)

if __name__ == "__main__":
    main(None)
