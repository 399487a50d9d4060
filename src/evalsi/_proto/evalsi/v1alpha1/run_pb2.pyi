from evalsi._proto.evalsi.v1alpha1 import evaluation_service_pb2 as _evaluation_service_pb2
from evalsi._proto.evalsi.v1alpha1 import evidence_pb2 as _evidence_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EvalRun(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "spec")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: ObjectMeta
    spec: EvalRunSpec
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[ObjectMeta, _Mapping]] = ..., spec: _Optional[_Union[EvalRunSpec, _Mapping]] = ...) -> None: ...

class ObjectMeta(_message.Message):
    __slots__ = ("name", "labels")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    name: str
    labels: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ...) -> None: ...

class EvalRunSpec(_message.Message):
    __slots__ = ("target", "dataset", "trials", "max_concurrency", "evaluators", "gates", "min_completion_rate", "max_evaluator_error_rate", "budget", "seed", "judges", "environment", "telemetry", "declaration", "thresholds", "case_policy", "sinks")
    class JudgesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Judge
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Judge, _Mapping]] = ...) -> None: ...
    TARGET_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    TRIALS_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    EVALUATORS_FIELD_NUMBER: _ClassVar[int]
    GATES_FIELD_NUMBER: _ClassVar[int]
    MIN_COMPLETION_RATE_FIELD_NUMBER: _ClassVar[int]
    MAX_EVALUATOR_ERROR_RATE_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    JUDGES_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    TELEMETRY_FIELD_NUMBER: _ClassVar[int]
    DECLARATION_FIELD_NUMBER: _ClassVar[int]
    THRESHOLDS_FIELD_NUMBER: _ClassVar[int]
    CASE_POLICY_FIELD_NUMBER: _ClassVar[int]
    SINKS_FIELD_NUMBER: _ClassVar[int]
    target: Target
    dataset: DatasetRef
    trials: int
    max_concurrency: int
    evaluators: _containers.RepeatedCompositeFieldContainer[_evaluation_service_pb2.EvaluatorSpec]
    gates: _containers.RepeatedScalarFieldContainer[str]
    min_completion_rate: float
    max_evaluator_error_rate: float
    budget: Budget
    seed: int
    judges: _containers.MessageMap[str, Judge]
    environment: AgentEnvironment
    telemetry: Telemetry
    declaration: _evidence_pb2.SystemDeclaration
    thresholds: _containers.RepeatedCompositeFieldContainer[_evidence_pb2.Threshold]
    case_policy: _evidence_pb2.CasePolicy
    sinks: _containers.RepeatedCompositeFieldContainer[Sink]
    def __init__(self, target: _Optional[_Union[Target, _Mapping]] = ..., dataset: _Optional[_Union[DatasetRef, _Mapping]] = ..., trials: _Optional[int] = ..., max_concurrency: _Optional[int] = ..., evaluators: _Optional[_Iterable[_Union[_evaluation_service_pb2.EvaluatorSpec, _Mapping]]] = ..., gates: _Optional[_Iterable[str]] = ..., min_completion_rate: _Optional[float] = ..., max_evaluator_error_rate: _Optional[float] = ..., budget: _Optional[_Union[Budget, _Mapping]] = ..., seed: _Optional[int] = ..., judges: _Optional[_Mapping[str, Judge]] = ..., environment: _Optional[_Union[AgentEnvironment, _Mapping]] = ..., telemetry: _Optional[_Union[Telemetry, _Mapping]] = ..., declaration: _Optional[_Union[_evidence_pb2.SystemDeclaration, _Mapping]] = ..., thresholds: _Optional[_Iterable[_Union[_evidence_pb2.Threshold, _Mapping]]] = ..., case_policy: _Optional[_Union[_evidence_pb2.CasePolicy, _Mapping]] = ..., sinks: _Optional[_Iterable[_Union[Sink, _Mapping]]] = ...) -> None: ...

