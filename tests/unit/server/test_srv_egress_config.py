"""``evalsi.yaml`` ``egress:``: parsed into the server's policy, bad entries named by their key,
the listen address (file or flag) deciding the loopback and private default, and the judges of
the file allowed by their endpoint."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from evalsi.connectors import EgressDenied, EgressPolicy
from evalsi.core import SpecError
from evalsi.server._config import load_config
from evalsi.server._egress import server_egress
from evalsi.server._state import ServerConfig


def _load(tmp_path: Path, text: str, *, host: str | None = None) -> ServerConfig:
    path = tmp_path / "evalsi.yaml"
    path.write_text(text, encoding="utf-8")
    return load_config(path, host=host, no_auth=True)


def _refused(policy: EgressPolicy, url: str) -> str | None:
    try:
        policy.check_url(url)
    except EgressDenied as e:
        return e.rule
    return None


def test_no_section_follows_the_listen_address(tmp_path: Path) -> None:
    local = server_egress(_load(tmp_path, "server: {port: 9000}\n"))
    assert _refused(local, "http://127.0.0.1:5432/") is None
    assert _refused(local, "http://169.254.169.254/") == "always-deny cloud-metadata"
    exposed = server_egress(_load(tmp_path, "server: {port: 9000}\n", host="0.0.0.0"))
    assert exposed.listen_host == "0.0.0.0"  # the flag, not the file
    assert _refused(exposed, "http://127.0.0.1:5432/") == "loopback and private denied off loopback"


def test_every_key(tmp_path: Path) -> None:
    cfg = _load(
        tmp_path,
        """
server: {host: 0.0.0.0}
egress:
  allow: [10.0.0.0/8, 'judge.internal:8000', '[fd00::1]:443', 169.254.169.254]
  deny: ['*:5432', 10.0.0.9]
  allowPrivate: false
""",
    )
    policy = server_egress(cfg)
    assert [r.text for r in policy.allow] == [
        "10.0.0.0/8",
        "judge.internal:8000",
        "[fd00::1]:443",
        "169.254.169.254",
    ]
    assert [r.source for r in policy.deny] == ["egress.deny[0]", "egress.deny[1]"]
    assert policy.allow_private is False
    assert _refused(policy, "http://10.1.1.1/") is None
    assert _refused(policy, "http://10.0.0.9/") == "egress.deny[1]"
    assert _refused(policy, "http://10.1.1.1:5432/") == "egress.deny[0]"
    assert _refused(policy, "http://169.254.169.254/") is None
    assert _refused(policy, "http://192.168.0.1/") == "loopback and private denied off loopback"


@pytest.mark.parametrize(
    ("value", "private"), [("true", True), ("false", False), ("auto", None), ("null", None)]
)
def test_allow_private(tmp_path: Path, value: str, private: bool | None) -> None:
    cfg = _load(tmp_path, f"egress: {{allowPrivate: {value}}}\n")
    assert cfg.egress.allow_private is private


def test_an_empty_section_is_the_default(tmp_path: Path) -> None:
    cfg = _load(tmp_path, "egress: {allow: [], deny: []}\n")
    assert cfg.egress.allow == () and cfg.egress.deny == ()  # noqa: PT018


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("egress: [10.0.0.0/8]\n", "egress: expected a mapping, got a list"),
        ("egress: {allowed: [x]}\n", "egress.allowed: unknown field 'allowed'"),
        ("egress: {allow: 10.0.0.0/8}\n", "egress.allow: expected a list"),
        ("egress: {deny: [10.0.0.0/33]}\n", "egress.deny[0]: '10.0.0.0/33' is not a CIDR range"),
        ("egress: {allow: [ok.example, 5]}\n", "egress.allow[1]: expected a string"),
        ("egress: {allow: ['host:99999']}\n", "egress.allow[0]: 'host:99999': expected a port"),
        ("egress: {allow: ['http://x:8000/v1']}\n", "egress.allow[0]: 'http://x:8000/v1' is a URL"),
        ("egress: {allowPrivate: maybe}\n", "egress.allowPrivate: expected auto, true or false"),
        ("egress: {allowPrivate: 1}\n", "egress.allowPrivate: expected auto, true or false"),
    ],
)
def test_errors_name_the_key(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(SpecError) as e:
        _load(tmp_path, text)
    assert expected in str(e.value)


def test_the_judges_of_the_file_are_allowed_by_their_endpoint(tmp_path: Path) -> None:
    cfg = _load(
        tmp_path,
        """
server: {host: 0.0.0.0}
judges:
  local: {connector: openai-compatible, baseUrl: 'http://127.0.0.1:8000/v1', model: m}
  named: {connector: openai-compatible, baseUrl: 'http://judge.lan:9000/v1', model: m}
""",
    )
    policy = server_egress(cfg)
    assert [r.source for r in policy.allow] == [
        "evalsi.yaml judges.local",
        "evalsi.yaml judges.named",
    ]
    assert _refused(policy, "http://127.0.0.1:8000/v1") is None
    assert _refused(policy, "http://127.0.0.1:8001/v1") is not None  # only that endpoint
    assert policy.decide("judge.lan", ipaddress.ip_address("10.0.0.7"), 9000) is None
