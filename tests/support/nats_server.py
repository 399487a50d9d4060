"""A nats-server of the test's own (JetStream, a temporary store, a free port): tests that kill
or restart it never disturb the machine's shared one. Debian's binary, or NATS_SERVER."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest


def nats_binary() -> str:
    found = os.environ.get("NATS_SERVER") or shutil.which("nats-server") or "/usr/sbin/nats-server"
    if not Path(found).exists():
        pytest.skip("no nats-server: apt-get install nats-server (.ci/run does)")
    return found


class NatsServer:
    """``start`` / ``kill`` / ``restart`` on the same port and store directory."""

    def __init__(self, store: Path) -> None:
        self.store = store
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.url = f"nats://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> NatsServer:
        self.proc = subprocess.Popen(
            [nats_binary(), "-js", "-a", "127.0.0.1", "-p", str(self.port),
             "-sd", str(self.store)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("nats-server did not start")

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def restart(self) -> None:
        self.kill()
        self.start()

    def __enter__(self) -> NatsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()