class Sink(_message.Message):
    __slots__ = ("mlflow", "s3", "webhook", "wandb", "langfuse", "langsmith")
    MLFLOW_FIELD_NUMBER: _ClassVar[int]
    S3_FIELD_NUMBER: _ClassVar[int]
    WEBHOOK_FIELD_NUMBER: _ClassVar[int]
    WANDB_FIELD_NUMBER: _ClassVar[int]
    LANGFUSE_FIELD_NUMBER: _ClassVar[int]
    LANGSMITH_FIELD_NUMBER: _ClassVar[int]
    mlflow: MlflowSink
    s3: S3Sink
    webhook: WebhookSink
    wandb: WandbSink
    langfuse: LangfuseSink
    langsmith: LangsmithSink
    def __init__(self, mlflow: _Optional[_Union[MlflowSink, _Mapping]] = ..., s3: _Optional[_Union[S3Sink, _Mapping]] = ..., webhook: _Optional[_Union[WebhookSink, _Mapping]] = ..., wandb: _Optional[_Union[WandbSink, _Mapping]] = ..., langfuse: _Optional[_Union[LangfuseSink, _Mapping]] = ..., langsmith: _Optional[_Union[LangsmithSink, _Mapping]] = ...) -> None: ...

class MlflowSink(_message.Message):
    __slots__ = ("tracking_uri", "experiment")
    TRACKING_URI_FIELD_NUMBER: _ClassVar[int]
    EXPERIMENT_FIELD_NUMBER: _ClassVar[int]
    tracking_uri: str
    experiment: str
    def __init__(self, tracking_uri: _Optional[str] = ..., experiment: _Optional[str] = ...) -> None: ...

class S3Sink(_message.Message):
    __slots__ = ("bucket", "prefix", "endpoint_url", "region")
    BUCKET_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_URL_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    bucket: str
    prefix: str
    endpoint_url: str
    region: str
    def __init__(self, bucket: _Optional[str] = ..., prefix: _Optional[str] = ..., endpoint_url: _Optional[str] = ..., region: _Optional[str] = ...) -> None: ...

class WebhookSink(_message.Message):
    __slots__ = ("url", "secret_ref", "timeout_seconds")
    URL_FIELD_NUMBER: _ClassVar[int]
    SECRET_REF_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    url: str
    secret_ref: str
    timeout_seconds: float
    def __init__(self, url: _Optional[str] = ..., secret_ref: _Optional[str] = ..., timeout_seconds: _Optional[float] = ...) -> None: ...

class WandbSink(_message.Message):
    __slots__ = ("project", "mode", "dir", "entity")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    DIR_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    project: str
    mode: str
    dir: str
    entity: str
    def __init__(self, project: _Optional[str] = ..., mode: _Optional[str] = ..., dir: _Optional[str] = ..., entity: _Optional[str] = ...) -> None: ...

class LangfuseSink(_message.Message):
    __slots__ = ("host", "public_key", "secret_key_ref", "dataset")
    HOST_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    SECRET_KEY_REF_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    host: str
    public_key: str
    secret_key_ref: str
    dataset: str
    def __init__(self, host: _Optional[str] = ..., public_key: _Optional[str] = ..., secret_key_ref: _Optional[str] = ..., dataset: _Optional[str] = ...) -> None: ...

class LangsmithSink(_message.Message):
    __slots__ = ("endpoint", "api_key_ref", "project", "dataset")
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    API_KEY_REF_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    endpoint: str
    api_key_ref: str
    project: str
    dataset: str
    def __init__(self, endpoint: _Optional[str] = ..., api_key_ref: _Optional[str] = ..., project: _Optional[str] = ..., dataset: _Optional[str] = ...) -> None: ...

class Telemetry(_message.Message):
    __slots__ = ("otlp",)
    OTLP_FIELD_NUMBER: _ClassVar[int]
    otlp: OtlpExport
    def __init__(self, otlp: _Optional[_Union[OtlpExport, _Mapping]] = ...) -> None: ...

