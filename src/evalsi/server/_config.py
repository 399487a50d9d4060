r"""``evalsi.yaml``: the server's configuration, validated into a ``ServerConfig``.

    server:
      host: 127.0.0.1
      port: 8080
      grpcPort: 9090                          # optional: native gRPC (grpcio) on a 2nd port
      maxBodyBytes: 33554432
      maxConcurrentRuns: 4
      allowedHosts: [evalsi.internal]         # Host names besides the listening address
      cors: {allowOrigins: ['https://dash.example']}   # browser origins allowed (none by default)
    limits:                                   # over a limit: 400 naming it (defaults shown)
      maxTrials: 1000                         # spec.trials of a run
      maxTasksPerRun: 1000000                 # samples x trials of a run
      maxQueuedRuns: 100                      # runs waiting for a slot
      maxConcurrency: 256                     # spec and judge maxConcurrency
      maxRequestRecords: 1000000              # records per Evaluate call or stream message
      evaluatorSeconds: 30                    # one evaluator call while grading (then ERROR)
    storage:
      sqlite: {path: .evalsi/evalsi.db}       # or: postgres: {dsn: postgresql://...}
    dataDir: .evalsi
    datasetsDir: .evalsi/datasets
    judges:
      default: {connector: openai-compatible, baseUrl: http://127.0.0.1:8000/v1, model: m}
    allowPythonTargets: false
    secrets:
      allowEnv: [OPENAI_API_KEY]              # env: refs a run spec may use (none by default)
    evaluators:
      packs: [core, text, safety]             # packs that may run implicitly (default: [core])
    sandbox:                                  # where code evaluators run untrusted programs
      drivers: [bwrap, landlock]              # rungs allowed (default: all)
      minIsolation: namespaced                # floor for every sandbox (server default: confined)
      concurrency: 2                          # sandboxes at once (default: CPU count)
    traces:                                   # the Watch way in (OTLP on the main port always)
      otlp: {grpcPort: 4317, httpPort: 4318, maxInflightBytes: 268435456}
      gracePeriod: 5s                         # a trace completes this long after its root ends
      maxOpenTraces: 20000                    # and maxOpenSpans: 100000 (memory bound)
      ingestWorkers: auto                     # processes decoding+storing spans (0: in-process)
      retention: 7d                           # or: {default: 7d, projects: {demo: 1d}}; never
      redaction:                              # regexes applied before anything is stored
        - {name: email, pattern: '[\w.+-]+@[\w-]+\.[\w.]+', replacement: '[EMAIL]'}
      export:                                 # policy scores as gen_ai.evaluation.result events
        otlp:
          endpoint: http://collector:4318     # OTLP/HTTP; /v1/logs added when no path is given
          headers: {x-api-key: env:COLLECTOR_KEY}   # env:NAME reads the server's environment
          timeout: 10s
    egress:                                   # where the server's own calls may connect
      allow: [10.0.0.0/8, 'judge.internal:8000', '[fd00::1]:443']
      deny: ['*:5432']                        # deny wins over allow
      allowPrivate: auto                      # loopback+private allowed only on loopback
    cluster: {nats: 'nats://nats:4222'}       # work queues for `evalsi worker` (_cluster_config)
    objectStore: {bucket: evalsi, endpoint: 'http://minio:9000'}   # shared bytes (ibid.)

Every key is optional. Relative paths start from the file's directory (from the working
directory without a file). Unknown keys and wrong types are a ``SpecError`` naming the field
(``evalsi.yaml: server.port: expected an integer 1-65535, got "x"``). Judges have the same
shape as in a run spec and are validated by the same code.
"""

from __future__ import annotations

import dataclasses
import os
import re
import urllib.parse
from pathlib import Path
from typing import Any

from evalsi.auth import AuthSettings
from evalsi.connectors import EgressPolicy, EgressRule
from evalsi.core import SpecError, UserError, expand_home
from evalsi.evaluators import DEFAULT_PACKS
from evalsi.sandbox import SandboxConfig, SandboxConfigError, parse_config
from evalsi.server._auth_config import auth_settings
from evalsi.server._cluster_config import cluster_section, object_store_section
from evalsi.server._config_checks import (
    Problems,
    as_duration,
    as_int,
    as_mapping,
    as_text,
    as_ttl,
    read_config,
    show,
)
from evalsi.server._state import (
    DEFAULT_HOST,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_PORT,
    Limits,
    OtlpConfig,
    ScoreExportConfig,
    ServerConfig,
    TracesConfig,
)
from evalsi.server._web_guard import is_loopback, normal_origin

