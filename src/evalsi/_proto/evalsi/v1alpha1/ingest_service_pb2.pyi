from evalsi._proto.evalsi.v1alpha1 import evaluator_pb2 as _evaluator_pb2
from evalsi._proto.evalsi.v1alpha1 import record_pb2 as _record_pb2
from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as _run_service_pb2
from evalsi._proto.evalsi.v1alpha1 import score_pb2 as _score_pb2
from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ExternalEvaluator(_message.Message):
    __slots__ = ("name", "ref", "version", "description", "outputs")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    ref: str
    version: str
    description: str
    outputs: _containers.RepeatedCompositeFieldContainer[_evaluator_pb2.OutputSpec]
    def __init__(self, name: _Optional[str] = ..., ref: _Optional[str] = ..., version: _Optional[str] = ..., description: _Optional[str] = ..., outputs: _Optional[_Iterable[_Union[_evaluator_pb2.OutputSpec, _Mapping]]] = ...) -> None: ...

class ExternalSource(_message.Message):
    __slots__ = ("tool", "tool_version", "description", "dataset_name", "dataset_version")
    TOOL_FIELD_NUMBER: _ClassVar[int]
    TOOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    DATASET_NAME_FIELD_NUMBER: _ClassVar[int]
    DATASET_VERSION_FIELD_NUMBER: _ClassVar[int]
    tool: str
    tool_version: str
    description: str
    dataset_name: str
    dataset_version: str
    def __init__(self, tool: _Optional[str] = ..., tool_version: _Optional[str] = ..., description: _Optional[str] = ..., dataset_name: _Optional[str] = ..., dataset_version: _Optional[str] = ...) -> None: ...

class IngestRecord(_message.Message):
    __slots__ = ("record", "results")
    RECORD_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    record: _record_pb2.Record
    results: _containers.RepeatedCompositeFieldContainer[_score_pb2.EvaluationResult]
    def __init__(self, record: _Optional[_Union[_record_pb2.Record, _Mapping]] = ..., results: _Optional[_Iterable[_Union[_score_pb2.EvaluationResult, _Mapping]]] = ...) -> None: ...

class IngestRequest(_message.Message):
    __slots__ = ("client_key", "project_id", "name", "evaluators", "source", "records")
    CLIENT_KEY_FIELD_NUMBER: _ClassVar[int]
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    EVALUATORS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    client_key: str
    project_id: str
    name: str
    evaluators: _containers.RepeatedCompositeFieldContainer[ExternalEvaluator]
    source: ExternalSource
    records: _containers.RepeatedCompositeFieldContainer[IngestRecord]
    def __init__(self, client_key: _Optional[str] = ..., project_id: _Optional[str] = ..., name: _Optional[str] = ..., evaluators: _Optional[_Iterable[_Union[ExternalEvaluator, _Mapping]]] = ..., source: _Optional[_Union[ExternalSource, _Mapping]] = ..., records: _Optional[_Iterable[_Union[IngestRecord, _Mapping]]] = ...) -> None: ...

class IngestResponse(_message.Message):
    __slots__ = ("run", "already_finalized")
    RUN_FIELD_NUMBER: _ClassVar[int]
    ALREADY_FINALIZED_FIELD_NUMBER: _ClassVar[int]
    run: _run_service_pb2.Run
    already_finalized: bool
    def __init__(self, run: _Optional[_Union[_run_service_pb2.Run, _Mapping]] = ..., already_finalized: _Optional[bool] = ...) -> None: ...

class StartIngestRequest(_message.Message):
    __slots__ = ("client_key", "project_id", "name", "evaluators", "source")
    CLIENT_KEY_FIELD_NUMBER: _ClassVar[int]
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    EVALUATORS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    client_key: str
    project_id: str
    name: str
    evaluators: _containers.RepeatedCompositeFieldContainer[ExternalEvaluator]
    source: ExternalSource
    def __init__(self, client_key: _Optional[str] = ..., project_id: _Optional[str] = ..., name: _Optional[str] = ..., evaluators: _Optional[_Iterable[_Union[ExternalEvaluator, _Mapping]]] = ..., source: _Optional[_Union[ExternalSource, _Mapping]] = ...) -> None: ...

class StartIngestResponse(_message.Message):
    __slots__ = ("run_id", "already_finalized", "run")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    ALREADY_FINALIZED_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    already_finalized: bool
    run: _run_service_pb2.Run
    def __init__(self, run_id: _Optional[str] = ..., already_finalized: _Optional[bool] = ..., run: _Optional[_Union[_run_service_pb2.Run, _Mapping]] = ...) -> None: ...

class AppendIngestRequest(_message.Message):
    __slots__ = ("run_id", "project_id", "offset", "records")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    project_id: str
    offset: int
    records: _containers.RepeatedCompositeFieldContainer[IngestRecord]
    def __init__(self, run_id: _Optional[str] = ..., project_id: _Optional[str] = ..., offset: _Optional[int] = ..., records: _Optional[_Iterable[_Union[IngestRecord, _Mapping]]] = ...) -> None: ...

class AppendIngestResponse(_message.Message):
    __slots__ = ("run_id", "records")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    records: int
    def __init__(self, run_id: _Optional[str] = ..., records: _Optional[int] = ...) -> None: ...

class FinalizeIngestRequest(_message.Message):
    __slots__ = ("run_id", "project_id")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    project_id: str
    def __init__(self, run_id: _Optional[str] = ..., project_id: _Optional[str] = ...) -> None: ...

class FinalizeIngestResponse(_message.Message):
    __slots__ = ("run", "already_finalized")
    RUN_FIELD_NUMBER: _ClassVar[int]
    ALREADY_FINALIZED_FIELD_NUMBER: _ClassVar[int]
    run: _run_service_pb2.Run
    already_finalized: bool
    def __init__(self, run: _Optional[_Union[_run_service_pb2.Run, _Mapping]] = ..., already_finalized: _Optional[bool] = ...) -> None: ...
