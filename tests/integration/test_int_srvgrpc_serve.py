"""``evalsi serve --grpc-port`` as a user runs it: the console script answers gRPC on both
ports (and health on the native one), exits 0 on SIGTERM; bad ports exit 2 naming the field."""

from __future__ import annotations

import socket
from pathlib import Path

import grpc

from evalsi._proto.evalsi.v1alpha1 import evaluation_service_pb2 as ev
from evalsi._proto.grpc.health.v1 import health_pb2
from tests.support.server_state import free_port, run_evalsi, serve_subprocess


def test_help_mentions_the_flag(tmp_path: Path) -> None:
    done = run_evalsi("serve", "--help", cwd=tmp_path)
    assert done.returncode == 0
    assert "--grpc-port PORT" in done.stdout
    assert "grpcPort" in done.stdout


def test_bad_grpc_port_exits_2_naming_the_field(tmp_path: Path) -> None:
    (tmp_path / "evalsi.yaml").write_text("server: {grpcPort: many}\n")
    done = run_evalsi("serve", "--config", "evalsi.yaml", cwd=tmp_path)
    assert done.returncode == 2
    assert 'server.grpcPort: expected an integer 1-65535, got "many"' in done.stderr
    (tmp_path / "evalsi.yaml").unlink()
    done = run_evalsi("serve", "--port", "9123", "--grpc-port", "9123", cwd=tmp_path)
    assert done.returncode == 2
    assert "--grpc-port: 9123 is also the main port" in done.stderr
    assert "Traceback" not in done.stderr


def test_busy_grpc_port_exits_2(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        done = run_evalsi(
            "serve", "--port", str(free_port()), "--grpc-port", str(taken), cwd=tmp_path
        )
    assert done.returncode == 2
    assert f"cannot listen for native gRPC on 127.0.0.1:{taken}" in done.stderr
    assert "Traceback" not in done.stderr


def test_serves_both_ports_until_sigterm(tmp_path: Path) -> None:
    port, grpc_port = free_port(), free_port()
    (tmp_path / "evalsi.yaml").write_text(f"server: {{grpcPort: {grpc_port}}}\ndataDir: data\n")
    request = ev.EvaluateRequest()
    record = request.records.add(id="1")
    record.output.text = record.reference.text = "a"
    request.evaluators.add(ref="exact-match")
    with serve_subprocess("--port", str(port), "--config", "evalsi.yaml", cwd=tmp_path) as proc:
        answers = []
        for p in (port, grpc_port):
            with grpc.insecure_channel(f"127.0.0.1:{p}") as channel:
                try:
                    grpc.channel_ready_future(channel).result(30)
                except grpc.FutureTimeoutError:
                    proc.fail(f"nothing answers on {p}")
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
    assert proc.returncode == 0, proc.stderr
    assert proc.stop_seconds < 10
    assert f"native gRPC (grpcio) on 127.0.0.1:{grpc_port}" in proc.stderr
    assert "evalsi serve: stopped" in proc.stderr
    assert "Traceback" not in proc.stderr