class OtlpExport(_message.Message):
    __slots__ = ("endpoint", "headers", "protocol", "timeout_seconds")
    class HeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    endpoint: str
    headers: _containers.ScalarMap[str, str]
    protocol: str
    timeout_seconds: float
    def __init__(self, endpoint: _Optional[str] = ..., headers: _Optional[_Mapping[str, str]] = ..., protocol: _Optional[str] = ..., timeout_seconds: _Optional[float] = ...) -> None: ...

class Judge(_message.Message):
    __slots__ = ("connector", "base_url", "model", "params", "secret_ref", "timeout_seconds", "max_concurrency", "scale", "cache", "api_version", "region", "auth")
    CONNECTOR_FIELD_NUMBER: _ClassVar[int]
    BASE_URL_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    SECRET_REF_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    SCALE_FIELD_NUMBER: _ClassVar[int]
    CACHE_FIELD_NUMBER: _ClassVar[int]
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    AUTH_FIELD_NUMBER: _ClassVar[int]
    connector: str
    base_url: str
    model: str
    params: _struct_pb2.Struct
    secret_ref: str
    timeout_seconds: float
    max_concurrency: int
    scale: JudgeScale
    cache: bool
    api_version: str
    region: str
    auth: str
    def __init__(self, connector: _Optional[str] = ..., base_url: _Optional[str] = ..., model: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., secret_ref: _Optional[str] = ..., timeout_seconds: _Optional[float] = ..., max_concurrency: _Optional[int] = ..., scale: _Optional[_Union[JudgeScale, _Mapping]] = ..., cache: _Optional[bool] = ..., api_version: _Optional[str] = ..., region: _Optional[str] = ..., auth: _Optional[str] = ...) -> None: ...

class JudgeScale(_message.Message):
    __slots__ = ("min", "max")
    MIN_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    min: float
    max: float
    def __init__(self, min: _Optional[float] = ..., max: _Optional[float] = ...) -> None: ...

class Target(_message.Message):
    __slots__ = ("model", "python", "http", "agent", "template", "system", "timeout_seconds", "requests_per_minute", "tokens_per_minute")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PYTHON_FIELD_NUMBER: _ClassVar[int]
    HTTP_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    TOKENS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    model: ModelTarget
    python: str
    http: HttpTarget
    agent: AgentTarget
    template: str
    system: str
    timeout_seconds: float
    requests_per_minute: float
    tokens_per_minute: float
    def __init__(self, model: _Optional[_Union[ModelTarget, _Mapping]] = ..., python: _Optional[str] = ..., http: _Optional[_Union[HttpTarget, _Mapping]] = ..., agent: _Optional[_Union[AgentTarget, _Mapping]] = ..., template: _Optional[str] = ..., system: _Optional[str] = ..., timeout_seconds: _Optional[float] = ..., requests_per_minute: _Optional[float] = ..., tokens_per_minute: _Optional[float] = ...) -> None: ...

class ModelTarget(_message.Message):
    __slots__ = ("connector", "base_url", "model", "params", "secret_ref", "api_version", "region", "auth")
    CONNECTOR_FIELD_NUMBER: _ClassVar[int]
    BASE_URL_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    SECRET_REF_FIELD_NUMBER: _ClassVar[int]
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    AUTH_FIELD_NUMBER: _ClassVar[int]
    connector: str
    base_url: str
    model: str
    params: _struct_pb2.Struct
    secret_ref: str
    api_version: str
    region: str
    auth: str
    def __init__(self, connector: _Optional[str] = ..., base_url: _Optional[str] = ..., model: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., secret_ref: _Optional[str] = ..., api_version: _Optional[str] = ..., region: _Optional[str] = ..., auth: _Optional[str] = ...) -> None: ...

