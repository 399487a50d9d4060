"""Issue 16: `evalsi watch` in follow mode survives a dropped connection. It died with
"Connection reset by peer", exit 3, after a few minutes against a healthy server; now it notes
the loss on stderr, backs off (0.5 s doubling, at most 10 s) and keeps printing, and still
exits on a real error (the policy deleted: exit 2).

The connection is broken on purpose by a loopback TCP proxy between the CLI and a real server:
every open connection reset (TCP RST, what a peer or a middlebox timing out sends), then every
new one refused for two seconds (a server restarting).
"""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from connectrpc.code import Code
from connectrpc.errors import ConnectError

from evalsi._proto.evalsi.v1alpha1.policy_service_connect import PolicyServiceASGIApplication
from evalsi.cli._watch import reconnect_delay
from evalsi.client import Client, ServerUnavailable
from evalsi.client._errors import translate
from evalsi.core import NotFoundError, RunError, UserError
from evalsi.server._policies import PolicyHandler
from tests.e2e.test_e2e_watch import POLICY, Server
from tests.support.flaky_proxy import FlakyProxy
from tests.support.server_state import server_state, serving


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    # The CLI reaches the server through the proxy's port: any port of 127.0.0.1 is allowed.
    state = server_state(tmp_path / "srv", runs=False, allowed_hosts=("127.0.0.1",))
    handler = PolicyHandler(state)
    with serving(state, [(PolicyServiceASGIApplication, handler)]) as srv:
        yield Server(srv, handler)


@pytest.fixture
def proxy(server: Server) -> Iterator[FlakyProxy]:
    with FlakyProxy(("127.0.0.1", server.server.port)) as p:
        yield p


class Lines:
    """A process's stdout lines, read by a thread, so a hung CLI fails the test, not CI."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self._queue: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line)
        self._queue.put("")

    def next(self, timeout: float = 30) -> dict[str, Any]:
        line = self._queue.get(timeout=timeout)
        assert line, f"the watch ended (exit {self.proc.poll()})"
        data: dict[str, Any] = json.loads(line)
        return data

    def until(self, check: Callable[[dict[str, Any]], bool], timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not check(self.next(max(deadline - time.monotonic(), 0.1))):
            pass


def _watch(start_evalsi: Any, url: str) -> tuple[subprocess.Popen[str], Lines]:
    proc = start_evalsi(
        "watch", "-f", "policy.yaml", "--server", url, "--interval", "0.2", "--format", "json"
    )
    return proc, Lines(proc)


def test_follow_reconnects_and_keeps_printing(
    server: Server, proxy: FlakyProxy, start_evalsi: Any, tmp_path: Path
) -> None:
    (tmp_path / "policy.yaml").write_text(POLICY)
    proc, lines = _watch(start_evalsi, proxy.url)
    assert lines.next()["stats"]["evaluated"] == 0
    assert proxy.reset() >= 1  # the kept-alive connection the next poll would reuse
    server.trace(1, "sorry")
    lines.until(lambda d: d["stats"]["evaluated"] == 1)
    proxy.refuse(2.0)  # down for 2 s: attempts at +0, +0.5, +1.5, +3.5 s; the last one lands
    down = time.monotonic()
    lines.next()
    back = time.monotonic() - down
    server.trace(2, "fine")
    lines.until(lambda d: d["stats"]["evaluated"] == 2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert "connection lost (Connection reset by peer (os error 104)), reconnecting in 0.5s" in err
    assert "reconnecting in 1s" in err
    assert "reconnecting in 2s" in err
    assert "reconnected to " in err
    assert "stopped watching" in err
    assert 2.0 <= back < 2.0 + 0.5 + 1 + 2 + 5, back  # the backoff, plus a loaded machine


def test_a_real_error_still_ends_the_watch(
    server: Server, proxy: FlakyProxy, start_evalsi: Any, tmp_path: Path
) -> None:
    (tmp_path / "policy.yaml").write_text(POLICY)
    proc, lines = _watch(start_evalsi, proxy.url)
    lines.next()
    with Client(server.url) as client:
        client.delete_policy("shop-agent")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2, err
    assert err.startswith("error: ") or "\nerror: " in err
    assert "shop-agent" in err
    assert "reconnecting" not in err
    assert "Traceback" not in err


def test_a_server_never_reached_fails_at_once(
    cli: Callable[..., Any], tmp_path: Path, proxy: FlakyProxy
) -> None:
    # A wrong URL is not a blip: no reconnecting before the policy was ever applied.
    (tmp_path / "policy.yaml").write_text(POLICY)
    proxy.refuse(60)
    proc = cli("watch", "-f", "policy.yaml", "--server", proxy.url, timeout=60)
    assert proc.returncode == 3, proc.stderr
    assert "cannot reach the evalsi server" in proc.stderr
    assert "reconnecting" not in proc.stderr


def test_backoff_doubles_from_half_a_second_to_ten() -> None:
    assert [reconnect_delay(n) for n in range(7)] == [0.5, 1, 2, 4, 8, 10, 10]
    assert reconnect_delay(10_000) == 10


@pytest.mark.parametrize(
    ("code", "retry", "kind"),
    [
        (Code.UNAVAILABLE, True, RunError),
        (Code.DEADLINE_EXCEEDED, True, RunError),
        (Code.NOT_FOUND, False, NotFoundError),
        (Code.UNAUTHENTICATED, False, UserError),
        (Code.PERMISSION_DENIED, False, UserError),
        (Code.INVALID_ARGUMENT, False, UserError),
        (Code.INTERNAL, False, RunError),
    ],
)
def test_which_failures_are_worth_retrying(code: Code, retry: bool, kind: type) -> None:
    error = translate(ConnectError(code, "x"), "http://127.0.0.1:1")
    assert isinstance(error, kind)
    assert isinstance(error, ServerUnavailable) is retry
    assert isinstance(translate(ConnectionResetError(104, "reset"), "u"), ServerUnavailable)
