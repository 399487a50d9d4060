"""Integration tests run in the process, in a temporary working directory, so a default store
(``.evalsi/evalsi.db`` under the cwd) never lands in the repository. The sink tests share one
MLflow tracking server and one S3 API (moto) per session."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server_state import free_port


@pytest.fixture(autouse=True)
def _in_tmp_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EVALSI_DEBUG", raising=False)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "api.db"


# -- services on loopback shared by the sink tests (one of each per session) -------------------
ROOT = Path(__file__).resolve().parents[2]
MLFLOW = ROOT / ".tools" / "mlflow" / "bin" / "mlflow"


def _wait(url: str, proc: subprocess.Popen[bytes], seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited")
        try:
            urllib.request.urlopen(url, timeout=1).close()
            return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"{url} never answered")


@pytest.fixture(scope="session")
def s3_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("moto_server")), "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait(url, proc)
        yield url
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def mlflow_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not MLFLOW.exists():
        pytest.skip("no MLflow server: python3 -m venv .tools/mlflow && "
                    ".tools/mlflow/bin/pip install mlflow==3.17.2 (.ci/run does)")  # fmt: skip
    work = tmp_path_factory.mktemp("mlflow")
    port = free_port()
    proc = subprocess.Popen(
        [str(MLFLOW), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
         "--backend-store-uri", f"sqlite:///{work}/mlflow.db",
         "--artifacts-destination", str(work / "artifacts")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=work,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        _wait(url + "/health", proc, 180)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