class AgentTarget(_message.Message):
    __slots__ = ("model", "max_steps", "max_tokens", "max_usd", "max_duration", "harness", "kind", "a2a", "mcp", "responses", "http", "cli", "cassette", "user")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    MAX_STEPS_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MAX_USD_FIELD_NUMBER: _ClassVar[int]
    MAX_DURATION_FIELD_NUMBER: _ClassVar[int]
    HARNESS_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    A2A_FIELD_NUMBER: _ClassVar[int]
    MCP_FIELD_NUMBER: _ClassVar[int]
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    HTTP_FIELD_NUMBER: _ClassVar[int]
    CLI_FIELD_NUMBER: _ClassVar[int]
    CASSETTE_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    model: ModelTarget
    max_steps: int
    max_tokens: int
    max_usd: float
    max_duration: str
    harness: HarnessRef
    kind: str
    a2a: A2aAgent
    mcp: McpAgent
    responses: ResponsesAgent
    http: HttpAgent
    cli: CliAgent
    cassette: AgentCassette
    user: UserSimulator
    def __init__(self, model: _Optional[_Union[ModelTarget, _Mapping]] = ..., max_steps: _Optional[int] = ..., max_tokens: _Optional[int] = ..., max_usd: _Optional[float] = ..., max_duration: _Optional[str] = ..., harness: _Optional[_Union[HarnessRef, _Mapping]] = ..., kind: _Optional[str] = ..., a2a: _Optional[_Union[A2aAgent, _Mapping]] = ..., mcp: _Optional[_Union[McpAgent, _Mapping]] = ..., responses: _Optional[_Union[ResponsesAgent, _Mapping]] = ..., http: _Optional[_Union[HttpAgent, _Mapping]] = ..., cli: _Optional[_Union[CliAgent, _Mapping]] = ..., cassette: _Optional[_Union[AgentCassette, _Mapping]] = ..., user: _Optional[_Union[UserSimulator, _Mapping]] = ...) -> None: ...

class AgentCassette(_message.Message):
    __slots__ = ("record",)
    RECORD_FIELD_NUMBER: _ClassVar[int]
    record: bool
    def __init__(self, record: _Optional[bool] = ...) -> None: ...

class A2aAgent(_message.Message):
    __slots__ = ("url", "headers", "stream")
    class HeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    URL_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    url: str
    headers: _containers.ScalarMap[str, str]
    stream: bool
    def __init__(self, url: _Optional[str] = ..., headers: _Optional[_Mapping[str, str]] = ..., stream: _Optional[bool] = ...) -> None: ...

