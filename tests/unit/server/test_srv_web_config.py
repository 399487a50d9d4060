"""``server.allowedHosts``, ``server.cors.allowOrigins`` and ``limits`` in evalsi.yaml: defaults,
normal forms, and each bad value named; the guard's Host matching on its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evalsi.core import SpecError
from evalsi.server._config import load_config
from evalsi.server._state import Limits
from evalsi.server._web_guard import WebGuard, normal_origin


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "evalsi.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_allow_no_origin_and_no_extra_host() -> None:
    config = load_config(None)
    assert config.allowed_hosts == ()
    assert config.cors_allow_origins == ()
    assert config.limits == Limits()


def test_values_are_read_and_normalised(tmp_path: Path) -> None:
    config = load_config(
        _write(
            tmp_path,
            "server:\n"
            "  allowedHosts: [Evalsi.Internal., 'proxy.example:8443', '[fd00::1]']\n"
            "  cors: {allowOrigins: ['HTTPS://Dash.Example:443', 'http://127.0.0.1:3000/']}\n"
            "limits: {maxTrials: 5, maxQueuedRuns: 0}\n",
        )
    )
    assert config.allowed_hosts == ("evalsi.internal", "proxy.example:8443", "[fd00::1]")
    assert config.cors_allow_origins == ("https://dash.example", "http://127.0.0.1:3000")
    assert (config.limits.max_trials, config.limits.max_queued_runs) == (5, 0)
    assert config.limits.max_tasks_per_run == Limits().max_tasks_per_run


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("server: {allowedHosts: evalsi.internal}", "server.allowedHosts: expected a list"),
        ("server: {allowedHosts: ['a/b']}", "server.allowedHosts[0]: expected a host name"),
        ("server: {allowedHosts: [8080]}", "server.allowedHosts[0]:"),
        ("server: {cors: {allowOrigins: ['null']}}", "server.cors.allowOrigins[0]: expected"),
        ("server: {cors: {allowOrigins: ['*']}}", "server.cors.allowOrigins[0]: expected"),
        ("server: {cors: {allowOrigins: ['https://a/x']}}", "server.cors.allowOrigins[0]:"),
        ("server: {cors: {allowOrigins: ['ftp://a']}}", "server.cors.allowOrigins[0]:"),
        ("server: {cors: {origins: []}}", "server.cors.origins: unknown field"),
        ("limits: {maxTrials: 0}", "limits.maxTrials: expected an integer 1-"),
        ("limits: {maxTrials: '10'}", "limits.maxTrials: expected an integer"),
        ("limits: {maxQueuedRuns: -1}", "limits.maxQueuedRuns: expected an integer 0-"),
        ("limits: {trials: 1}", "limits.trials: unknown field"),
        ("limits: 5", "limits: expected a mapping"),
    ],
)
def test_bad_values_name_the_field(tmp_path: Path, text: str, where: str) -> None:
    with pytest.raises(SpecError) as e:
        load_config(_write(tmp_path, text + "\n"))
    assert f"evalsi.yaml: {where}" in str(e.value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("http://localhost:8080", "http://localhost:8080"),
        ("https://A.example:443", "https://a.example"),
        ("http://a.example:80", "http://a.example"),
        ("http://[::1]:9", "http://[::1]:9"),
        ("null", None),
        ("http://user@a.example", None),
        ("http://a.example?x=1", None),
        ("http://a.example:99999", None),
        ("", None),
    ],
)
def test_origin_normal_form(value: str, expected: str | None) -> None:
    assert normal_origin(value) == expected


def _scope(server: tuple[str, int] | None, scheme: str = "http") -> dict[str, Any]:
    return {"type": "http", "scheme": scheme, "server": server}


@pytest.mark.parametrize(
    ("host", "server", "allowed"),
    [
        ("127.0.0.1:8080", ("127.0.0.1", 8080), True),
        ("localhost:8080", ("127.0.0.1", 8080), True),
        ("[::1]:8080", ("::1", 8080), True),
        ("localhost:8080", ("::1", 8080), True),
        ("localhost", ("127.0.0.1", 80), True),  # the default port of http
        ("localhost", ("127.0.0.1", 8080), False),
        ("localhost:8081", ("127.0.0.1", 8080), False),
        ("evil.example:8080", ("127.0.0.1", 8080), False),
        ("localhost:8080", ("10.0.0.5", 8080), False),  # not bound to loopback
        ("10.0.0.5:8080", ("10.0.0.5", 8080), True),
        ("10.0.0.6:8080", ("10.0.0.5", 8080), False),
        ("localhost:8080", None, False),  # no address (a unix socket)
        ("evalsi.internal", ("127.0.0.1", 8080), True),  # configured, any port
        ("EVALSI.INTERNAL.:1", ("127.0.0.1", 8080), True),
        ("proxy.example:8443", ("127.0.0.1", 8080), True),
        ("proxy.example:8444", ("127.0.0.1", 8080), False),
        ("proxy.example", ("127.0.0.1", 8080), False),
        ("[fd00::1]:8080", ("127.0.0.1", 8080), True),
        ("[fd00::2]:8080", ("127.0.0.1", 8080), False),
        ("127.0.0.1:x", ("127.0.0.1", 8080), False),
        ("", ("127.0.0.1", 8080), False),
    ],
)
def test_host_matching(host: str, server: tuple[str, int] | None, allowed: bool) -> None:
    guard = WebGuard(_app, allowed_hosts=("evalsi.internal", "proxy.example:8443", "[fd00::1]"))
    assert guard.host_allowed(host, _scope(server)) is allowed


def test_a_star_accepts_any_host() -> None:
    guard = WebGuard(_app, allowed_hosts=("*",))
    assert guard.host_allowed("evil.example", _scope(("127.0.0.1", 8080)))


async def _app(scope: Any, receive: Any, send: Any) -> None:  # pragma: no cover - never called
    raise AssertionError("unreached")
