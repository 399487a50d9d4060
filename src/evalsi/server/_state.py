"""What every handler shares: the validated configuration, the store, the evaluator registry
and the run scheduler. Built once by ``evalsi serve`` (or a test) and passed to each handler."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalsi.auth import AuthSettings
from evalsi.cluster import ClusterConfig
from evalsi.connectors import EgressPolicy
from evalsi.evaluators import DEFAULT_PACKS
from evalsi.sandbox import Level, SandboxConfig
from evalsi.store import ObjectStoreConfig, check_project_id

if TYPE_CHECKING:
    from evalsi.evaluators import Registry
    from evalsi.runs import JudgeSpec
    from evalsi.sinks import OtelScoreExporter
    from evalsi.store import SqlStore

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
DEFAULT_PROJECT = "default"


@dataclass(frozen=True)
class OtlpConfig:
    """`traces.otlp`: where OTLP traces are received besides the main port (which always
    answers ``POST /v1/traces`` and the gRPC ``TraceService/Export``)."""

    # Extra listeners for collectors and SDKs left at their default endpoints; None: off.
    grpc_port: int | None = None  # 4317 by convention
    http_port: int | None = None  # 4318 by convention
    # Export-request bytes (decoded) being ingested at once; above it senders get 429/503 with
    # Retry-After (HTTP) or UNAVAILABLE (gRPC) and retry, so nothing accepted is dropped.
    max_inflight_bytes: int = 256 * 1024 * 1024


@dataclass(frozen=True)
class ScoreExportConfig:
    """`traces.export.otlp`: online policy scores sent on as OpenTelemetry
    ``gen_ai.evaluation.result`` log events (``evalsi.sinks.OtelScoreExporter``)."""

    endpoint: str  # the OTLP/HTTP logs URL, ``.../v1/logs``
    headers: dict[str, str] = field(default_factory=dict)  # e.g. an API key header
    timeout_s: float = 10.0  # per export request

    def exporter(self) -> OtelScoreExporter:
        """The exporter (its batching thread starts now); the caller closes it."""
        from evalsi.sinks import OtelScoreExporter

        return OtelScoreExporter(self.endpoint, headers=self.headers, timeout_s=self.timeout_s)


@dataclass(frozen=True)
class TracesConfig:
    """`traces`: the Watch way in (OTLP ingest, assembly, retention, redaction)."""

    otlp: OtlpConfig = field(default_factory=OtlpConfig)
    # A trace is complete this long after its root span ended (late spans still join it).
    grace_s: float = 5.0
    # Traces, and spans, still being assembled; above either the oldest traces complete early
    # (memory stays bounded whatever senders do).
    max_open_traces: int = 20_000
    max_open_spans: int = 100_000
    # Processes that decode, prepare and store OTLP requests (``server.otlp._ingest_pool``); None:
    # one per CPU (at most 8) when the store is a file or PostgreSQL; 0: on the event loop.
    ingest_workers: int | None = None
    # How long traces and spans are kept, in seconds (None: forever), and per project.
    retention_s: float | None = 7 * 24 * 3600.0
    project_retention_s: dict[str, float | None] = field(default_factory=dict)
    # Regex redaction applied to span attributes and events before anything is stored
    # (``evalsi.traces.RedactionRule``).
    redaction: tuple[Any, ...] = ()
    # Where policy scores are exported besides the store; None: nowhere.
    export: ScoreExportConfig | None = None


@dataclass(frozen=True)
class Limits:
    """`limits`: what one caller may ask of the server. A request over a limit is refused
    with 400 naming it and its key, so one run or call cannot take the machine (trials,
    queued runs and concurrency were unbounded before)."""

    max_trials: int = 1000  # limits.maxTrials: spec.trials of a run
    max_tasks_per_run: int = 1_000_000  # limits.maxTasksPerRun: samples x trials of a run
    max_queued_runs: int = 100  # limits.maxQueuedRuns: runs waiting for a slot
    max_concurrency: int = 256  # limits.maxConcurrency: spec / judge maxConcurrency
    # limits.maxRequestRecords: per Evaluate call or stream message. Above what the official
    # client packs into one message (8 MiB of records, at least 11 bytes each: ~760k).
    max_request_records: int = 1_000_000
    # limits.evaluatorSeconds: one sync evaluator call while grading an Evaluate request;
    # past it the call is stopped and its record is ERROR "timed out after Ns".
    evaluator_seconds: int = 30


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
    # `auth`, `rbac`, `authorization`, `projects`: identity and access (off without `auth:`)
    auth: AuthSettings = field(default_factory=AuthSettings)
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
    # `traces`: OTLP listeners, assembly grace period, retention and redaction.
    traces: TracesConfig = field(default_factory=TracesConfig)
    # `egress`: where the server's own calls may connect (``_egress.server_egress`` adds the
    # listen address and the judges above).
    egress: EgressPolicy = field(default_factory=EgressPolicy)
    # `server.allowedHosts`: names accepted in Host besides the listening address (DNS
    # rebinding guard, ``_web_guard``); "*" accepts any (behind a proxy that checks it).
    allowed_hosts: tuple[str, ...] = ()
    # `server.cors.allowOrigins`: browser origins allowed to call (none by default).
    cors_allow_origins: tuple[str, ...] = ()
    # `limits`: trials, tasks, queued runs, concurrency and records per request.
    limits: Limits = field(default_factory=Limits)
    # `cluster`: a run's tasks queued on NATS JetStream for `evalsi worker` processes (None:
    # every run's tasks run in this server's own process)
    cluster: ClusterConfig | None = None
    # `objectStore`: an S3-compatible bucket for shard payloads, dataset versions and bundles
    # the replicas and workers share (None: none; everything stays on this machine)
    object_store: ObjectStoreConfig | None = None

    def datasets_dir_of(self, project: str) -> Path:
        """Where ``project``'s datasets are: ``datasets_dir`` for ``default`` (as before
        projects), ``data_dir/projects/<project>/datasets`` for another, so that no dataset
        path of one project names a file of another's."""
        if project in ("", DEFAULT_PROJECT):
            return self.datasets_dir
        return self.data_dir / "projects" / check_project_id(project) / "datasets"