class McpAgent(_message.Message):
    __slots__ = ("command", "url", "tool", "prompt", "input_argument", "arguments", "env")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    INPUT_ARGUMENT_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    command: _containers.RepeatedScalarFieldContainer[str]
    url: str
    tool: str
    prompt: str
    input_argument: str
    arguments: _struct_pb2.Struct
    env: _containers.ScalarMap[str, str]
    def __init__(self, command: _Optional[_Iterable[str]] = ..., url: _Optional[str] = ..., tool: _Optional[str] = ..., prompt: _Optional[str] = ..., input_argument: _Optional[str] = ..., arguments: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., env: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ResponsesAgent(_message.Message):
    __slots__ = ("base_url", "model", "secret_ref", "instructions", "params", "max_turns")
    BASE_URL_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    SECRET_REF_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    MAX_TURNS_FIELD_NUMBER: _ClassVar[int]
    base_url: str
    model: str
    secret_ref: str
    instructions: str
    params: _struct_pb2.Struct
    max_turns: int
    def __init__(self, base_url: _Optional[str] = ..., model: _Optional[str] = ..., secret_ref: _Optional[str] = ..., instructions: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., max_turns: _Optional[int] = ...) -> None: ...

class HttpAgent(_message.Message):
    __slots__ = ("url", "method", "headers", "body", "output", "transcript", "session")
    class HeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    URL_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    TRANSCRIPT_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    url: str
    method: str
    headers: _containers.ScalarMap[str, str]
    body: str
    output: str
    transcript: str
    session: str
    def __init__(self, url: _Optional[str] = ..., method: _Optional[str] = ..., headers: _Optional[_Mapping[str, str]] = ..., body: _Optional[str] = ..., output: _Optional[str] = ..., transcript: _Optional[str] = ..., session: _Optional[str] = ...) -> None: ...

class CliAgent(_message.Message):
    __slots__ = ("command", "env", "commands_file", "timeout_seconds")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    COMMANDS_FILE_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    command: _containers.RepeatedScalarFieldContainer[str]
    env: _containers.ScalarMap[str, str]
    commands_file: str
    timeout_seconds: float
    def __init__(self, command: _Optional[_Iterable[str]] = ..., env: _Optional[_Mapping[str, str]] = ..., commands_file: _Optional[str] = ..., timeout_seconds: _Optional[float] = ...) -> None: ...

class UserSimulator(_message.Message):
    __slots__ = ("model", "persona", "goal", "hidden", "stop_token", "max_turns", "max_usd")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PERSONA_FIELD_NUMBER: _ClassVar[int]
    GOAL_FIELD_NUMBER: _ClassVar[int]
    HIDDEN_FIELD_NUMBER: _ClassVar[int]
    STOP_TOKEN_FIELD_NUMBER: _ClassVar[int]
    MAX_TURNS_FIELD_NUMBER: _ClassVar[int]
    MAX_USD_FIELD_NUMBER: _ClassVar[int]
    model: ModelTarget
    persona: str
    goal: str
    hidden: str
    stop_token: str
    max_turns: int
    max_usd: float
    def __init__(self, model: _Optional[_Union[ModelTarget, _Mapping]] = ..., persona: _Optional[str] = ..., goal: _Optional[str] = ..., hidden: _Optional[str] = ..., stop_token: _Optional[str] = ..., max_turns: _Optional[int] = ..., max_usd: _Optional[float] = ...) -> None: ...

class HarnessRef(_message.Message):
    __slots__ = ("python", "grpc", "command")
    PYTHON_FIELD_NUMBER: _ClassVar[int]
    GRPC_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    python: str
    grpc: str
    command: CommandHarness
    def __init__(self, python: _Optional[str] = ..., grpc: _Optional[str] = ..., command: _Optional[_Union[CommandHarness, _Mapping]] = ...) -> None: ...

class CommandHarness(_message.Message):
    __slots__ = ("argv", "env", "start_timeout_seconds")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ARGV_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    START_TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    argv: _containers.RepeatedScalarFieldContainer[str]
    env: _containers.ScalarMap[str, str]
    start_timeout_seconds: float
    def __init__(self, argv: _Optional[_Iterable[str]] = ..., env: _Optional[_Mapping[str, str]] = ..., start_timeout_seconds: _Optional[float] = ...) -> None: ...

class AgentEnvironment(_message.Message):
    __slots__ = ("tools", "policy", "faults", "injections", "tool_timeout_seconds", "sandbox", "repository", "fixtures", "checkers")
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    FAULTS_FIELD_NUMBER: _ClassVar[int]
    INJECTIONS_FIELD_NUMBER: _ClassVar[int]
    TOOL_TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    REPOSITORY_FIELD_NUMBER: _ClassVar[int]
    FIXTURES_FIELD_NUMBER: _ClassVar[int]
    CHECKERS_FIELD_NUMBER: _ClassVar[int]
    tools: _containers.RepeatedCompositeFieldContainer[ToolEntry]
    policy: ToolPolicy
    faults: _containers.RepeatedCompositeFieldContainer[ToolFault]
    injections: _containers.RepeatedCompositeFieldContainer[ToolInjection]
    tool_timeout_seconds: float
    sandbox: AgentSandbox
    repository: GitWorkspace
    fixtures: _struct_pb2.Value
    checkers: _containers.RepeatedCompositeFieldContainer[Checker]
    def __init__(self, tools: _Optional[_Iterable[_Union[ToolEntry, _Mapping]]] = ..., policy: _Optional[_Union[ToolPolicy, _Mapping]] = ..., faults: _Optional[_Iterable[_Union[ToolFault, _Mapping]]] = ..., injections: _Optional[_Iterable[_Union[ToolInjection, _Mapping]]] = ..., tool_timeout_seconds: _Optional[float] = ..., sandbox: _Optional[_Union[AgentSandbox, _Mapping]] = ..., repository: _Optional[_Union[GitWorkspace, _Mapping]] = ..., fixtures: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., checkers: _Optional[_Iterable[_Union[Checker, _Mapping]]] = ...) -> None: ...

class GitWorkspace(_message.Message):
    __slots__ = ("path", "commit")
    PATH_FIELD_NUMBER: _ClassVar[int]
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    path: str
    commit: str
    def __init__(self, path: _Optional[str] = ..., commit: _Optional[str] = ...) -> None: ...

class AgentSandbox(_message.Message):
    __slots__ = ("min_isolation", "network", "timeout_seconds", "memory_mb")
    MIN_ISOLATION_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_MB_FIELD_NUMBER: _ClassVar[int]
    min_isolation: str
    network: str
    timeout_seconds: float
    memory_mb: int
    def __init__(self, min_isolation: _Optional[str] = ..., network: _Optional[str] = ..., timeout_seconds: _Optional[float] = ..., memory_mb: _Optional[int] = ...) -> None: ...

class Checker(_message.Message):
    __slots__ = ("name", "exit_code", "json_file", "python")
    NAME_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    JSON_FILE_FIELD_NUMBER: _ClassVar[int]
    PYTHON_FIELD_NUMBER: _ClassVar[int]
    name: str
    exit_code: ExitCodeChecker
    json_file: JsonFileChecker
    python: str
    def __init__(self, name: _Optional[str] = ..., exit_code: _Optional[_Union[ExitCodeChecker, _Mapping]] = ..., json_file: _Optional[_Union[JsonFileChecker, _Mapping]] = ..., python: _Optional[str] = ...) -> None: ...

class ExitCodeChecker(_message.Message):
    __slots__ = ("command", "expect")
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    EXPECT_FIELD_NUMBER: _ClassVar[int]
    command: _containers.RepeatedScalarFieldContainer[str]
    expect: int
    def __init__(self, command: _Optional[_Iterable[str]] = ..., expect: _Optional[int] = ...) -> None: ...

class JsonFileChecker(_message.Message):
    __slots__ = ("path", "expect", "expect_from")
    PATH_FIELD_NUMBER: _ClassVar[int]
    EXPECT_FIELD_NUMBER: _ClassVar[int]
    EXPECT_FROM_FIELD_NUMBER: _ClassVar[int]
    path: str
    expect: _struct_pb2.Value
    expect_from: str
    def __init__(self, path: _Optional[str] = ..., expect: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., expect_from: _Optional[str] = ...) -> None: ...

class ToolEntry(_message.Message):
    __slots__ = ("mcp", "function", "sandbox", "declare")
    MCP_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    DECLARE_FIELD_NUMBER: _ClassVar[int]
    mcp: McpServerRef
    function: str
    sandbox: SandboxTools
    declare: ToolDeclaration
    def __init__(self, mcp: _Optional[_Union[McpServerRef, _Mapping]] = ..., function: _Optional[str] = ..., sandbox: _Optional[_Union[SandboxTools, _Mapping]] = ..., declare: _Optional[_Union[ToolDeclaration, _Mapping]] = ...) -> None: ...

class SandboxTools(_message.Message):
    __slots__ = ("tools",)
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    tools: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tools: _Optional[_Iterable[str]] = ...) -> None: ...

