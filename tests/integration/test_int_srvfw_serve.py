"""``evalsi serve`` as a user runs it: the console script in a subprocess."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from tests.support.server_state import free_port, run_evalsi, serve_subprocess


def test_help_teaches(tmp_path: Path) -> None:
    done = run_evalsi("serve", "--help", cwd=tmp_path)
    assert done.returncode == 0
    for needle in ("--no-auth", "/openapi.json", "/healthz", "/metrics", "gRPC-Web", "examples"):
        assert needle in done.stdout
    assert "evalsi serve" in run_evalsi("--help", cwd=tmp_path).stdout


def test_non_loopback_without_no_auth_exits_2(tmp_path: Path) -> None:
    done = run_evalsi("serve", "--host", "0.0.0.0", cwd=tmp_path)
    assert done.returncode == 2
    assert "refusing to listen on 0.0.0.0" in done.stderr
    assert "--no-auth" in done.stderr
    assert "Traceback" not in done.stderr


def test_bad_config_exits_2_naming_the_field(tmp_path: Path) -> None:
    (tmp_path / "evalsi.yaml").write_text("server: {port: x}\n")
    done = run_evalsi("serve", "--config", "evalsi.yaml", cwd=tmp_path)
    assert done.returncode == 2
    assert 'server.port: expected an integer 1-65535, got "x"' in done.stderr


def test_serves_until_sigterm(tmp_path: Path) -> None:
    port = free_port()
    (tmp_path / "evalsi.yaml").write_text("server: {port: 1}\ndataDir: data\n")
    url = f"http://127.0.0.1:{port}"
    with serve_subprocess("--port", str(port), "--config", "evalsi.yaml", cwd=tmp_path) as proc:
        proc.wait_healthy(url)
        body = json.dumps(
            {
                "records": [{"id": "1", "output": {"text": "a"}, "reference": {"text": "a"}}],
                "evaluators": [{"ref": "exact-match"}],
            }
        ).encode()
        request = urllib.request.Request(
            url + "/v1alpha1/evaluate", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as r:
            assert json.loads(r.read())["records"] == "1"
    assert proc.returncode == 0, proc.stderr
    assert f"listening on http://127.0.0.1:{port}" in proc.stderr
    assert str((tmp_path / "data" / "evalsi.db").resolve()) in proc.stderr
    assert (tmp_path / "data" / "evalsi.db").exists()