@dataclass
class ServerState:
    """Shared by all handlers for the life of the server."""

    config: ServerConfig
    store: SqlStore
    registry: Registry
    # The run scheduler (``_run_manager.RunManager``); None until the app starts it.
    runs: Any = None
    # Identity and access (``evalsi.auth.Access``), built by ``build_app`` from config.auth.
    access: Any = None
    # The Watch way in (``_watch``): the trace store, the ingest pipeline behind the OTLP
    # endpoints, and the online policy engine. Built by ``build_app``.
    trace_store: Any = None
    ingest: Any = None
    policies: Any = None
    watch: Any = None
    _datasets: dict[str, Any] = field(default_factory=dict)
    _append_locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    _objects: list[Any] = field(default_factory=list)  # the ObjectStore, once opened

    def object_store(self) -> Any:
        """The configured ``ObjectStore`` (opened and checked on first use), or None."""
        if not self._objects:
            from evalsi.server._cluster_config import open_object_store

            self._objects.append(open_object_store(self.config.object_store))
        return self._objects[0]

    def dataset_files(self, project: str) -> Any:
        """The ``DatasetFiles`` of ``project`` (one per project: their writers share locks),
        mirrored to the object store when one is configured."""
        key = project or DEFAULT_PROJECT
        if key not in self._datasets:
            from evalsi.server._dataset_files import DatasetFiles

            self._datasets[key] = DatasetFiles(
                self.config.datasets_dir_of(key), objects=self.object_store(), project=key
            )
        return self._datasets[key]

    def dataset_append_lock(self, project: str) -> asyncio.Lock:
        """The lock every read-latest-then-append of ``project``'s datasets holds (promotions
        by ``PromoteRequest`` and by online policies): two appends built on one latest version
        would each drop the other's rows."""
        key = project or DEFAULT_PROJECT
        return self._append_locks.setdefault(key, asyncio.Lock())


def server_registry(config: ServerConfig) -> Registry:
    """The evaluators a server grades with: the built-ins, entry points, and the plugins
    installed in its data dir (``evalsi plugin install`` with ``EVALSI_DATA_DIR`` set to it),
    which ``ListEvaluators`` then lists with their params schemas."""
    from evalsi.packs import builtin_registry
    from evalsi.plugins import add_plugins, registry_file

    registry = builtin_registry()
    if registry_file(config.data_dir).is_file():
        add_plugins(registry, config.data_dir)
    return registry
