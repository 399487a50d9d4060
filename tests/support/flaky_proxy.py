"""A loopback TCP proxy the test controls, to break a client's connection on purpose.

    with FlakyProxy(("127.0.0.1", server_port)) as proxy:
        client_url = proxy.url
        proxy.reset()          # every open connection ends with a TCP RST ("reset by peer")
        proxy.refuse(2.0)      # new connections are reset at once for 2 s (a server restarting)

Plain threads and sockets: the proxy never shares an event loop with the code under test.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from typing import Any


class FlakyProxy:
    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._refuse_until = 0.0
        self._closed = False
        self.accepted = 0
        self.resets = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> FlakyProxy:
        threading.Thread(target=self._accept, name="flaky-proxy", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closed = True
        self._listener.close()
        self.reset()

    def reset(self) -> int:
        """End every open connection, both sides, with a TCP RST; returns how many."""
        with self._lock:
            sockets, self._open = self._open, []
        for s in sockets:
            _rst(s)
        self.resets += len(sockets)
        return len(sockets)

    def refuse(self, seconds: float) -> None:
        """Reset open connections and every new one for ``seconds``."""
        self._refuse_until = time.monotonic() + seconds
        self.reset()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self.accepted += 1
            if time.monotonic() < self._refuse_until:
                _rst(client)
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                _rst(client)
                continue
            server.settimeout(None)
            with self._lock:
                self._open += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=_pipe, args=(a, b), daemon=True).start()


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def _rst(s: Any) -> None:
    # SO_LINGER with a zero timeout: close() sends RST instead of FIN, as a dropped NAT entry,
    # a killed peer or a load balancer timing out does.
    with contextlib.suppress(OSError):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
