import datetime

from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TraceSelector(_message.Message):
    __slots__ = ("negative_feedback", "start_time", "end_time", "service")
    NEGATIVE_FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    negative_feedback: bool
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    service: str
    def __init__(self, negative_feedback: _Optional[bool] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., service: _Optional[str] = ...) -> None: ...

class PromoteRequest(_message.Message):
    __slots__ = ("project_id", "dataset", "run_id", "traces", "failing_only", "evaluators", "first_trial_only", "limit")
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TRACES_FIELD_NUMBER: _ClassVar[int]
    FAILING_ONLY_FIELD_NUMBER: _ClassVar[int]
    EVALUATORS_FIELD_NUMBER: _ClassVar[int]
    FIRST_TRIAL_ONLY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    project_id: str
    dataset: str
    run_id: str
    traces: TraceSelector
    failing_only: bool
    evaluators: _containers.RepeatedScalarFieldContainer[str]
    first_trial_only: bool
    limit: int
    def __init__(self, project_id: _Optional[str] = ..., dataset: _Optional[str] = ..., run_id: _Optional[str] = ..., traces: _Optional[_Union[TraceSelector, _Mapping]] = ..., failing_only: _Optional[bool] = ..., evaluators: _Optional[_Iterable[str]] = ..., first_trial_only: _Optional[bool] = ..., limit: _Optional[int] = ...) -> None: ...

class PromoteResponse(_message.Message):
    __slots__ = ("dataset", "version", "path", "rows_added", "rows_skipped", "scanned")
    DATASET_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    ROWS_ADDED_FIELD_NUMBER: _ClassVar[int]
    ROWS_SKIPPED_FIELD_NUMBER: _ClassVar[int]
    SCANNED_FIELD_NUMBER: _ClassVar[int]
    dataset: str
    version: str
    path: str
    rows_added: int
    rows_skipped: int
    scanned: int
    def __init__(self, dataset: _Optional[str] = ..., version: _Optional[str] = ..., path: _Optional[str] = ..., rows_added: _Optional[int] = ..., rows_skipped: _Optional[int] = ..., scanned: _Optional[int] = ...) -> None: ...
