"""Arize Phoenix as the peer of the OTLP ingest benchmark: install, start, feed, count, stop.

    python bench/_phoenix.py --spans 3000          # measure Phoenix alone, print JSON

Phoenix (``arize-phoenix`` from PyPI, ~850 MB with its dependencies) goes into its own venv
OUTSIDE the repository (``~/.cache/evalsi-bench/phoenix-venv``, or ``$EVALSI_BENCH_CACHE``),
never into evalsi's environment; a stamp file skips the install when the pinned version is
already there. ``phoenix serve`` runs on loopback with a temporary working directory (its
default SQLite store, ``phoenix.db``) and telemetry off. The same pre-encoded stream is sent to
its OTLP endpoint (HTTP ``/v1/traces`` on its main port, or gRPC on its gRPC port), and spans
are counted as STORED: rows in its ``spans`` table, read-only, until all are in or the time
runs out. Phoenix writes spans in the background, so what its OTLP endpoint accepts says
little; the rows are the measure.

When Phoenix does not install or start, ``PhoenixResult.ok`` is False with the reason, and the
caller reports no ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from _otlp_replay import (
    RssWatch,
    free_port,
    send,
    stop_process,
    wait_listening,
    wait_rows,
)

PHOENIX_VERSION = "20.26.1"  # verified here: installs in ~60 s, starts in ~10 s
CACHE = Path(os.environ.get("EVALSI_BENCH_CACHE", Path.home() / ".cache" / "evalsi-bench"))
VENV = CACHE / "phoenix-venv"
START_TIMEOUT_S = 120.0


class PhoenixUnavailable(Exception):
    """Phoenix could not be installed or started here; the message says why."""


@dataclass(slots=True)
class PhoenixResult:
    ok: bool
    reason: str = ""
    version: str = ""
    protocol: str = "http"
    install_seconds: float = 0.0  # 0 when the cached venv was reused
    start_seconds: float = 0.0
    spans_sent: int = 0
    spans_stored: int = 0
    seconds: float = 0.0  # first send to the last span visible in its store
    spans_per_s: float = 0.0
    complete: bool = False  # every span stored before the timeout
    peak_rss_mb: float = 0.0
    send: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _python(venv: Path) -> Path:
    return venv / "bin" / "python"


def installed_version(venv: Path = VENV) -> str | None:
    """The arize-phoenix version in ``venv``, or None."""
    if not _python(venv).exists():
        return None
    probe = subprocess.run(
        [
            str(_python(venv)),
            "-c",
            "import importlib.metadata as m; print(m.version('arize-phoenix'))",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        return None
    return probe.stdout.strip() or None


def ensure_phoenix(
    venv: Path = VENV, version: str = PHOENIX_VERSION, *, install: bool = True
) -> tuple[str, float]:
    """(installed version, seconds spent installing): reuses ``venv`` when it already holds
    ``version``. Raises ``PhoenixUnavailable`` when it is missing and cannot be installed."""
    have = installed_version(venv)
    if have == version:
        return have, 0.0
    if not install:
        raise PhoenixUnavailable(f"arize-phoenix {version} is not installed in {venv}")
    started = time.monotonic()
    print(f"installing arize-phoenix {version} into {venv} (~1 min)...", file=sys.stderr)
    venv.parent.mkdir(parents=True, exist_ok=True)
    steps = [
        [sys.executable, "-m", "venv", "--clear", str(venv)],
        [
            str(_python(venv)),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            f"arize-phoenix=={version}",
        ],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
            raise PhoenixUnavailable(f"`{' '.join(step[:4])} ...` failed: {tail}")
    have = installed_version(venv)
    if have != version:
        raise PhoenixUnavailable(f"installed, but arize-phoenix reports version {have!r}")
    return have, time.monotonic() - started


class PhoenixServer:
    """``phoenix serve`` on loopback with a temporary working directory, as a context manager."""

    def __init__(self, venv: Path = VENV, workdir: Path | None = None) -> None:
        self.venv = venv
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if workdir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="phoenix-bench-")
            workdir = Path(self._tmp.name)
        self.workdir = workdir
        self.port = free_port()
        self.grpc_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.start_seconds = 0.0
        self.log = self.workdir / "phoenix-serve.log"

    @property
    def db(self) -> Path:
        return self.workdir / "phoenix.db"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/traces"

    @property
    def grpc_target(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def __enter__(self) -> PhoenixServer:
        env = {
            **os.environ,
            "PHOENIX_WORKING_DIR": str(self.workdir),
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": str(self.port),
            "PHOENIX_GRPC_PORT": str(self.grpc_port),
            "PHOENIX_TELEMETRY_ENABLED": "false",
            "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
        }
        started = time.monotonic()
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [str(self.venv / "bin" / "phoenix"), "serve"],
                env=env,
                cwd=self.workdir,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        try:
            wait_listening([self.port, self.grpc_port], self.proc, START_TIMEOUT_S)
            self._wait_healthy(started + START_TIMEOUT_S)
        except (RuntimeError, OSError) as e:
            self.__exit__()
            tail = self.log.read_text(errors="replace").strip().splitlines()[-8:]
            raise PhoenixUnavailable(f"phoenix serve did not start: {e}\n" + "\n".join(tail)) from e
        self.start_seconds = time.monotonic() - started
        return self

    def _wait_healthy(self, deadline: float) -> None:
        import urllib.error
        import urllib.request

        url = f"http://127.0.0.1:{self.port}/healthz"
        while True:
            try:
                with urllib.request.urlopen(url, timeout=2) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} not healthy after {START_TIMEOUT_S:g} s")
            time.sleep(0.2)

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None
        if self._tmp is not None:
            self._tmp.cleanup()


def run_phoenix(
    bodies: list[bytes],
    span_counts: list[int],
    *,
    protocol: str = "http",
    concurrency: int = 4,
    timeout_s: float = 600.0,
    venv: Path = VENV,
    install: bool = True,
) -> PhoenixResult:
    """Send the stream to a fresh Phoenix and time it until every span is in its store."""
    want = sum(span_counts)
    try:
        version, install_s = ensure_phoenix(venv, install=install)
    except PhoenixUnavailable as e:
        return PhoenixResult(ok=False, reason=f"not installed: {e}")
    result = PhoenixResult(ok=False, version=version, protocol=protocol, spans_sent=want)
    result.install_seconds = round(install_s, 1)
    try:
        with PhoenixServer(venv) as server:
            assert server.proc is not None
            result.start_seconds = round(server.start_seconds, 1)
            endpoint = server.http_url if protocol == "http" else server.grpc_target
            with RssWatch(server.proc.pid) as rss:
                started = time.monotonic()
                sent = send(protocol, endpoint, bodies, span_counts, concurrency=concurrency)
                left = max(1.0, timeout_s - (time.monotonic() - started))
                rows, seen = wait_rows(
                    server.db, "spans", want, timeout_s=left, poll_s=0.25, alive=server.proc
                )
            result.send = sent.as_dict()
            result.peak_rss_mb = round(rss.peak_mb, 1)
    except PhoenixUnavailable as e:
        result.reason = str(e)
        return result
    result.spans_stored = rows
    result.seconds = round(seen - started, 3)
    result.spans_per_s = round(rows / max(seen - started, 1e-9), 1)
    result.complete = rows >= want
    result.ok = rows > 0
    if not result.complete:
        result.reason = f"only {rows} of {want} spans stored within {timeout_s:g} s"
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=3000, help="spans to send (default 3000)")
    parser.add_argument("--spans-per-request", type=int, default=512)
    parser.add_argument("--protocol", choices=("http", "grpc"), default="http")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for rows")
    parser.add_argument("--no-install", action="store_true", help="use the cached venv only")
    args = parser.parse_args()
    from _otlp_stream import StreamSpec, build_stream

    stream = build_stream(StreamSpec(spans=args.spans, spans_per_request=args.spans_per_request))
    result = run_phoenix(
        stream.requests,
        stream.span_counts,
        protocol=args.protocol,
        timeout_s=args.timeout,
        install=not args.no_install,
    )
    print(json.dumps(result.as_dict(), indent=2))
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
