"""``evalsi serve --grpc-port`` as a user runs it: the console script answers gRPC on both
ports (and health on the native one), exits 0 on SIGTERM; bad ports exit 2 naming the field."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest

from evalsi._proto.evalsi.v1alpha1 import evaluation_service_pb2 as ev
from evalsi._proto.grpc.health.v1 import health_pb2

EVALSI = Path(sys.executable).parent / "evalsi"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EVALSI), *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )


def test_help_mentions_the_flag(tmp_path: Path) -> None:
    done = _run("serve", "--help", cwd=tmp_path)
    assert done.returncode == 0
    assert "--grpc-port PORT" in done.stdout
    assert "grpcPort" in done.stdout


def test_bad_grpc_port_exits_2_naming_the_field(tmp_path: Path) -> None:
    (tmp_path / "evalsi.yaml").write_text("server: {grpcPort: many}\n")
    done = _run("serve", "--config", "evalsi.yaml", cwd=tmp_path)
    assert done.returncode == 2
    assert 'server.grpcPort: expected an integer 1-65535, got "many"' in done.stderr
    (tmp_path / "evalsi.yaml").unlink()
    done = _run("serve", "--port", "9123", "--grpc-port", "9123", cwd=tmp_path)
    assert done.returncode == 2
    assert "--grpc-port: 9123 is also the main port" in done.stderr
    assert "Traceback" not in done.stderr


def test_busy_grpc_port_exits_2(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        done = _run("serve", "--port", str(_free_port()), "--grpc-port", str(taken), cwd=tmp_path)
    assert done.returncode == 2
    assert f"cannot listen for native gRPC on 127.0.0.1:{taken}" in done.stderr
    assert "Traceback" not in done.stderr


def test_serves_both_ports_until_sigterm(tmp_path: Path) -> None:
    port, grpc_port = _free_port(), _free_port()
    (tmp_path / "evalsi.yaml").write_text(f"server: {{grpcPort: {grpc_port}}}\ndataDir: data\n")
    proc = subprocess.Popen(
        [str(EVALSI), "serve", "--port", str(port), "--config", "evalsi.yaml"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    request = ev.EvaluateRequest()
    record = request.records.add(id="1")
    record.output.text = record.reference.text = "a"
    request.evaluators.add(ref="exact-match")
    try:
        answers = []
        for p in (port, grpc_port):
            with grpc.insecure_channel(f"127.0.0.1:{p}") as channel:
                try:
                    grpc.channel_ready_future(channel).result(30)
                except grpc.FutureTimeoutError:
                    proc.kill()
                    pytest.fail(f"nothing answers on {p}: {proc.communicate()[1]}")
                evaluate = channel.unary_unary(
                    "/evalsi.v1alpha1.EvaluationService/Evaluate",
                    request_serializer=ev.EvaluateRequest.SerializeToString,
                    response_deserializer=ev.EvaluateResponse.FromString,
                )
                answers.append(evaluate(request, timeout=30))
                check = channel.unary_unary(
                    "/grpc.health.v1.Health/Check",
                    request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                    response_deserializer=health_pb2.HealthCheckResponse.FromString,
                )
                reply = check(health_pb2.HealthCheckRequest(), timeout=10)
                assert reply.status == health_pb2.HealthCheckResponse.SERVING
        assert [a.metrics[0].mean for a in answers] == [1.0, 1.0]
        assert [a.records for a in answers] == [1, 1]
    finally:
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            _, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert proc.returncode == 0, stderr
    assert time.monotonic() - started < 10
    assert f"native gRPC (grpcio) on 127.0.0.1:{grpc_port}" in stderr
    assert "evalsi serve: stopped" in stderr
    assert "Traceback" not in stderr