class McpServerRef(_message.Message):
    __slots__ = ("command", "url", "env", "tools")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class ToolsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: ToolDeclaration
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[ToolDeclaration, _Mapping]] = ...) -> None: ...
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    command: _containers.RepeatedScalarFieldContainer[str]
    url: str
    env: _containers.ScalarMap[str, str]
    tools: _containers.MessageMap[str, ToolDeclaration]
    def __init__(self, command: _Optional[_Iterable[str]] = ..., url: _Optional[str] = ..., env: _Optional[_Mapping[str, str]] = ..., tools: _Optional[_Mapping[str, ToolDeclaration]] = ...) -> None: ...

class ToolDeclaration(_message.Message):
    __slots__ = ("permission", "data_class", "reversible", "exposure")
    PERMISSION_FIELD_NUMBER: _ClassVar[int]
    DATA_CLASS_FIELD_NUMBER: _ClassVar[int]
    REVERSIBLE_FIELD_NUMBER: _ClassVar[int]
    EXPOSURE_FIELD_NUMBER: _ClassVar[int]
    permission: str
    data_class: str
    reversible: bool
    exposure: str
    def __init__(self, permission: _Optional[str] = ..., data_class: _Optional[str] = ..., reversible: _Optional[bool] = ..., exposure: _Optional[str] = ...) -> None: ...

