"""The stub LLM server in a background thread of the test process, for tests over real HTTP.

The server itself (routes, answer rule, faults) is ``stub_llm_server.py``. Use the ``stub_llm``
fixture (``tests/support/conftest_plugin.py``) or ``with StubLLM(...) as stub:``; schedule faults
with ``stub.schedule(Fault(status=503), None, ...)`` and read what the server saw with
``stub.calls(path)``, ``stub.requests(path)`` and ``stub.arrival_times(path)``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from aiohttp import web

from tests.support.stub_llm_server import (
    ANTHROPIC_PATH,
    OPENAI_PATH,
    SERVICE_PREFIX,
    Fault,
    StubApp,
    StubRequest,
    StubScript,
    StubState,
    configure,
)

__all__ = [
    "ANTHROPIC_PATH",
    "OPENAI_PATH",
    "SERVICE_PREFIX",
    "Fault",
    "StubLLM",
    "StubRequest",
]


class StubLLM:
    """The stub, served from a background thread with its own event loop.

    Example (a test would use the ``stub_llm`` fixture instead)::

        with StubLLM(answers={"2+2?": "4"}) as stub:
            ...  # OpenAICompatible(stub.openai_url, "m") / Anthropic(stub.url, "m")
            assert stub.calls("/v1/chat/completions") == 1
    """

    def __init__(
        self,
        *,
        answers: Mapping[str, str] | None = None,
        tool_calls: Mapping[str, list[dict[str, Any]]] | None = None,
        default: str = "echo",
        latency_ms: float = 0.0,
        require_key: str | None = None,
        models: Iterable[str] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.state = StubState(
            StubScript(
                answers=dict(answers or {}),
                tool_calls={k: list(v) for k, v in (tool_calls or {}).items()},
                default=default,
                latency_ms=latency_ms,
                require_key=require_key,
                models=list(models) if models is not None else None,
            )
        )
        self.host = host
        self.port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._app: StubApp | None = None

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> StubLLM:
        ready = threading.Event()
        failure: list[BaseException] = []
        loop = asyncio.new_event_loop()
        self._loop = loop

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._serve())
            except BaseException as e:  # noqa: BLE001 - handed to the starting thread
                failure.append(e)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._cleanup())
            loop.close()

        self._thread = threading.Thread(target=run, name="stub-llm", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the stub LLM server did not start within 10 s")
        if failure:
            raise failure[0]
        return self

    async def _serve(self) -> None:
        self._app = StubApp(self.state)
        self._runner = web.AppRunner(
            self._app.app, access_log=None, handler_cancellation=True, shutdown_timeout=1.0
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        server = site._server
        assert server is not None
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1]

    async def _cleanup(self) -> None:
        if self._app is not None:
            self._app.stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if self._app is not None:
            loop.call_soon_threadsafe(self._app.stopping.set)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        self._loop = self._thread = None

    def __enter__(self) -> StubLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses ------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """The root (what ``Anthropic`` takes as ``base_url``)."""
        return f"http://{self.host}:{self.port}"

    @property
    def openai_url(self) -> str:
        """The root with ``/v1`` (what ``OpenAICompatible`` takes as ``base_url``)."""
        return f"{self.url}/v1"

    # -- scripting and faults ------------------------------------------------------------------
    def configure(self, config: Mapping[str, Any]) -> None:
        """Change the answer rule and/or append faults; the same JSON as ``POST /stub/config``."""
        configure(self.state, config)

    def schedule(self, *faults: Fault | None, path: str | None = None) -> None:
        """Faults for the next requests (to ``path`` only, when given), in order; ``None`` is a
        normal answer."""
        with self.state.lock:
            self.state.faults.extend((path, fault) for fault in faults)

    def clear_faults(self) -> None:
        with self.state.lock:
            self.state.faults.clear()

    # -- what happened ----------------------------------------------------------------------------
    def calls(self, path: str | None = None) -> int:
        """Requests received (to ``path``, or in all)."""
        with self.state.lock:
            if path is None:
                return sum(self.state.counts.values())
            return self.state.counts[path]

    def requests(self, path: str | None = None) -> list[StubRequest]:
        with self.state.lock:
            return [r for r in self.state.requests if path is None or r.path == path]

    def arrival_times(self, path: str | None = None) -> list[float]:
        """``time.monotonic()`` at each request's arrival, in order."""
        return [r.started for r in self.requests(path)]

    def reset(self) -> None:
        """Forget recorded requests, counters and pending faults (the script stays)."""
        with self.state.lock:
            self.state.requests.clear()
            self.state.counts.clear()
            self.state.faults.clear()