_TOP = (
    "server",
    "auth",
    "rbac",
    "authorization",
    "projects",
    "storage",
    "dataDir",
    "datasetsDir",
    "judges",
    "allowPythonTargets",
    "secrets",
    "evaluators",
    "sandbox",
    "traces",
    "limits",
    "egress",
    "cluster",
    "objectStore",
)
_TRACES = (
    "otlp",
    "gracePeriod",
    "maxOpenTraces",
    "maxOpenSpans",
    "ingestWorkers",
    "retention",
    "redaction",
    "export",
)
_EXPORT_OTLP = ("endpoint", "headers", "timeout")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP token (RFC 9110)
_OTLP = ("grpcPort", "httpPort", "maxInflightBytes")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# server.allowedHosts: a DNS name or IPv4 address, or [IPv6], with an optional :port
_HOST_NAME = re.compile(r"(?:[A-Za-z0-9_.-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?")
_SERVER = ("host", "port", "grpcPort", "maxBodyBytes", "maxConcurrentRuns", "allowedHosts", "cors")
_STORAGE = ("sqlite", "postgres")


def load_config(
    path: Path | None,
    *,
    host: str | None = None,
    port: int | None = None,
    grpc_port: int | None = None,
    no_auth: bool = False,
) -> ServerConfig:
    """Read and validate ``path`` (None: defaults only), then apply the command-line flags.

    Raises ``SpecError`` naming each bad field, and ``UserError`` for a non-loopback listen
    address without ``no_auth`` (no authentication exists yet).
    """
    doc: Any = {}
    base = Path.cwd()
    shown = "evalsi.yaml"
    if path is not None:
        shown = str(path)
        doc = read_config(path)
        base = path.resolve().parent
    p = Problems(shown)
    top = as_mapping(p, "", doc, _TOP)
    server = as_mapping(p, "server", top.get("server"), _SERVER)
    cfg_host = as_text(p, "server.host", server.get("host")) or DEFAULT_HOST
    cfg_port = as_int(p, "server", server, "port", 1, 65535, DEFAULT_PORT)
    cfg_grpc = as_int(p, "server", server, "grpcPort", 1, 65535, 0) or None  # absent: none
    max_body = as_int(p, "server", server, "maxBodyBytes", 1024, 1 << 31, DEFAULT_MAX_BODY_BYTES)
    max_runs = as_int(p, "server", server, "maxConcurrentRuns", 1, 1024, 4)

    data_dir = _path(p, base, "dataDir", top.get("dataDir")) or (base / ".evalsi")
    datasets_dir = _path(p, base, "datasetsDir", top.get("datasetsDir")) or (data_dir / "datasets")
    store = _storage(p, base, top.get("storage"), data_dir)
    allow_python = top.get("allowPythonTargets", False)
    if not isinstance(allow_python, bool):
        p.bad("allowPythonTargets", f"expected true or false, got {show(allow_python)}")
        allow_python = False
    judges = _judges(p, base, shown, top.get("judges"))
    allowed_env = _allowed_env(p, top.get("secrets"))
    packs = _packs(p, top.get("evaluators"))
    sandbox = _sandbox(p, top.get("sandbox"))
    traces = _traces(p, top.get("traces"))
    egress = _egress(p, top.get("egress"))
    allowed_hosts, allow_origins = _web(p, server)
    limits = _limits(p, top.get("limits"))
    cluster = cluster_section(p, top.get("cluster"), store)
    object_store = object_store_section(p, top.get("objectStore"))
    auth = auth_settings(p, base, top)
    p.raise_if_any()

    final_host = host if host is not None else cfg_host
    final_port = port if port is not None else cfg_port
    if not 0 <= final_port <= 65535:
        raise UserError(f"--port: expected 0-65535, got {final_port}")
    final_grpc = grpc_port if grpc_port is not None else cfg_grpc
    if final_grpc is not None and not 0 <= final_grpc <= 65535:
        raise UserError(f"--grpc-port: expected 0-65535, got {final_grpc}")
    if final_grpc is not None and final_grpc != 0 and final_grpc == final_port:
        where = "--grpc-port" if grpc_port is not None else "server.grpcPort"
        raise UserError(
            f"{where}: {final_grpc} is also the main port; the native gRPC port must differ",
            hint="gRPC is served on the main port already; the second port is only for speed",
        )
    if no_auth:  # the auth sections stay as written, unenforced (a warning on every start)
        auth = dataclasses.replace(auth, enabled=False)
    if not is_loopback(final_host) and not no_auth:
        _exposed(final_host, auth, shown)
    return ServerConfig(
        host=final_host,
        port=final_port,
        grpc_port=final_grpc,
        no_auth=no_auth,
        data_dir=data_dir,
        datasets_dir=datasets_dir,
        store=store,
        max_body_bytes=max_body,
        max_concurrent_runs=max_runs,
        judges=judges,
        allow_python_targets=allow_python,
        allowed_env_secrets=allowed_env,
        packs=packs,
        sandbox=sandbox,
        traces=traces,
        egress=egress,
        allowed_hosts=allowed_hosts,
        cors_allow_origins=allow_origins,
        limits=limits,
        auth=auth,
        cluster=cluster,
        object_store=object_store,
    )