class ToolPolicy(_message.Message):
    __slots__ = ("allow", "deny", "allow_destructive", "read_only", "default", "approvals")
    ALLOW_FIELD_NUMBER: _ClassVar[int]
    DENY_FIELD_NUMBER: _ClassVar[int]
    ALLOW_DESTRUCTIVE_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_FIELD_NUMBER: _ClassVar[int]
    APPROVALS_FIELD_NUMBER: _ClassVar[int]
    allow: _containers.RepeatedScalarFieldContainer[str]
    deny: _containers.RepeatedScalarFieldContainer[str]
    allow_destructive: bool
    read_only: bool
    default: str
    approvals: ToolApprovals
    def __init__(self, allow: _Optional[_Iterable[str]] = ..., deny: _Optional[_Iterable[str]] = ..., allow_destructive: _Optional[bool] = ..., read_only: _Optional[bool] = ..., default: _Optional[str] = ..., approvals: _Optional[_Union[ToolApprovals, _Mapping]] = ...) -> None: ...

class ToolApprovals(_message.Message):
    __slots__ = ("mode", "allow")
    MODE_FIELD_NUMBER: _ClassVar[int]
    ALLOW_FIELD_NUMBER: _ClassVar[int]
    mode: str
    allow: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, mode: _Optional[str] = ..., allow: _Optional[_Iterable[str]] = ...) -> None: ...

class ToolFault(_message.Message):
    __slots__ = ("tool", "kind", "call", "latency_ms", "message")
    TOOL_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    CALL_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    tool: str
    kind: str
    call: int
    latency_ms: float
    message: str
    def __init__(self, tool: _Optional[str] = ..., kind: _Optional[str] = ..., call: _Optional[int] = ..., latency_ms: _Optional[float] = ..., message: _Optional[str] = ...) -> None: ...

class ToolInjection(_message.Message):
    __slots__ = ("tool", "payload", "call")
    TOOL_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    CALL_FIELD_NUMBER: _ClassVar[int]
    tool: str
    payload: str
    call: int
    def __init__(self, tool: _Optional[str] = ..., payload: _Optional[str] = ..., call: _Optional[int] = ...) -> None: ...

class HttpTarget(_message.Message):
    __slots__ = ("url", "method", "body", "output", "headers")
    class HeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    URL_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    url: str
    method: str
    body: _struct_pb2.Value
    output: str
    headers: _containers.ScalarMap[str, str]
    def __init__(self, url: _Optional[str] = ..., method: _Optional[str] = ..., body: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., output: _Optional[str] = ..., headers: _Optional[_Mapping[str, str]] = ...) -> None: ...

class DatasetRef(_message.Message):
    __slots__ = ("path", "fields", "limit")
    class FieldsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PATH_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    path: str
    fields: _containers.ScalarMap[str, str]
    limit: int
    def __init__(self, path: _Optional[str] = ..., fields: _Optional[_Mapping[str, str]] = ..., limit: _Optional[int] = ...) -> None: ...

class Budget(_message.Message):
    __slots__ = ("tokens", "usd", "wall_clock")
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    USD_FIELD_NUMBER: _ClassVar[int]
    WALL_CLOCK_FIELD_NUMBER: _ClassVar[int]
    tokens: int
    usd: float
    wall_clock: str
    def __init__(self, tokens: _Optional[int] = ..., usd: _Optional[float] = ..., wall_clock: _Optional[str] = ...) -> None: ...
