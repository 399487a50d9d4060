from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class StepKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STEP_KIND_UNSPECIFIED: _ClassVar[StepKind]
    STEP_KIND_LLM_CALL: _ClassVar[StepKind]
    STEP_KIND_TOOL_CALL: _ClassVar[StepKind]
    STEP_KIND_RETRIEVAL: _ClassVar[StepKind]
    STEP_KIND_MESSAGE: _ClassVar[StepKind]
    STEP_KIND_AGENT: _ClassVar[StepKind]
    STEP_KIND_OTHER: _ClassVar[StepKind]
    STEP_KIND_EMBEDDING: _ClassVar[StepKind]
    STEP_KIND_CHAIN: _ClassVar[StepKind]
    STEP_KIND_GUARDRAIL: _ClassVar[StepKind]
    STEP_KIND_APPROVAL: _ClassVar[StepKind]
    STEP_KIND_FAULT: _ClassVar[StepKind]
    STEP_KIND_POLICY_BLOCK: _ClassVar[StepKind]
    STEP_KIND_SANDBOX_DENIAL: _ClassVar[StepKind]
    STEP_KIND_REASONING: _ClassVar[StepKind]

class ProvenanceSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROVENANCE_SOURCE_UNSPECIFIED: _ClassVar[ProvenanceSource]
    PROVENANCE_SOURCE_DATASET: _ClassVar[ProvenanceSource]
    PROVENANCE_SOURCE_RUN: _ClassVar[ProvenanceSource]
    PROVENANCE_SOURCE_TRACE: _ClassVar[ProvenanceSource]
STEP_KIND_UNSPECIFIED: StepKind
STEP_KIND_LLM_CALL: StepKind
STEP_KIND_TOOL_CALL: StepKind
STEP_KIND_RETRIEVAL: StepKind
STEP_KIND_MESSAGE: StepKind
STEP_KIND_AGENT: StepKind
STEP_KIND_OTHER: StepKind
STEP_KIND_EMBEDDING: StepKind
STEP_KIND_CHAIN: StepKind
STEP_KIND_GUARDRAIL: StepKind
STEP_KIND_APPROVAL: StepKind
STEP_KIND_FAULT: StepKind
STEP_KIND_POLICY_BLOCK: StepKind
STEP_KIND_SANDBOX_DENIAL: StepKind
STEP_KIND_REASONING: StepKind
PROVENANCE_SOURCE_UNSPECIFIED: ProvenanceSource
PROVENANCE_SOURCE_DATASET: ProvenanceSource
PROVENANCE_SOURCE_RUN: ProvenanceSource
PROVENANCE_SOURCE_TRACE: ProvenanceSource

class Record(_message.Message):
    __slots__ = ("id", "input", "output", "reference", "context", "trajectory", "usage", "metadata", "provenance")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _struct_pb2.Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    TRAJECTORY_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    PROVENANCE_FIELD_NUMBER: _ClassVar[int]
    id: str
    input: Content
    output: Content
    reference: Content
    context: _containers.RepeatedCompositeFieldContainer[Content]
    trajectory: Trajectory
    usage: Usage
    metadata: _containers.MessageMap[str, _struct_pb2.Value]
    provenance: Provenance
    def __init__(self, id: _Optional[str] = ..., input: _Optional[_Union[Content, _Mapping]] = ..., output: _Optional[_Union[Content, _Mapping]] = ..., reference: _Optional[_Union[Content, _Mapping]] = ..., context: _Optional[_Iterable[_Union[Content, _Mapping]]] = ..., trajectory: _Optional[_Union[Trajectory, _Mapping]] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., metadata: _Optional[_Mapping[str, _struct_pb2.Value]] = ..., provenance: _Optional[_Union[Provenance, _Mapping]] = ...) -> None: ...

class Content(_message.Message):
    __slots__ = ("text", "messages", "json", "row", "tensor", "media")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    ROW_FIELD_NUMBER: _ClassVar[int]
    TENSOR_FIELD_NUMBER: _ClassVar[int]
    MEDIA_FIELD_NUMBER: _ClassVar[int]
    text: str
    messages: Messages
    json: _struct_pb2.Value
    row: TabularRow
    tensor: Tensor
    media: MediaRef
    def __init__(self, text: _Optional[str] = ..., messages: _Optional[_Union[Messages, _Mapping]] = ..., json: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., row: _Optional[_Union[TabularRow, _Mapping]] = ..., tensor: _Optional[_Union[Tensor, _Mapping]] = ..., media: _Optional[_Union[MediaRef, _Mapping]] = ...) -> None: ...

