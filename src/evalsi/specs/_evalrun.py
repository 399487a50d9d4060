"""The in-process form of an ``EvalRun`` spec: what to call, on what data, graded how.

``load_run_spec`` (``runs/_spec_load.py``) builds it from YAML, checked against the JSON Schema
generated from ``proto/evalsi/v1alpha1/run.proto``; tests and the Python API may build it
directly. Paths are already resolved (relative to the spec file) when a ``RunSpec`` exists.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from evalsi.core import content_hash
from evalsi.specs._agent_kinds import (
    A2aAgentSpec,
    AgentKind,
    CliAgentSpec,
    GitWorkspaceSpec,
    HttpAgentSpec,
    McpAgentSpec,
    ResponsesAgentSpec,
    UserSimulatorSpec,
)
from evalsi.specs._declaration import CasePolicy, Declaration, Threshold

TargetKind = Literal["model", "python", "http", "agent"]


@dataclass(frozen=True, slots=True)
class TargetSpec:
    """The system under test.

    ``kind="model"``: ``connector`` is one of ``connectors.MODEL_CONNECTORS``
    (``openai-compatible``, ``anthropic``, ``azure-openai``, ``gemini``, ``bedrock``), with
    ``base_url``, ``model``, ``params`` (temperature, max_tokens...), ``secret_ref``
    (``env:NAME`` or ``file:PATH``), a provider's ``api_version`` (Azure, Gemini) and
    ``region`` (Bedrock), and ``auth`` (``bearer``: the secret is an access token).
    ``kind="python"``: ``python`` is ``module:function``. ``kind="http"``: ``http`` holds
    ``url``, ``method``, ``body`` (JSON with ``{{input}}`` placeholders), ``output`` (a
    JSONPath into the response) and ``headers``. ``template`` (Jinja2, over the sample's
    ``input`` and ``metadata``) and ``system`` shape the prompt for model targets.
    """

    kind: TargetKind
    connector: str = ""
    base_url: str = ""
    model: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    secret_ref: str = ""
    python: str = ""
    http: dict[str, Any] = field(default_factory=dict)
    template: str = ""
    system: str = ""
    timeout_s: float = 60.0
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    agent: AgentSpec | None = None
    api_version: str = ""
    region: str = ""
    auth: str = ""  # "" / "api-key": the connector's key header; "bearer": an access token


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """The built-in agent's budgets (its model is the ``TargetSpec``'s model fields):
    model turns, and per task tokens, US dollars and wall-clock seconds (``None``: no limit);
    or, with ``harness``, another harness that runs the agent."""

    max_steps: int = 10
    max_tokens: int | None = None
    max_usd: float | None = None
    max_seconds: float | None = None
    harness: HarnessSpec | None = None
    kind: AgentKind = "builtin"
    a2a: A2aAgentSpec | None = None
    mcp: McpAgentSpec | None = None
    responses: ResponsesAgentSpec | None = None
    http: HttpAgentSpec | None = None
    cli: CliAgentSpec | None = None
    record_cassette: bool = True
    user: UserSimulatorSpec | None = None


@dataclass(frozen=True, slots=True)
class HarnessSpec:
    """A harness other than the built-in loop: a Python class (``python``: ``module:Class``),
    a process already serving the protocol (``grpc``: ``unix:/path`` or ``127.0.0.1:PORT``),
    or a process evalsi starts (``argv``, ``env``, ``start_timeout_s``, in ``cwd``: the spec
    file's directory)."""

    python: str = ""
    grpc: str = ""
    argv: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    start_timeout_s: float = 30.0
    cwd: str = ""


@dataclass(frozen=True, slots=True)
class ToolDeclarationSpec:
    """What the harness declares of a tool; ``None`` fields keep the tool's default."""

    permission: str | None = None
    data_class: str | None = None
    reversible: bool | None = None
    exposure: str | None = None


@dataclass(frozen=True, slots=True)
class ToolEntrySpec:
    """One function tool (``function``: ``module:function``) or one MCP server (``command`` or
    ``url``), with what the harness declares of its tools, by tool name."""

    function: str = ""
    command: tuple[str, ...] = ()
    url: str = ""
    env: dict[str, str] = field(default_factory=dict)
    declared: dict[str, ToolDeclarationSpec] = field(default_factory=dict)
    sandbox: tuple[str, ...] = ()  # sandbox tools: exec, read_file, write_file


MAX_FIXTURE_FILES = 1000


def fixture_problem(value: Any) -> str:
    """What is wrong with a fixtures value (``{files: {PATH: content}}``, PATH relative to the
    workspace, without ``..``), or ``""``; shared by the spec and each sample's ``fixtures``."""
    if (
        not isinstance(value, dict)
        or set(value) != {"files"}
        or not isinstance(value["files"], dict)
    ):
        return (
            "expected {files: {PATH: content}} (a string is written as text, anything else as JSON)"
        )
    files = value["files"]
    if len(files) > MAX_FIXTURE_FILES:
        return f"at most {MAX_FIXTURE_FILES} files, got {len(files)}"
    for path in files:
        problem = path_problem(path)
        if problem:
            return f"file {path!r}: {problem}"
        parts = path.split("/")
        for i in range(1, len(parts)):  # a file where another needs a directory
            parent = "/".join(parts[:i])
            if parent in files:
                return f"file {parent!r} is also a directory of {path!r}"
    return ""


def path_problem(path: Any) -> str:
    """What keeps ``path`` from naming a file inside the workspace (``""``: nothing)."""
    if not isinstance(path, str):
        return "expected a string path"
    parts = path.split("/")
    if not path or path.startswith("/") or "\0" in path or any(p in ("", ".", "..") for p in parts):
        return "expected a relative path without '.', '..' or empty parts"
    if any(len(p.encode()) > 255 for p in parts):
        return "a name in the path is over 255 bytes"
    return ""


@dataclass(frozen=True, slots=True)
class SandboxSettingsSpec:
    """The task sandbox's settings (``spec.environment.sandbox``)."""

    min_isolation: str = "namespaced"
    network: str = "deny"
    timeout_s: float = 30.0
    memory_mb: int | None = None


@dataclass(frozen=True, slots=True)
class CheckerSpec:
    """One check of the end state: ``kind`` ``exit_code`` (``command``, ``expect``),
    ``json_file`` (``path``, ``expect`` or ``expect_from``) or ``python`` (``function``)."""

    kind: Literal["exit_code", "json_file", "python"]
    name: str
    command: tuple[str, ...] = ()
    expect: Any = None
    expect_from: str = ""
    path: str = ""
    function: str = ""


@dataclass(frozen=True, slots=True)
class EnvironmentSpec:
    """``spec.environment``: tools, policy, approvals, faults and injections, the task's
    sandbox, fixtures (files by path) and checkers, as plain data (``evalsi.agents`` builds the
    environment from it)."""

    tools: tuple[ToolEntrySpec, ...]
    allow: frozenset[str] = frozenset()
    deny: frozenset[str] = frozenset()
    allow_destructive: bool = False
    read_only: bool = False
    default: str = "allow"
    approvals_mode: str = "deny"
    approved: frozenset[str] = frozenset()
    faults: tuple[dict[str, Any], ...] = ()  # {tool, kind, call?, latency_ms, message}
    injections: tuple[dict[str, Any], ...] = ()  # {tool, payload, call?}
    tool_timeout_s: float = 30.0
    sandbox: SandboxSettingsSpec | None = None
    fixtures: dict[str, Any] = field(default_factory=dict)  # {path: text or JSON}
    checkers: tuple[CheckerSpec, ...] = ()
    repository: GitWorkspaceSpec | None = None

    def identity(self) -> dict[str, Any]:
        """Every field as JSON-able data in a fixed order (for the spec hash)."""
        out: dict[str, Any] = _plain(self)
        return out

    def has_workspace(self) -> bool:
        """Whether each task gets a sandbox and its workspace."""
        return bool(
            self.sandbox is not None
            or self.fixtures
            or self.checkers
            or self.repository is not None
            or any(t.sandbox for t in self.tools)
        )


@dataclass(frozen=True, slots=True)
class DatasetSpec:
    """Where the samples are (a resolved path or ``hf://`` URI) and which fields hold what."""

    source: str
    fields: dict[str, str | None] = field(default_factory=dict)
    limit: int | None = None


@dataclass(frozen=True, slots=True)
class EvaluatorEntry:
    """One evaluator of the run: a reference, its params, and an optional instance name."""

    ref: str
    params: dict[str, Any] = field(default_factory=dict)
    name: str = ""

    def as_mapping(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ref": self.ref, "params": dict(self.params)}
        if self.name:
            out["name"] = self.name
        return out


@dataclass(frozen=True, slots=True)
class BudgetSpec:
    """Limits after which a run stops cleanly (reported as such, resumable)."""

    tokens: int | None = None
    usd: float | None = None
    wall_clock_s: float | None = None


OtlpProtocol = Literal["http/protobuf", "grpc"]


@dataclass(frozen=True, slots=True)
class TelemetrySpec:
    """Where a run sends a span per step of each task (``spec.telemetry.otlp``): an OTLP
    ``endpoint`` (``http/protobuf``: a base URL gets ``/v1/traces`` appended), ``headers``
    (values may be ``secret:env:NAME`` / ``secret:file:PATH``, read when the run starts), and
    the seconds one export may take."""

    endpoint: str
    headers: dict[str, str] = field(default_factory=dict)
    protocol: OtlpProtocol = "http/protobuf"
    timeout_s: float = 10.0


SinkKind = Literal["mlflow", "s3", "webhook", "wandb", "langfuse", "langsmith"]


@dataclass(frozen=True, slots=True)
class SinkSpec:
    """One place a run's results go besides the store (``spec.sinks[i]``): its ``kind`` and
    its section's keys as written (camelCase), secrets by reference."""

    kind: SinkKind
    options: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        """Where it sends, for messages: ``mlflow http://…``, ``s3 bucket/prefix``."""
        o = self.options
        where = {
            "mlflow": o.get("trackingUri", ""),
            "s3": f"{o.get('bucket', '')}/{o.get('prefix') or 'evalsi'}",
            "webhook": o.get("url", ""),
            "wandb": o.get("project", ""),
            "langfuse": o.get("host", ""),
            "langsmith": f"{o.get('endpoint') or 'https://api.smith.langchain.com'} "
            f"{o.get('project') or 'evalsi'}",
        }[self.kind]
        return f"{self.kind} {where}"

    @property
    def secret_ref(self) -> str:
        """The reference of the kind's one secret (a webhook's signing secret, Langfuse's
        secret key, LangSmith's API key), or ""."""
        return str(next((self.options[k] for k in _SECRET_KEYS if self.options.get(k)), ""))

    def urls(self) -> list[tuple[str, str]]:
        """Each (key, URL) the sink connects to, for the server's egress checks."""
        return [(k, str(self.options[k])) for k in _URL_KEYS if self.options.get(k)]


_SECRET_KEYS = ("secretRef", "secretKeyRef", "apiKeyRef")
_URL_KEYS = ("trackingUri", "url", "endpointUrl", "host", "endpoint")


@dataclass(frozen=True, slots=True)
class JudgeSpec:
    """A model that grades (none by default, secrets by reference).

    ``connector`` is one of ``connectors.MODEL_CONNECTORS``, with ``api_version`` (Azure,
    Gemini) and ``region`` (Bedrock) where the provider needs them; ``params`` are sent with every
    judge call (``temperature: 0`` is wise); ``max_concurrency`` caps this judge's calls in
    flight. ``name`` is the key evaluators ask for (``judge: default``). ``scale`` is the
    ``(min, max)`` this judge scores on (``llm-judge`` asks for it and normalises to [0, 1];
    None: 0 to 1). ``cache`` False bypasses the store's judge cache, reads and writes.
    """

    model: str
    connector: str = "openai-compatible"
    base_url: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    secret_ref: str = ""
    name: str = "default"
    timeout_s: float = 120.0
    max_concurrency: int = 16
    scale: tuple[float, float] | None = None
    cache: bool = True
    api_version: str = ""
    region: str = ""
    auth: str = ""  # how the key is sent; not part of the identity (it changes no answer)

    def identity(self) -> dict[str, Any]:
        """What the manifest records and the judge cache keys on (no secret values).

        ``scale`` appears only when set, so the identity (and the cache keys and spec hashes
        built on it) of a judge without one is what it was before scales existed; ``cache``
        never does: reading the cache or not changes no answer.
        """
        out: dict[str, Any] = {
            "name": self.name,
            "connector": self.connector,
            "base_url": self.base_url,
            "model": self.model,
            "params": dict(self.params),
            "secret_ref": self.secret_ref or None,
        }
        if self.scale is not None:
            out["scale"] = {"min": self.scale[0], "max": self.scale[1]}
        # Only when set, as scale: the keys of the judges that have neither stay as they were.
        if self.api_version:
            out["api_version"] = self.api_version
        if self.region:
            out["region"] = self.region
        return out


@dataclass(frozen=True, slots=True)
class RunSpec:
    """An ``EvalRun``: target × dataset × trials, graded by evaluators, gated by CEL."""

    name: str
    target: TargetSpec
    dataset: DatasetSpec
    evaluators: tuple[EvaluatorEntry, ...]
    trials: int = 1
    max_concurrency: int = 16
    gates: tuple[str, ...] = ()
    min_completion_rate: float = 0.8
    max_evaluator_error_rate: float = 0.1
    budget: BudgetSpec | None = None
    seed: int = 0
    judges: dict[str, JudgeSpec] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    environment: EnvironmentSpec | None = None
    telemetry: TelemetrySpec | None = None
    sinks: tuple[SinkSpec, ...] = ()
    declaration: Declaration | None = None
    thresholds: tuple[Threshold, ...] = ()
    """The spec's own thresholds; the declaration's may tighten them (``specs.tightened``)."""
    case_policy: CasePolicy | None = None
    source: str = ""  # the spec file it came from, if any
    raw: dict[str, Any] = field(default_factory=dict)  # the document as written, for the manifest

    @property
    def spec_hash(self) -> str:
        """Content hash of the document as written (or of the fields, when built in code).

        What only bounds or routes the work is left out (``work_document``): a run stopped by
        its budget resumes under a raised one, and ``--no-cache`` resumes a cached run.
        """
        if self.raw:
            return content_hash(work_document(self.raw))
        fields: dict[str, Any] = {
            "name": self.name,
            "target": repr(self.target),
            "dataset": repr(self.dataset),
            "evaluators": [e.as_mapping() for e in self.evaluators],
            "trials": self.trials,
            "gates": list(self.gates),
            "seed": self.seed,
        }
        if self.judges:  # absent when unused, so older hashes stay valid
            fields["judges"] = {k: j.identity() for k, j in sorted(self.judges.items())}
        if self.environment is not None:  # likewise
            fields["environment"] = self.environment.identity()
        if self.declaration is not None:
            fields["declaration"] = {
                **self.declaration.to_dict(),
                "thresholds": [t.to_dict() for t in self.declaration.thresholds],
            }
        if self.thresholds:
            fields["thresholds"] = [t.to_dict() for t in self.thresholds]
        if self.case_policy is not None:
            fields["case_policy"] = self.case_policy.to_dict()
        return content_hash(fields)


def with_declaration(spec: RunSpec, declaration: Declaration) -> RunSpec:
    """``spec`` with ``declaration`` as its ``spec.declaration`` (``evalsi run --declaration``):
    in the document too, so the spec hash covers it; a declared threshold looser than the
    spec's is a ``SpecError``."""
    from evalsi.specs._checks import raise_problems
    from evalsi.specs._declaration_load import tightened, tightened_policy

    _, problems = tightened(spec.thresholds, declaration.thresholds, ("declaration",), {})
    problems += tightened_policy(spec.case_policy, declaration.case_policy, ("declaration",), {})[1]
    if problems:
        raise_problems(declaration.source or "<declaration>", {}, problems)
    raw = spec.raw
    if raw:
        raw = {**raw, "spec": {**raw.get("spec", {}), "declaration": dict(declaration.document)}}
    return dataclasses.replace(spec, declaration=declaration, raw=raw)


def _plain(value: Any) -> Any:
    """``value`` as JSON-able data in a fixed order (a frozenset's order changes from one
    process to the next)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, frozenset | set):
        return sorted(_plain(v) for v in value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in sorted(value.items())}
    return value


_NOT_WORK = ("budget", "telemetry", "sinks")


def work_document(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` (an EvalRun as written) without what does not change the run's work: the
    budget (``spec.budget``), where its spans and results go (``spec.telemetry``,
    ``spec.sinks``) and whether judges read the cache (``spec.judges.*.cache``).

    A document without either is returned unchanged, so its hash is what it always was.

    Example:
        >>> work_document({"spec": {"trials": 2, "budget": {"tokens": 10}}})
        {'spec': {'trials': 2}}
    """
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        return doc
    judges = spec.get("judges")
    cached = isinstance(judges, dict) and any(
        isinstance(j, dict) and "cache" in j for j in judges.values()
    )
    if not any(k in spec for k in _NOT_WORK) and not cached:
        return doc
    trimmed = {k: v for k, v in spec.items() if k not in _NOT_WORK}
    if cached:
        assert isinstance(judges, dict)
        trimmed["judges"] = {
            name: {k: v for k, v in j.items() if k != "cache"} if isinstance(j, dict) else j
            for name, j in judges.items()
        }
    return {**doc, "spec": trimmed}
