from evalsi._proto.evalsi.v1alpha1 import record_pb2 as _record_pb2
from evalsi._proto.evalsi.v1alpha1 import score_pb2 as _score_pb2
from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EvaluatorSpec(_message.Message):
    __slots__ = ("ref", "params", "name")
    REF_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ref: str
    params: _struct_pb2.Struct
    name: str
    def __init__(self, ref: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., name: _Optional[str] = ...) -> None: ...

class EvaluateOptions(_message.Message):
    __slots__ = ("concurrency", "ci_method", "seed")
    CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    CI_METHOD_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    concurrency: int
    ci_method: str
    seed: int
    def __init__(self, concurrency: _Optional[int] = ..., ci_method: _Optional[str] = ..., seed: _Optional[int] = ...) -> None: ...

class EvaluateRequest(_message.Message):
    __slots__ = ("records", "evaluators", "cluster_by", "options", "name", "gates", "min_completion_rate", "max_evaluator_error_rate", "project_id", "warnings", "dataset_version")
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    EVALUATORS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_BY_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    GATES_FIELD_NUMBER: _ClassVar[int]
    MIN_COMPLETION_RATE_FIELD_NUMBER: _ClassVar[int]
    MAX_EVALUATOR_ERROR_RATE_FIELD_NUMBER: _ClassVar[int]
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    DATASET_VERSION_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[_record_pb2.Record]
    evaluators: _containers.RepeatedCompositeFieldContainer[EvaluatorSpec]
    cluster_by: str
    options: EvaluateOptions
    name: str
    gates: _containers.RepeatedScalarFieldContainer[str]
    min_completion_rate: float
    max_evaluator_error_rate: float
    project_id: str
    warnings: _containers.RepeatedCompositeFieldContainer[_score_pb2.RunWarning]
    dataset_version: str
    def __init__(self, records: _Optional[_Iterable[_Union[_record_pb2.Record, _Mapping]]] = ..., evaluators: _Optional[_Iterable[_Union[EvaluatorSpec, _Mapping]]] = ..., cluster_by: _Optional[str] = ..., options: _Optional[_Union[EvaluateOptions, _Mapping]] = ..., name: _Optional[str] = ..., gates: _Optional[_Iterable[str]] = ..., min_completion_rate: _Optional[float] = ..., max_evaluator_error_rate: _Optional[float] = ..., project_id: _Optional[str] = ..., warnings: _Optional[_Iterable[_Union[_score_pb2.RunWarning, _Mapping]]] = ..., dataset_version: _Optional[str] = ...) -> None: ...

class EvaluateResponse(_message.Message):
    __slots__ = ("run_id", "results", "metrics", "dataset_version", "records", "status", "gates", "warnings")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    DATASET_VERSION_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    GATES_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    results: _containers.RepeatedCompositeFieldContainer[_score_pb2.EvaluationResult]
    metrics: _containers.RepeatedCompositeFieldContainer[_score_pb2.MetricSummary]
    dataset_version: str
    records: int
    status: str
    gates: _containers.RepeatedCompositeFieldContainer[_score_pb2.GateResult]
    warnings: _containers.RepeatedCompositeFieldContainer[_score_pb2.RunWarning]
    def __init__(self, run_id: _Optional[str] = ..., results: _Optional[_Iterable[_Union[_score_pb2.EvaluationResult, _Mapping]]] = ..., metrics: _Optional[_Iterable[_Union[_score_pb2.MetricSummary, _Mapping]]] = ..., dataset_version: _Optional[str] = ..., records: _Optional[int] = ..., status: _Optional[str] = ..., gates: _Optional[_Iterable[_Union[_score_pb2.GateResult, _Mapping]]] = ..., warnings: _Optional[_Iterable[_Union[_score_pb2.RunWarning, _Mapping]]] = ...) -> None: ...

class EvaluateStreamConfig(_message.Message):
    __slots__ = ("evaluators", "cluster_by", "options", "name", "gates", "min_completion_rate", "max_evaluator_error_rate", "project_id", "warnings", "dataset_version")
    EVALUATORS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_BY_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    GATES_FIELD_NUMBER: _ClassVar[int]
    MIN_COMPLETION_RATE_FIELD_NUMBER: _ClassVar[int]
    MAX_EVALUATOR_ERROR_RATE_FIELD_NUMBER: _ClassVar[int]
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    DATASET_VERSION_FIELD_NUMBER: _ClassVar[int]
    evaluators: _containers.RepeatedCompositeFieldContainer[EvaluatorSpec]
    cluster_by: str
    options: EvaluateOptions
    name: str
    gates: _containers.RepeatedScalarFieldContainer[str]
    min_completion_rate: float
    max_evaluator_error_rate: float
    project_id: str
    warnings: _containers.RepeatedCompositeFieldContainer[_score_pb2.RunWarning]
    dataset_version: str
    def __init__(self, evaluators: _Optional[_Iterable[_Union[EvaluatorSpec, _Mapping]]] = ..., cluster_by: _Optional[str] = ..., options: _Optional[_Union[EvaluateOptions, _Mapping]] = ..., name: _Optional[str] = ..., gates: _Optional[_Iterable[str]] = ..., min_completion_rate: _Optional[float] = ..., max_evaluator_error_rate: _Optional[float] = ..., project_id: _Optional[str] = ..., warnings: _Optional[_Iterable[_Union[_score_pb2.RunWarning, _Mapping]]] = ..., dataset_version: _Optional[str] = ...) -> None: ...

class EvaluateStreamRequest(_message.Message):
    __slots__ = ("config", "records")
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    config: EvaluateStreamConfig
    records: _containers.RepeatedCompositeFieldContainer[_record_pb2.Record]
    def __init__(self, config: _Optional[_Union[EvaluateStreamConfig, _Mapping]] = ..., records: _Optional[_Iterable[_Union[_record_pb2.Record, _Mapping]]] = ...) -> None: ...

class EvaluateStreamResponse(_message.Message):
    __slots__ = ("run_id", "results", "metrics", "dataset_version", "gates", "warnings")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    DATASET_VERSION_FIELD_NUMBER: _ClassVar[int]
    GATES_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    results: _containers.RepeatedCompositeFieldContainer[_score_pb2.EvaluationResult]
    metrics: _containers.RepeatedCompositeFieldContainer[_score_pb2.MetricSummary]
    dataset_version: str
    gates: _containers.RepeatedCompositeFieldContainer[_score_pb2.GateResult]
    warnings: _containers.RepeatedCompositeFieldContainer[_score_pb2.RunWarning]
    def __init__(self, run_id: _Optional[str] = ..., results: _Optional[_Iterable[_Union[_score_pb2.EvaluationResult, _Mapping]]] = ..., metrics: _Optional[_Iterable[_Union[_score_pb2.MetricSummary, _Mapping]]] = ..., dataset_version: _Optional[str] = ..., gates: _Optional[_Iterable[_Union[_score_pb2.GateResult, _Mapping]]] = ..., warnings: _Optional[_Iterable[_Union[_score_pb2.RunWarning, _Mapping]]] = ...) -> None: ...