class Messages(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ("role", "content", "tool_calls", "tool_call_id", "name")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    role: str
    content: str
    tool_calls: _containers.RepeatedCompositeFieldContainer[ToolCall]
    tool_call_id: str
    name: str
    def __init__(self, role: _Optional[str] = ..., content: _Optional[str] = ..., tool_calls: _Optional[_Iterable[_Union[ToolCall, _Mapping]]] = ..., tool_call_id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class ToolCall(_message.Message):
    __slots__ = ("id", "name", "arguments")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    arguments: _struct_pb2.Value
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., arguments: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class TabularRow(_message.Message):
    __slots__ = ("features", "prediction", "probabilities")
    class FeaturesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _struct_pb2.Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...
    class ProbabilitiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    PREDICTION_FIELD_NUMBER: _ClassVar[int]
    PROBABILITIES_FIELD_NUMBER: _ClassVar[int]
    features: _containers.MessageMap[str, _struct_pb2.Value]
    prediction: _struct_pb2.Value
    probabilities: _containers.ScalarMap[str, float]
    def __init__(self, features: _Optional[_Mapping[str, _struct_pb2.Value]] = ..., prediction: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., probabilities: _Optional[_Mapping[str, float]] = ...) -> None: ...

class Tensor(_message.Message):
    __slots__ = ("dtype", "shape", "values")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    dtype: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    values: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, dtype: _Optional[str] = ..., shape: _Optional[_Iterable[int]] = ..., values: _Optional[_Iterable[float]] = ...) -> None: ...

class MediaRef(_message.Message):
    __slots__ = ("uri", "mime_type", "sha256")
    URI_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    uri: str
    mime_type: str
    sha256: str
    def __init__(self, uri: _Optional[str] = ..., mime_type: _Optional[str] = ..., sha256: _Optional[str] = ...) -> None: ...

class Trajectory(_message.Message):
    __slots__ = ("steps", "stop_reason", "checks", "end_state")
    STEPS_FIELD_NUMBER: _ClassVar[int]
    STOP_REASON_FIELD_NUMBER: _ClassVar[int]
    CHECKS_FIELD_NUMBER: _ClassVar[int]
    END_STATE_FIELD_NUMBER: _ClassVar[int]
    steps: _containers.RepeatedCompositeFieldContainer[Step]
    stop_reason: str
    checks: _containers.RepeatedCompositeFieldContainer[Check]
    end_state: _struct_pb2.Value
    def __init__(self, steps: _Optional[_Iterable[_Union[Step, _Mapping]]] = ..., stop_reason: _Optional[str] = ..., checks: _Optional[_Iterable[_Union[Check, _Mapping]]] = ..., end_state: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class Check(_message.Message):
    __slots__ = ("name", "passed", "detail")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PASSED_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    name: str
    passed: bool
    detail: str
    def __init__(self, name: _Optional[str] = ..., passed: _Optional[bool] = ..., detail: _Optional[str] = ...) -> None: ...

class Step(_message.Message):
    __slots__ = ("kind", "name", "input", "output", "tool_call", "usage", "error", "start_time_unix_nano", "end_time_unix_nano", "span_id")
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    START_TIME_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    END_TIME_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    kind: StepKind
    name: str
    input: _struct_pb2.Value
    output: _struct_pb2.Value
    tool_call: ToolCall
    usage: Usage
    error: str
    start_time_unix_nano: int
    end_time_unix_nano: int
    span_id: str
    def __init__(self, kind: _Optional[_Union[StepKind, str]] = ..., name: _Optional[str] = ..., input: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., output: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., tool_call: _Optional[_Union[ToolCall, _Mapping]] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., error: _Optional[str] = ..., start_time_unix_nano: _Optional[int] = ..., end_time_unix_nano: _Optional[int] = ..., span_id: _Optional[str] = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ("input_tokens", "output_tokens", "total_tokens", "cost_usd", "latency_ms")
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_USD_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cost_usd: float
    latency_ms: float
    def __init__(self, input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., total_tokens: _Optional[int] = ..., cost_usd: _Optional[float] = ..., latency_ms: _Optional[float] = ...) -> None: ...

class Provenance(_message.Message):
    __slots__ = ("source", "dataset", "dataset_version", "line", "run_id", "trace_id", "span_id", "isolation")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    DATASET_VERSION_FIELD_NUMBER: _ClassVar[int]
    LINE_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_FIELD_NUMBER: _ClassVar[int]
    source: ProvenanceSource
    dataset: str
    dataset_version: str
    line: int
    run_id: str
    trace_id: str
    span_id: str
    isolation: IsolationReport
    def __init__(self, source: _Optional[_Union[ProvenanceSource, str]] = ..., dataset: _Optional[str] = ..., dataset_version: _Optional[str] = ..., line: _Optional[int] = ..., run_id: _Optional[str] = ..., trace_id: _Optional[str] = ..., span_id: _Optional[str] = ..., isolation: _Optional[_Union[IsolationReport, _Mapping]] = ...) -> None: ...

class IsolationReport(_message.Message):
    __slots__ = ("level", "driver", "details")
    class DetailsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    DRIVER_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    level: str
    driver: str
    details: _containers.ScalarMap[str, str]
    def __init__(self, level: _Optional[str] = ..., driver: _Optional[str] = ..., details: _Optional[_Mapping[str, str]] = ...) -> None: ...
