"""A stub HTTP agent: ``POST``/``PUT /agent`` with any JSON body, scripted answers and
transcripts, sessions, faults and a call counter.

The request's text is the last user message of its ``messages`` (or ``history``), else its
``input`` (or ``query``): a string, or a list of messages. ``{"agents": {TEXT: reply}}`` scripts the
reply: ``{"answer": A, "transcript": [...]}``, or ``{"body": ANY}`` (sent as is) or
``{"raw": TEXT}`` (not JSON). Unscripted text gets ``echo: TEXT`` and a one-message transcript.
The reply is ``{"result": {"answer", "transcript"}, "session_id", "turn"}``: a request with no
``session`` opens one (``sess-N``), a request naming one continues it (``turn`` counts).
``require_header: {NAME: VALUE}`` answers 401 without it; faults (HTTP statuses with
``Retry-After``) are consumed in order.

In tests: ``with StubHttpAgent(script) as stub: stub.url`` (``.../agent``). As a process:
``python -m tests.support.stub_http_agent --port 18121 --script FILE`` prints
``STUB_URL http://127.0.0.1:PORT/agent`` and serves until killed.
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from tests.support.stub_responses import Recorded, ThreadedApp, run_main

PATH = "/agent"


@dataclass
class AgentState:
    agents: dict[str, dict[str, Any]] = field(default_factory=dict)
    require_header: dict[str, str] = field(default_factory=dict)
    faults: deque[dict[str, Any]] = field(default_factory=deque)
    sessions: Counter[str] = field(default_factory=Counter)
    requests: list[Recorded] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def from_script(cls, script: Mapping[str, Any]) -> AgentState:
        return cls(
            agents=dict(script.get("agents", {})),
            require_header=dict(script.get("require_header", {})),
            faults=deque(script.get("faults", ())),
        )


def _text(body: Any) -> str:
    if not isinstance(body, dict):
        return ""
    for key in ("messages", "history"):  # the conversation so far: its last user message
        if isinstance(body.get(key), list):
            messages = body[key]
            break
    else:
        given = body.get("input", body.get("query"))
        if isinstance(given, str):
            return given
        messages = given
    for m in reversed(messages if isinstance(messages, list) else []):
        if isinstance(m, dict) and m.get("role") == "user" and isinstance(m.get("content"), str):
            return str(m["content"])
    return ""


def _json(data: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.Response(
        body=orjson.dumps(data), status=status, content_type="application/json", headers=headers
    )


class AgentApp:
    def __init__(self, state: AgentState) -> None:
        self.state = state
        self.app = web.Application(client_max_size=64 * 1024 * 1024)
        self.app.router.add_route("POST", PATH, self.agent)
        self.app.router.add_route("PUT", PATH, self.agent)

    async def agent(self, request: web.Request) -> web.Response:
        state = self.state
        raw = await request.read()
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return _json({"error": "the body is not JSON"}, 400)
        with state.lock:
            state.requests.append(Recorded(request.path, body, dict(request.headers)))
            fault = state.faults.popleft() if state.faults else None
        if fault:
            headers = {"Retry-After": str(fault["retry_after"])} if "retry_after" in fault else None
            return _json({"error": "stub fault"}, int(fault["status"]), headers)
        for name, value in state.require_header.items():
            if request.headers.get(name) != value:
                return _json({"error": f"missing or wrong {name}"}, 401)
        text = _text(body)
        given = body.get("session") if isinstance(body, dict) else None
        with state.lock:
            session = str(given) if given else f"sess-{len(state.sessions) + 1}"
            state.sessions[session] += 1
            turn = state.sessions[session]
        spec = state.agents.get(text)
        if spec is None:
            answer = f"echo: {text}"
            spec = {"answer": answer, "transcript": [{"role": "assistant", "content": answer}]}
        if "raw" in spec:
            return web.Response(text=str(spec["raw"]), content_type="text/html")
        if "body" in spec:
            return _json(spec["body"])
        result = {"answer": spec.get("answer"), "transcript": spec.get("transcript", [])}
        return _json({"result": result, "session_id": session, "turn": turn})


class StubHttpAgent:
    """The stub in a background thread: ``url`` is its endpoint (``.../agent``)."""

    def __init__(self, script: Mapping[str, Any] | None = None, *, port: int = 0) -> None:
        self.state = AgentState.from_script(script or {})
        self._server = ThreadedApp(AgentApp(self.state).app, port=port)

    def __enter__(self) -> StubHttpAgent:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()

    @property
    def url(self) -> str:
        return f"{self._server.root}{PATH}"

    def fail_next(self, *statuses: int, retry_after: float | None = None) -> None:
        with self.state.lock:
            for status in statuses:
                fault: dict[str, Any] = {"status": status}
                if retry_after is not None:
                    fault["retry_after"] = retry_after
                self.state.faults.append(fault)

    def calls(self) -> int:
        with self.state.lock:
            return len(self.state.requests)

    def requests(self) -> list[Recorded]:
        with self.state.lock:
            return list(self.state.requests)


main = run_main(
    "A stub HTTP agent with scripted answers and transcripts.",
    lambda script: AgentApp(AgentState.from_script(script)).app,
    PATH,
)

if __name__ == "__main__":
    main(None)
