"""Any ASGI app served by hypercorn (HTTP/1.1 and h2c, so gRPC works) on a free loopback port,
in a background thread of the test process.

    with AsgiServer(app) as server:
        httpx.get(server.url + "/healthz")

Hypercorn's default ``keep_alive_max_requests`` (1000) sends GOAWAY and kills the in-flight
gRPC call, so it is raised here as ``evalsi serve`` does.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any

from hypercorn.asyncio import serve
from hypercorn.config import Config


class AsgiServer:
    def __init__(self, app: Any, *, host: str = "127.0.0.1") -> None:
        self.app = app
        self.host = host
        self.port = _free_port(host)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __enter__(self) -> AsgiServer:
        self._thread = threading.Thread(target=self._main, name="asgi-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(15):
            raise RuntimeError("the test server did not start within 15 s")
        if self._error is not None:
            raise RuntimeError(f"the test server failed to start: {self._error!r}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(15)

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as e:  # noqa: BLE001 - surfaced to the test through __enter__
            self._error = e
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        config = Config()
        config.bind = [f"{self.host}:{self.port}"]
        config.keep_alive_max_requests = 1_000_000_000
        config.accesslog = None
        config.errorlog = None
        task = asyncio.create_task(serve(self.app, config, shutdown_trigger=self._stop.wait))
        await _wait_listening(self.host, self.port)
        self._ready.set()
        await task


async def _wait_listening(host: str, port: int) -> None:
    for _ in range(300):
        try:
            _, writer = await asyncio.open_connection(host, port)
        except OSError:
            await asyncio.sleep(0.02)
            continue
        writer.close()
        await writer.wait_closed()
        return
    raise RuntimeError(f"nothing listens on {host}:{port}")


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
