"""The server as tests build it, one way: a ``ServerState`` under a temp dir, the app served on
loopback, and ``evalsi serve`` as a subprocess.

    with serving(server_state(tmp)) as server:
        evalsi.Client(server.url)
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import pytest

from evalsi.evaluators import Registry
from evalsi.packs import builtin_registry
from evalsi.server._app import ServiceBinding, build_app
from evalsi.server._run_manager import RunManager
from evalsi.server._state import ServerConfig, ServerState
from evalsi.store import SqlStore
from tests.support.asgi_server import AsgiServer

EVALSI = Path(sys.executable).parent / "evalsi"


def server_state(
    tmp: Path,
    *,
    store: str | None = None,
    datasets_dir: Path | None = None,
    registry: Registry | None = None,
    runs: bool = True,
    **config: Any,
) -> ServerState:
    """A state under ``tmp``: store ``tmp/s.db`` (or ``store``: a path, ``:memory:`` or a
    PostgreSQL URL), datasets in ``tmp/datasets``, the built-in evaluators, and a RunManager
    unless ``runs`` is False; ``config`` sets any other ``ServerConfig`` field."""
    settings = ServerConfig(
        data_dir=tmp,
        datasets_dir=datasets_dir if datasets_dir is not None else tmp / "datasets",
        store=store if store is not None else str(tmp / "s.db"),
        **config,
    )
    state = ServerState(
        config=settings,
        store=SqlStore.open(settings.store),
        registry=registry if registry is not None else builtin_registry(),
    )
    if runs:
        state.runs = RunManager(state)
    return state


@contextmanager
def serving(
    state: ServerState,
    services: Sequence[ServiceBinding] | None = None,
    *,
    only: tuple[Any, Callable[[ServerState], Any]] | None = None,
) -> Iterator[AsgiServer]:
    """The app over ``state`` on a loopback port; its store is closed once the server stops.

    ``services`` as ``build_app`` takes them (default: the four evalsi services), or
    ``only=(XxxASGIApplication, XxxHandler)`` for one service whose handler takes the state.
    """
    if only is not None:
        services = [(only[0], only[1](state))]
    with AsgiServer(build_app(state, services)) as server:
        yield server
    state.store.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_evalsi(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The ``evalsi`` console script run to its end."""
    return subprocess.run(
        [str(EVALSI), *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )


class ServeProcess:
    """A running ``evalsi serve``; after the ``with`` block, ``returncode``, ``stderr`` and
    ``stop_seconds`` (SIGTERM to exit) tell how it stopped."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.stderr = ""
        self.stop_seconds = 0.0

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def wait_healthy(self, url: str, timeout: float = 30) -> None:
        """Polls ``url/healthz`` until it answers ``{"status": "ok"}``."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(url + "/healthz", timeout=2) as r:
                    assert json.loads(r.read()) == {"status": "ok"}
                    return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.fail("the server did not come up")
                time.sleep(0.1)

    def fail(self, why: str) -> NoReturn:
        """Fails the test with the server's stderr (the server is killed)."""
        self.proc.kill()
        self.stderr = self.proc.communicate()[1]
        pytest.fail(f"{why}: {self.stderr}")

    def stop(self) -> None:
        """SIGTERM, then waits up to 30 s for the exit (killed and raised past that)."""
        if self.proc.returncode is not None:
            return
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.stderr = self.proc.communicate(timeout=30)[1]
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        self.stop_seconds = time.monotonic() - started


@contextmanager
def serve_subprocess(*args: str, cwd: Path) -> Iterator[ServeProcess]:
    """``evalsi serve ARGS`` in ``cwd``, stopped with SIGTERM when the block ends."""
    proc = subprocess.Popen(
        [str(EVALSI), "serve", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    serving = ServeProcess(proc)
    try:
        yield serving
    finally:
        serving.stop()
