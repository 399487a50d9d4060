"""``evalsi serve`` as a user runs it: the console script in a subprocess."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

EVALSI = Path(sys.executable).parent / "evalsi"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EVALSI), *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )


def test_help_teaches(tmp_path: Path) -> None:
    done = _run("serve", "--help", cwd=tmp_path)
    assert done.returncode == 0
    for needle in ("--no-auth", "/openapi.json", "/healthz", "/metrics", "gRPC-Web", "examples"):
        assert needle in done.stdout
    assert "evalsi serve" in _run("--help", cwd=tmp_path).stdout


def test_non_loopback_without_no_auth_exits_2(tmp_path: Path) -> None:
    done = _run("serve", "--host", "0.0.0.0", cwd=tmp_path)
    assert done.returncode == 2
    assert "refusing to listen on 0.0.0.0" in done.stderr
    assert "--no-auth" in done.stderr
    assert "Traceback" not in done.stderr


def test_bad_config_exits_2_naming_the_field(tmp_path: Path) -> None:
    (tmp_path / "evalsi.yaml").write_text("server: {port: x}\n")
    done = _run("serve", "--config", "evalsi.yaml", cwd=tmp_path)
    assert done.returncode == 2
    assert 'server.port: expected an integer 1-65535, got "x"' in done.stderr


def test_serves_until_sigterm(tmp_path: Path) -> None:
    port = _free_port()
    (tmp_path / "evalsi.yaml").write_text("server: {port: 1}\ndataDir: data\n")
    proc = subprocess.Popen(
        [str(EVALSI), "serve", "--port", str(port), "--config", "evalsi.yaml"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(url + "/healthz", timeout=2) as r:
                    assert json.loads(r.read()) == {"status": "ok"}
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the server did not come up: {proc.communicate()[1]}")
                time.sleep(0.1)
        body = json.dumps(
            {
                "records": [{"id": "1", "output": {"text": "a"}, "reference": {"text": "a"}}],
                "evaluators": [{"ref": "exact-match"}],
            }
        ).encode()
        request = urllib.request.Request(url + "/v1alpha1/evaluate", data=body, method="POST")
        with urllib.request.urlopen(request, timeout=30) as r:
            assert json.loads(r.read())["records"] == "1"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            _, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert proc.returncode == 0, stderr
    assert f"listening on http://127.0.0.1:{port}" in stderr
    assert str((tmp_path / "data" / "evalsi.db").resolve()) in stderr
    assert (tmp_path / "data" / "evalsi.db").exists()
