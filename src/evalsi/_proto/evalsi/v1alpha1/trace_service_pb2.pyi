import datetime

from evalsi._proto.evalsi.v1alpha1 import trace_pb2 as _trace_pb2
from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ListTracesRequest(_message.Message):
    __slots__ = ("project_id", "page_size", "page_token", "service", "since", "until", "session_id", "error", "attributes", "name")
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    project_id: str
    page_size: int
    page_token: str
    service: str
    since: _timestamp_pb2.Timestamp
    until: _timestamp_pb2.Timestamp
    session_id: str
    error: bool
    attributes: _containers.RepeatedScalarFieldContainer[str]
    name: str
    def __init__(self, project_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., service: _Optional[str] = ..., since: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., session_id: _Optional[str] = ..., error: _Optional[bool] = ..., attributes: _Optional[_Iterable[str]] = ..., name: _Optional[str] = ...) -> None: ...

class ListTracesResponse(_message.Message):
    __slots__ = ("traces", "next_page_token")
    TRACES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    traces: _containers.RepeatedCompositeFieldContainer[_trace_pb2.TraceSummary]
    next_page_token: str
    def __init__(self, traces: _Optional[_Iterable[_Union[_trace_pb2.TraceSummary, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetTraceRequest(_message.Message):
    __slots__ = ("project_id", "trace_id")
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    project_id: str
    trace_id: str
    def __init__(self, project_id: _Optional[str] = ..., trace_id: _Optional[str] = ...) -> None: ...

class GetTraceResponse(_message.Message):
    __slots__ = ("trace",)
    TRACE_FIELD_NUMBER: _ClassVar[int]
    trace: _trace_pb2.Trace
    def __init__(self, trace: _Optional[_Union[_trace_pb2.Trace, _Mapping]] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ("project_id", "page_size", "page_token", "service", "since", "until", "user_id")
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    project_id: str
    page_size: int
    page_token: str
    service: str
    since: _timestamp_pb2.Timestamp
    until: _timestamp_pb2.Timestamp
    user_id: str
    def __init__(self, project_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., service: _Optional[str] = ..., since: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., user_id: _Optional[str] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ("sessions", "next_page_token")
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[_trace_pb2.Session]
    next_page_token: str
    def __init__(self, sessions: _Optional[_Iterable[_Union[_trace_pb2.Session, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListSpansRequest(_message.Message):
    __slots__ = ("project_id", "page_size", "page_token", "trace_id", "type", "name", "service", "since", "until", "error")
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    project_id: str
    page_size: int
    page_token: str
    trace_id: str
    type: str
    name: str
    service: str
    since: _timestamp_pb2.Timestamp
    until: _timestamp_pb2.Timestamp
    error: bool
    def __init__(self, project_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., trace_id: _Optional[str] = ..., type: _Optional[str] = ..., name: _Optional[str] = ..., service: _Optional[str] = ..., since: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., error: _Optional[bool] = ...) -> None: ...

class ListSpansResponse(_message.Message):
    __slots__ = ("spans", "next_page_token")
    SPANS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    spans: _containers.RepeatedCompositeFieldContainer[_trace_pb2.Span]
    next_page_token: str
    def __init__(self, spans: _Optional[_Iterable[_Union[_trace_pb2.Span, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class PostFeedbackRequest(_message.Message):
    __slots__ = ("project_id", "feedback")
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    project_id: str
    feedback: _trace_pb2.Feedback
    def __init__(self, project_id: _Optional[str] = ..., feedback: _Optional[_Union[_trace_pb2.Feedback, _Mapping]] = ...) -> None: ...

class PostFeedbackResponse(_message.Message):
    __slots__ = ("feedback",)
    FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    feedback: _trace_pb2.Feedback
    def __init__(self, feedback: _Optional[_Union[_trace_pb2.Feedback, _Mapping]] = ...) -> None: ...
