"""What every handler shares: the validated configuration, the store, the evaluator registry
and the run scheduler. Built once by ``evalsi serve`` (or a test) and passed to each handler."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalsi.evaluators import DEFAULT_PACKS
from evalsi.sandbox import Level, SandboxConfig

if TYPE_CHECKING:
    from evalsi.evaluators import Registry
    from evalsi.runs import JudgeSpec
    from evalsi.store import SqlStore

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
DEFAULT_PROJECT = "default"


@dataclass(frozen=True)
class ServerConfig:
    """`evalsi.yaml` after validation (``_config.load_config``); every path is absolute.

    ``store`` is a SQLite path or a ``postgresql://`` URL (``storage.postgres.dsn``).
    ``datasets_dir`` confines every dataset path a request names.
    """

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    # A second port answering gRPC through grpcio's native server (faster than gRPC on
    # ``port``); None: off, every protocol on ``port`` only. 0 picks a free port.
    grpc_port: int | None = None
    no_auth: bool = False
    data_dir: Path = field(default_factory=lambda: Path(".evalsi").resolve())
    datasets_dir: Path = field(default_factory=lambda: Path(".evalsi/datasets").resolve())
    store: str = field(default_factory=lambda: str(Path(".evalsi/evalsi.db").resolve()))
    # Requests larger than this are refused with 413 / RESOURCE_EXHAUSTED.
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    # Runs executing at once; more wait in the scheduler's queue.
    max_concurrent_runs: int = 4
    # Judges available to Evaluate calls and to runs whose spec names none.
    judges: dict[str, JudgeSpec] = field(default_factory=dict)
    # Whether run specs may name `kind: python` targets (code on the server's disk).
    allow_python_targets: bool = False
    # Environment variables run specs may name as `secretRef: env:NAME` (none by default).
    allowed_env_secrets: tuple[str, ...] = ()
    # `evaluators.packs`: the packs that may run implicitly (online policies); core by default.
    packs: tuple[str, ...] = DEFAULT_PACKS
    # `sandbox`: the rungs, floor and concurrency for code evaluators (server floor: confined).
    sandbox: SandboxConfig = field(
        default_factory=lambda: SandboxConfig(min_isolation=Level.CONFINED)
    )


@dataclass
class ServerState:
    """Shared by all handlers for the life of the server."""

    config: ServerConfig
    store: SqlStore
    registry: Registry
    # The run scheduler (``_run_manager.RunManager``); None until the app starts it.
    runs: Any = None