def _exposed(host: str, auth: AuthSettings, shown: str) -> None:
    """Refuse a non-loopback address without authentication, and bearer credentials over
    plaintext unless ``auth.allowPlaintext`` says TLS ends in front of the server."""
    if not auth.enabled:
        raise UserError(
            f"refusing to listen on {host}: only loopback addresses (127.0.0.1, ::1, "
            f"localhost) are allowed without authentication ({shown} has no auth: section)",
            hint="configure auth: (OIDC providers or API keys; docs/guides/identity.md), or "
            "pass --no-auth to expose the server anyway (anyone who can reach the port can "
            "run evaluations and read results)",
        )
    if auth.tls is None and not auth.allow_plaintext:
        raise UserError(
            f"refusing to listen on {host} without TLS: bearer tokens and API keys would "
            "cross the network in plaintext",
            hint="set auth.tls (certFile, keyFile), or auth.allowPlaintext: true when TLS "
            "ends in a proxy in front of evalsi serve",
        )


def _web(p: Problems, server: dict[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``server.allowedHosts`` (names, ``name:port`` or ``*``) and ``server.cors.allowOrigins``
    (``scheme://host[:port]``), for ``_web_guard``."""
    hosts: list[str] = []
    raw_hosts = _list(p, "server.allowedHosts", server.get("allowedHosts"), "host names")
    for i, name in enumerate(raw_hosts):
        if name == "*" or (isinstance(name, str) and _HOST_NAME.fullmatch(name)):
            hosts.append(name.lower().rstrip("."))
        else:
            p.bad(
                f"server.allowedHosts[{i}]",
                f"expected a host name, name:port, [ipv6] or *, got {show(name)}",
            )
    cors = as_mapping(p, "server.cors", server.get("cors"), ("allowOrigins",))
    origins: list[str] = []
    raw_origins = _list(p, "server.cors.allowOrigins", cors.get("allowOrigins"), "origins")
    for i, value in enumerate(raw_origins):
        origin = normal_origin(value) if isinstance(value, str) else None
        if origin is None:
            p.bad(
                f"server.cors.allowOrigins[{i}]",
                f"expected an origin such as https://app.example:8443, got {show(value)}",
            )
        else:
            origins.append(origin)
    return tuple(hosts), tuple(origins)


_LIMITS = {  # key: (field, smallest, largest)
    "maxTrials": ("max_trials", 1, 1_000_000),
    "maxTasksPerRun": ("max_tasks_per_run", 1, 1 << 40),
    "maxQueuedRuns": ("max_queued_runs", 0, 1_000_000),
    "maxConcurrency": ("max_concurrency", 1, 1_000_000),
    "maxRequestRecords": ("max_request_records", 1, 100_000_000),
    "evaluatorSeconds": ("evaluator_seconds", 1, 86_400),
}


def _list(p: Problems, at: str, value: Any, what: str) -> list[Any]:
    """``value`` as a list (absent or empty: ``[]``); anything else is reported, read as ``[]``."""
    if not isinstance(value or [], list):
        p.bad(at, f"expected a list of {what}, got {show(value)}")
        return []
    return value or []


def _limits(p: Problems, value: Any) -> Limits:
    """``limits: {maxTrials, maxTasksPerRun, maxQueuedRuns, maxConcurrency,
    maxRequestRecords, evaluatorSeconds}``; each absent key keeps its default."""
    section = as_mapping(p, "limits", value, tuple(_LIMITS))
    default = Limits()
    chosen = {
        name: as_int(p, "limits", section, key, lo, hi, getattr(default, name))
        for key, (name, lo, hi) in _LIMITS.items()
    }
    return Limits(**chosen)


def _egress(p: Problems, value: Any) -> EgressPolicy:
    """``egress: {allow, deny, allowPrivate}``: where the server's own calls (targets, judges,
    webhooks) may connect; the rules are ``evalsi.connectors.EgressPolicy``'s. The listen
    address is filled in by the server (``allowPrivate: auto`` follows it)."""
    section = as_mapping(p, "egress", value, ("allow", "deny", "allowPrivate"))
    lists: dict[str, list[EgressRule]] = {"allow": [], "deny": []}
    for key, rules in lists.items():
        raw = _list(p, f"egress.{key}", section.get(key), "addresses, ranges, hosts")
        for i, entry in enumerate(raw):
            try:
                if not isinstance(entry, str):
                    raise ValueError(f"expected a string such as 10.0.0.0/8, got {show(entry)}")
                rules.append(EgressRule.parse(entry, f"egress.{key}[{i}]"))
            except ValueError as e:
                p.bad(f"egress.{key}[{i}]", str(e))
    raw_private = section.get("allowPrivate", "auto")
    allow_private = raw_private if isinstance(raw_private, bool) else None
    if raw_private not in ("auto", None) and not isinstance(raw_private, bool):
        p.bad("egress.allowPrivate", f"expected auto, true or false, got {show(raw_private)}")
    return EgressPolicy(tuple(lists["allow"]), tuple(lists["deny"]), allow_private)


def load_sandbox_config(path: Path) -> SandboxConfig:
    """Only the ``sandbox`` section of ``path``, for embedded commands (no server floor: a
    spec's own ``min_isolation`` stands unless the file sets ``minIsolation``)."""
    doc = read_config(path)
    if doc is not None and not isinstance(doc, dict):
        raise SpecError(f"{path}: expected a mapping at the top, got {show(doc)}")
    try:
        return parse_config((doc or {}).get("sandbox"))
    except SandboxConfigError as e:
        raise SpecError("\n".join(f"{path}: {where}: {why}" for where, why in e.problems)) from e


SERVER_FLOOR = "confined"
"""A server never runs a program unconfined unless its evalsi.yaml says ``minIsolation: none``."""


def _sandbox(p: Problems, value: Any) -> SandboxConfig:
    """``sandbox: {drivers, minIsolation, concurrency, firecracker}`` (see evalsi.sandbox)."""
    if isinstance(value, dict) and "minIsolation" not in value:
        value = {**value, "minIsolation": SERVER_FLOOR}
    elif value is None:
        value = {"minIsolation": SERVER_FLOOR}
    try:
        return parse_config(value)
    except SandboxConfigError as e:
        for where, why in e.problems:
            p.bad(where, why)
        return SandboxConfig()


def _traces(p: Problems, value: Any) -> TracesConfig:
    """``traces: {otlp, gracePeriod, maxOpenTraces, retention, redaction, export}``."""
    from evalsi.traces import parse_rules

    top = as_mapping(p, "traces", value, _TRACES)
    otlp = as_mapping(p, "traces.otlp", top.get("otlp"), _OTLP)
    ports = {
        key: None if otlp.get(key) is None else as_int(p, "traces.otlp", otlp, key, 0, 65535, 0)
        for key in ("grpcPort", "httpPort")
    }
    most = OtlpConfig.max_inflight_bytes
    inflight = as_int(p, "traces.otlp", otlp, "maxInflightBytes", 1 << 20, 1 << 36, most)
    grace = as_duration(p, "traces.gracePeriod", top.get("gracePeriod"), TracesConfig.grace_s)
    max_open = as_int(p, "traces", top, "maxOpenTraces", 1, 10**7, TracesConfig.max_open_traces)
    max_spans = as_int(p, "traces", top, "maxOpenSpans", 100, 10**8, TracesConfig.max_open_spans)
    raw_workers = top.get("ingestWorkers", "auto")
    workers: int | None = None
    if raw_workers != "auto":
        ok = isinstance(raw_workers, int) and not isinstance(raw_workers, bool)
        if ok and 0 <= raw_workers <= 64:
            workers = raw_workers
        else:
            got = show(raw_workers)
            p.bad("traces.ingestWorkers", f"expected auto or an integer 0-64, got {got}")
    retention: float | None = TracesConfig.retention_s
    projects: dict[str, float | None] = {}
    raw_retention = top.get("retention")
    if isinstance(raw_retention, dict):
        section = as_mapping(p, "traces.retention", raw_retention, ("default", "projects"))
        if "default" in section:
            retention = as_ttl(p, "traces.retention.default", section["default"])
        named = section.get("projects") or {}
        if not isinstance(named, dict):
            p.bad("traces.retention.projects", f"expected a mapping, got {show(named)}")
            named = {}
        for name, ttl in named.items():
            projects[str(name)] = as_ttl(p, f"traces.retention.projects.{name}", ttl)
    elif raw_retention is not None:
        retention = as_ttl(p, "traces.retention", raw_retention)
    try:
        redaction = parse_rules(top.get("redaction"), "traces.redaction")
    except UserError as e:
        p.bad("", e.message)
        redaction = ()
    return TracesConfig(
        otlp=OtlpConfig(ports["grpcPort"], ports["httpPort"], inflight),
        grace_s=grace,
        max_open_traces=max_open,
        max_open_spans=max_spans,
        ingest_workers=workers,
        retention_s=retention,
        project_retention_s=projects,
        redaction=redaction,
        export=_export(p, top.get("export")),
    )


def _export(p: Problems, value: Any) -> ScoreExportConfig | None:
    """``traces.export: {otlp: {endpoint, headers, timeout}}``; None when absent."""
    section = as_mapping(p, "traces.export", value, ("otlp",))
    if section.get("otlp") is None:
        return None
    at = "traces.export.otlp"
    otlp = as_mapping(p, at, section["otlp"], _EXPORT_OTLP)
    endpoint = _endpoint(p, f"{at}.endpoint", otlp.get("endpoint"))
    headers: dict[str, str] = {}
    raw_headers = otlp.get("headers")
    if raw_headers is not None and not isinstance(raw_headers, dict):
        p.bad(
            f"{at}.headers",
            f"expected a mapping of header names to values, got {show(raw_headers)}",
        )
        raw_headers = None
    for name, raw in (raw_headers or {}).items():
        where = f"{at}.headers.{name}"
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
            p.bad(where, "expected an HTTP header name (letters, digits, -)")
            continue
        if not isinstance(raw, str):
            p.bad(where, f"expected a string (quote numbers), got {show(raw)}")
            continue
        if raw.startswith("env:"):
            var = raw.removeprefix("env:")
            if not _ENV_NAME.fullmatch(var) or var not in os.environ:
                p.bad(where, f"environment variable {var!r} is not set")
                continue
            raw = os.environ[var]
        if "\n" in raw or "\r" in raw:
            p.bad(where, "expected a single-line value")
            continue
        headers[name] = raw
    timeout = as_duration(p, f"{at}.timeout", otlp.get("timeout"), ScoreExportConfig.timeout_s)
    if timeout <= 0:
        p.bad(f"{at}.timeout", "expected a positive duration such as 10s")
    if endpoint is None:
        return None
    return ScoreExportConfig(endpoint=endpoint, headers=headers, timeout_s=timeout)


def _endpoint(p: Problems, at: str, value: Any) -> str | None:
    """An http(s) URL; ``/v1/logs`` is added when it has no path (a collector's base URL)."""
    if value is None:
        p.bad(at, "required: the collector's OTLP/HTTP URL, e.g. http://collector:4318")
        return None
    url = urllib.parse.urlsplit(value) if isinstance(value, str) else None
    if url is None or url.scheme not in ("http", "https") or not url.hostname:
        p.bad(at, f"expected an http(s) URL such as http://collector:4318, got {show(value)}")
        return None
    try:
        url.port  # noqa: B018 (parses it)
    except ValueError:
        p.bad(at, f"expected a port 1-65535, got {show(value)}")
        return None
    if url.path in ("", "/"):
        url = url._replace(path="/v1/logs")
    return urllib.parse.urlunsplit(url)


def _packs(p: Problems, value: Any) -> tuple[str, ...]:
    """``evaluators: {packs: [core, ...]}``: the packs turned on; each must exist here."""
    if value is None:
        return DEFAULT_PACKS
    if not isinstance(value, dict):
        p.bad("evaluators", f"expected a mapping with packs, got {show(value)}")
        return DEFAULT_PACKS
    for key in value:
        if key != "packs":
            p.bad(f"evaluators.{key}", "unknown key (expected packs)")
    names = value.get("packs", list(DEFAULT_PACKS))
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        p.bad("evaluators.packs", f"expected a list of pack names, got {show(names)}")
        return DEFAULT_PACKS
    from evalsi.evaluators import pack_of
    from evalsi.packs import BUILTIN_PACKS, builtin_registry

    known = [*BUILTIN_PACKS, *sorted({pack_of(ev) for ev in builtin_registry()} - {*BUILTIN_PACKS})]
    for i, name in enumerate(names):
        if name not in known:
            p.bad(
                f"evaluators.packs[{i}]", f"unknown pack {show(name)} (known: {', '.join(known)})"
            )
    return tuple(dict.fromkeys(names))


def _allowed_env(p: Problems, value: Any) -> tuple[str, ...]:
    """``secrets: {allowEnv: [NAME, ...]}``: the variables run specs may reference."""
    if value is None:
        return ()
    if not isinstance(value, dict):
        p.bad("secrets", f"expected a mapping with allowEnv, got {show(value)}")
        return ()
    for key in value:
        if key != "allowEnv":
            p.bad(f"secrets.{key}", "unknown key (expected allowEnv)")
    names = value.get("allowEnv", [])
    if not isinstance(names, list):
        p.bad("secrets.allowEnv", f"expected a list of variable names, got {show(names)}")
        return ()
    out: list[str] = []
    for i, name in enumerate(names):
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
            p.bad(f"secrets.allowEnv[{i}]", f"expected a variable name, got {show(name)}")
        else:
            out.append(name)
    return tuple(out)


def _path(p: Problems, base: Path, at: str, value: Any) -> Path | None:
    text = as_text(p, at, value)
    return (base / expand_home(text)).resolve() if text else None


def _storage(p: Problems, base: Path, value: Any, data_dir: Path) -> str:
    default = str(data_dir / "evalsi.db")
    storage = as_mapping(p, "storage", value, _STORAGE)
    if len(storage) > 1:
        p.bad("storage", "set one of sqlite or postgres, not both")
        return default
    if "sqlite" in storage:
        sqlite = as_mapping(p, "storage.sqlite", storage["sqlite"], ("path",))
        path = _path(p, base, "storage.sqlite.path", sqlite.get("path"))
        return str(path) if path else default
    if "postgres" in storage:
        pg = as_mapping(p, "storage.postgres", storage["postgres"], ("dsn",))
        dsn = as_text(p, "storage.postgres.dsn", pg.get("dsn"))
        if dsn is None:
            if "dsn" not in pg:
                p.bad("storage.postgres", "missing required field 'dsn'")
            return default
        if not dsn.startswith(("postgresql://", "postgresql+psycopg://")):
            # The value is not echoed: it may hold a password.
            p.bad("storage.postgres.dsn", "expected a postgresql:// URL")
        return dsn
    return default


def _judges(p: Problems, base: Path, shown: str, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        p.bad("judges", f"expected a mapping of name to judge, got {show(value)}")
        return {}
    from evalsi.runs import run_spec_from_dict

    # The judge shape is a run spec's: validate through the same loader, inside a stand-in spec.
    doc = {
        "apiVersion": "evals.si/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "evalsi-yaml"},
        "spec": {
            "target": {
                "model": {"connector": "openai-compatible", "baseUrl": "http://x/v1", "model": "x"}
            },
            "dataset": {"path": "hf://evalsi/none"},
            "evaluators": [{"ref": "exact-match"}],
            "judges": value,
        },
    }
    try:
        return dict(run_spec_from_dict(doc, source=shown, base_dir=base).judges)
    except SpecError as e:
        for line in str(e).splitlines():
            text = line.removeprefix(f"{shown}: ").replace("spec.judges", "judges", 1)
            at, sep, message = text.partition(": ")
            if sep and at.startswith("judges"):
                p.bad(at, message)
            else:
                p.bad("judges", text)
        return {}
