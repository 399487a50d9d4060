import datetime

from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ExportReviewRequest(_message.Message):
    __slots__ = ("id", "project_id", "evaluators", "only_failing", "limit")
    ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    EVALUATORS_FIELD_NUMBER: _ClassVar[int]
    ONLY_FAILING_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    id: str
    project_id: str
    evaluators: _containers.RepeatedScalarFieldContainer[str]
    only_failing: bool
    limit: int
    def __init__(self, id: _Optional[str] = ..., project_id: _Optional[str] = ..., evaluators: _Optional[_Iterable[str]] = ..., only_failing: _Optional[bool] = ..., limit: _Optional[int] = ...) -> None: ...

class ExportReviewResponse(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    def __init__(self, data: _Optional[bytes] = ...) -> None: ...

class ImportReviewRequest(_message.Message):
    __slots__ = ("project_id", "file")
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    FILE_FIELD_NUMBER: _ClassVar[int]
    project_id: str
    file: bytes
    def __init__(self, project_id: _Optional[str] = ..., file: _Optional[bytes] = ...) -> None: ...

class Refused(_message.Message):
    __slots__ = ("line", "item", "reason")
    LINE_FIELD_NUMBER: _ClassVar[int]
    ITEM_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    line: int
    item: str
    reason: str
    def __init__(self, line: _Optional[int] = ..., item: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ImportReviewResponse(_message.Message):
    __slots__ = ("run_id", "accepted", "refused", "skipped")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    accepted: _containers.RepeatedCompositeFieldContainer[Review]
    refused: _containers.RepeatedCompositeFieldContainer[Refused]
    skipped: int
    def __init__(self, run_id: _Optional[str] = ..., accepted: _Optional[_Iterable[_Union[Review, _Mapping]]] = ..., refused: _Optional[_Iterable[_Union[Refused, _Mapping]]] = ..., skipped: _Optional[int] = ...) -> None: ...

class ListReviewsRequest(_message.Message):
    __slots__ = ("id", "project_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    project_id: str
    def __init__(self, id: _Optional[str] = ..., project_id: _Optional[str] = ...) -> None: ...

class ListReviewsResponse(_message.Message):
    __slots__ = ("run_id", "reviews")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    REVIEWS_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    reviews: _containers.RepeatedCompositeFieldContainer[Review]
    def __init__(self, run_id: _Optional[str] = ..., reviews: _Optional[_Iterable[_Union[Review, _Mapping]]] = ...) -> None: ...

class Review(_message.Message):
    __slots__ = ("run_id", "seq", "trial", "record_id", "evaluator", "evaluator_index", "reviewer", "approval", "verdict", "rationale", "fingerprint", "import_time")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TRIAL_FIELD_NUMBER: _ClassVar[int]
    RECORD_ID_FIELD_NUMBER: _ClassVar[int]
    EVALUATOR_FIELD_NUMBER: _ClassVar[int]
    EVALUATOR_INDEX_FIELD_NUMBER: _ClassVar[int]
    REVIEWER_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    RATIONALE_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    IMPORT_TIME_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    seq: int
    trial: int
    record_id: str
    evaluator: str
    evaluator_index: int
    reviewer: str
    approval: str
    verdict: _struct_pb2.Value
    rationale: str
    fingerprint: str
    import_time: _timestamp_pb2.Timestamp
    def __init__(self, run_id: _Optional[str] = ..., seq: _Optional[int] = ..., trial: _Optional[int] = ..., record_id: _Optional[str] = ..., evaluator: _Optional[str] = ..., evaluator_index: _Optional[int] = ..., reviewer: _Optional[str] = ..., approval: _Optional[str] = ..., verdict: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., rationale: _Optional[str] = ..., fingerprint: _Optional[str] = ..., import_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
