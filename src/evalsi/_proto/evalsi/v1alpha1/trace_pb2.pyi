import datetime

from evalsi._proto.evalsi.v1alpha1 import record_pb2 as _record_pb2
from evalsi._proto.evalsi.v1alpha1 import score_pb2 as _score_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Span(_message.Message):
    __slots__ = ("trace_id", "span_id", "parent_span_id", "name", "kind", "type", "service", "start_time", "end_time", "duration_ms", "status_code", "status_message", "attributes", "events", "resource", "scope_name", "scope_version", "view", "links")
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    STATUS_CODE_FIELD_NUMBER: _ClassVar[int]
    STATUS_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    SCOPE_NAME_FIELD_NUMBER: _ClassVar[int]
    SCOPE_VERSION_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    LINKS_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: int
    type: str
    service: str
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    duration_ms: float
    status_code: int
    status_message: str
    attributes: _struct_pb2.Struct
    events: _containers.RepeatedCompositeFieldContainer[SpanEvent]
    resource: _struct_pb2.Struct
    scope_name: str
    scope_version: str
    view: SpanView
    links: _containers.RepeatedCompositeFieldContainer[SpanLink]
    def __init__(self, trace_id: _Optional[str] = ..., span_id: _Optional[str] = ..., parent_span_id: _Optional[str] = ..., name: _Optional[str] = ..., kind: _Optional[int] = ..., type: _Optional[str] = ..., service: _Optional[str] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., duration_ms: _Optional[float] = ..., status_code: _Optional[int] = ..., status_message: _Optional[str] = ..., attributes: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., events: _Optional[_Iterable[_Union[SpanEvent, _Mapping]]] = ..., resource: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., scope_name: _Optional[str] = ..., scope_version: _Optional[str] = ..., view: _Optional[_Union[SpanView, _Mapping]] = ..., links: _Optional[_Iterable[_Union[SpanLink, _Mapping]]] = ...) -> None: ...

class SpanLink(_message.Message):
    __slots__ = ("trace_id", "span_id", "attributes")
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    span_id: str
    attributes: _struct_pb2.Struct
    def __init__(self, trace_id: _Optional[str] = ..., span_id: _Optional[str] = ..., attributes: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class SpanEvent(_message.Message):
    __slots__ = ("name", "time", "attributes")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    name: str
    time: _timestamp_pb2.Timestamp
    attributes: _struct_pb2.Struct
    def __init__(self, name: _Optional[str] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., attributes: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class SpanView(_message.Message):
    __slots__ = ("type", "convention", "name", "model", "input", "output", "tool_call", "documents", "usage", "session_id", "user_id")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    CONVENTION_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    type: str
    convention: str
    name: str
    model: str
    input: _struct_pb2.Value
    output: _struct_pb2.Value
    tool_call: _record_pb2.ToolCall
    documents: _containers.RepeatedScalarFieldContainer[str]
    usage: _record_pb2.Usage
    session_id: str
    user_id: str
    def __init__(self, type: _Optional[str] = ..., convention: _Optional[str] = ..., name: _Optional[str] = ..., model: _Optional[str] = ..., input: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., output: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., tool_call: _Optional[_Union[_record_pb2.ToolCall, _Mapping]] = ..., documents: _Optional[_Iterable[str]] = ..., usage: _Optional[_Union[_record_pb2.Usage, _Mapping]] = ..., session_id: _Optional[str] = ..., user_id: _Optional[str] = ...) -> None: ...

class TraceSummary(_message.Message):
    __slots__ = ("trace_id", "service", "root_name", "start_time", "end_time", "duration_ms", "span_count", "error", "session_id", "user_id", "input_preview", "output_preview", "complete_time", "scores")
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    ROOT_NAME_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    SPAN_COUNT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    INPUT_PREVIEW_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_PREVIEW_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_TIME_FIELD_NUMBER: _ClassVar[int]
    SCORES_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    service: str
    root_name: str
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    duration_ms: float
    span_count: int
    error: bool
    session_id: str
    user_id: str
    input_preview: str
    output_preview: str
    complete_time: _timestamp_pb2.Timestamp
    scores: _containers.RepeatedCompositeFieldContainer[TraceScore]
    def __init__(self, trace_id: _Optional[str] = ..., service: _Optional[str] = ..., root_name: _Optional[str] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., duration_ms: _Optional[float] = ..., span_count: _Optional[int] = ..., error: _Optional[bool] = ..., session_id: _Optional[str] = ..., user_id: _Optional[str] = ..., input_preview: _Optional[str] = ..., output_preview: _Optional[str] = ..., complete_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., scores: _Optional[_Iterable[_Union[TraceScore, _Mapping]]] = ...) -> None: ...

class TraceScore(_message.Message):
    __slots__ = ("policy", "run_id", "result")
    POLICY_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    policy: str
    run_id: str
    result: _score_pb2.EvaluationResult
    def __init__(self, policy: _Optional[str] = ..., run_id: _Optional[str] = ..., result: _Optional[_Union[_score_pb2.EvaluationResult, _Mapping]] = ...) -> None: ...

class Trace(_message.Message):
    __slots__ = ("trace_id", "summary", "spans", "feedback", "record")
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    SPANS_FIELD_NUMBER: _ClassVar[int]
    FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    RECORD_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    summary: TraceSummary
    spans: _containers.RepeatedCompositeFieldContainer[Span]
    feedback: _containers.RepeatedCompositeFieldContainer[Feedback]
    record: _struct_pb2.Struct
    def __init__(self, trace_id: _Optional[str] = ..., summary: _Optional[_Union[TraceSummary, _Mapping]] = ..., spans: _Optional[_Iterable[_Union[Span, _Mapping]]] = ..., feedback: _Optional[_Iterable[_Union[Feedback, _Mapping]]] = ..., record: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class Feedback(_message.Message):
    __slots__ = ("trace_id", "session_id", "name", "value", "label", "comment", "source", "time")
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    COMMENT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    session_id: str
    name: str
    value: float
    label: str
    comment: str
    source: str
    time: _timestamp_pb2.Timestamp
    def __init__(self, trace_id: _Optional[str] = ..., session_id: _Optional[str] = ..., name: _Optional[str] = ..., value: _Optional[float] = ..., label: _Optional[str] = ..., comment: _Optional[str] = ..., source: _Optional[str] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Session(_message.Message):
    __slots__ = ("session_id", "trace_count", "error_count", "first_start_time", "last_end_time", "user_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TRACE_COUNT_FIELD_NUMBER: _ClassVar[int]
    ERROR_COUNT_FIELD_NUMBER: _ClassVar[int]
    FIRST_START_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_END_TIME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    trace_count: int
    error_count: int
    first_start_time: _timestamp_pb2.Timestamp
    last_end_time: _timestamp_pb2.Timestamp
    user_id: str
    def __init__(self, session_id: _Optional[str] = ..., trace_count: _Optional[int] = ..., error_count: _Optional[int] = ..., first_start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., user_id: _Optional[str] = ...) -> None: ...
