"""Shared helpers for the end-to-end tests: run the installed ``evalsi`` console script as a
user does, in a temporary working directory, and check the user-facing contracts of
the CLI (JSON alone on stdout, exit codes, one-line errors without a traceback).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

EVALSI = Path(sys.executable).with_name("evalsi")

# Variables that would change what the CLI does or reads, removed from every subprocess.
_SCRUB = (
    "EVALSI_DEBUG", "EVALSI_TOKEN", "EVALSI_API_KEY", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE",
    "HF_HOME", "HF_HUB_OFFLINE",
)  # fmt: skip


def _env(tmp: Path, extra: Mapping[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
    # Never read (or create) the developer's own Hugging Face cache.
    env["HF_HUB_CACHE"] = str(tmp / "no-hf-cache")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # Never read the developer's `evalsi login` tokens: each test has its own config home.
    env["XDG_CONFIG_HOME"] = str(tmp / ".config")
    env.update(extra or {})
    return env


RunCli = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="session")
def run_evalsi() -> Callable[..., subprocess.CompletedProcess[str]]:
    """``run_evalsi(cwd, *args, env=None)``: the console script, captured, as text."""
    assert EVALSI.exists(), f"console script not found next to the interpreter: {EVALSI}"

    def run(
        cwd: Path, *args: Any, env: Mapping[str, str] | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(EVALSI), *map(str, args)],
            cwd=cwd,
            env=_env(Path(cwd), env),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )

    return run


@pytest.fixture
def start_evalsi(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """``start_evalsi(*args, cwd=tmp_path, env=None)``: the console script in the background.

    Any process still running at teardown is killed by its id.
    """
    started: list[subprocess.Popen[str]] = []

    def start(
        *args: Any, cwd: Path | None = None, env: Mapping[str, str] | None = None
    ) -> subprocess.Popen[str]:
        where = cwd or tmp_path
        proc = subprocess.Popen(
            [str(EVALSI), *map(str, args)],
            cwd=where,
            env=_env(Path(where), env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


@pytest.fixture
def cli(tmp_path: Path, run_evalsi: Callable[..., Any]) -> RunCli:
    """``cli(*args, env=None)``: the console script with ``cwd=tmp_path``."""

    def run(*args: Any, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return run_evalsi(tmp_path, *args, **kwargs)  # type: ignore[no-any-return]

    return run


def write_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> Path:
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    return path


@pytest.fixture(name="write_jsonl")
def write_jsonl_fixture() -> Callable[[Path, Iterable[Mapping[str, Any]]], Path]:
    return write_jsonl


def parse_json_stdout(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The whole of stdout must be one JSON object (json.loads rejects anything after it)."""
    assert proc.returncode == 0, f"exit {proc.returncode}\nstderr:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    data = json.loads(proc.stdout)
    assert isinstance(data, dict), f"stdout is JSON but not an object: {type(data).__name__}"
    return data


@pytest.fixture(name="json_out")
def json_out_fixture() -> Callable[[subprocess.CompletedProcess[str]], dict[str, Any]]:
    return parse_json_stdout


def check_user_error(
    proc: subprocess.CompletedProcess[str], *needles: str, stdout_empty: bool = True
) -> str:
    """Exit 2, a short ``error: ...`` message on stderr naming what is wrong, no traceback."""
    err = proc.stderr
    assert proc.returncode == 2, f"exit {proc.returncode}, expected 2\nstderr:\n{err}"
    assert "Traceback" not in err, err
    assert err.startswith("error: "), err
    # One line, plus at most a hint (which may wrap onto one more line).
    assert 1 <= len(err.strip().splitlines()) <= 3, err
    for needle in needles:
        assert needle in err, f"{needle!r} not in stderr:\n{err}"
    if stdout_empty:
        assert proc.stdout == "", f"stdout should stay empty on an error:\n{proc.stdout}"
    return err


@pytest.fixture(name="user_error")
def user_error_fixture() -> Callable[..., str]:
    return check_user_error
