"""The optional native gRPC port: ``server.grpcPort`` / ``--grpc-port`` validation, and the
Connect → gRPC status mapping it answers with."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from connectrpc.code import Code

from evalsi.core import SpecError, UserError
from evalsi.server._config import load_config
from evalsi.server.protocol._grpc_port import _STATUS


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "evalsi.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_off_by_default(tmp_path: Path) -> None:
    assert load_config(_write(tmp_path, "server: {port: 9001}\n")).grpc_port is None
    assert load_config(None).grpc_port is None


def test_from_the_file_and_the_flag(tmp_path: Path) -> None:
    path = _write(tmp_path, "server: {port: 9001, grpcPort: 9002}\n")
    assert load_config(path).grpc_port == 9002
    assert load_config(path, grpc_port=9500).grpc_port == 9500  # the flag wins
    assert load_config(None, grpc_port=0).grpc_port == 0  # any free port


@pytest.mark.parametrize(
    ("value", "shown"),
    [('"x"', '"x"'), ("0", "0"), ("70000", "70000"), ("true", "true"), ("[1]", "a list")],
)
def test_bad_value_names_the_field(tmp_path: Path, value: str, shown: str) -> None:
    with pytest.raises(SpecError) as e:
        load_config(_write(tmp_path, f"server: {{grpcPort: {value}}}\n"))
    assert f"server.grpcPort: expected an integer 1-65535, got {shown}" in str(e.value)


def test_typo_lists_grpc_port_among_the_fields(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as e:
        load_config(_write(tmp_path, "server: {grpc_port: 9002}\n"))
    assert "server.grpc_port: unknown field 'grpc_port'" in str(e.value)
    assert "grpcPort" in str(e.value)


def test_flag_out_of_range(tmp_path: Path) -> None:
    with pytest.raises(UserError) as e:
        load_config(None, grpc_port=70000)
    assert "--grpc-port: expected 0-65535, got 70000" in str(e.value)


def test_same_port_twice_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError) as e:
        load_config(_write(tmp_path, "server: {port: 9001, grpcPort: 9001}\n"))
    assert "server.grpcPort: 9001 is also the main port" in str(e.value)
    with pytest.raises(UserError) as e:
        load_config(None, port=9003, grpc_port=9003)
    assert "--grpc-port: 9003 is also the main port" in str(e.value)
    assert load_config(None, port=0, grpc_port=0).grpc_port == 0  # two free ports differ


def test_non_loopback_rule_covers_both_ports(tmp_path: Path) -> None:
    path = _write(tmp_path, "server: {host: 0.0.0.0, grpcPort: 9002}\n")
    with pytest.raises(UserError, match=r"refusing to listen on 0\.0\.0\.0"):
        load_config(path)
    assert load_config(path, no_auth=True).host == "0.0.0.0"


def test_every_connect_code_has_the_grpc_status_of_the_same_number() -> None:
    # Connect codes are gRPC's codes by another name (CANCELED is gRPC's CANCELLED).
    numbers = {code: i for i, code in enumerate(Code, start=1)}
    assert len(_STATUS) == len(Code) == 16
    for code, status in _STATUS.items():
        assert status.value[0] == numbers[code], code
    assert _STATUS[Code.CANCELED] is grpc.StatusCode.CANCELLED
    assert _STATUS[Code.INVALID_ARGUMENT] is grpc.StatusCode.INVALID_ARGUMENT
