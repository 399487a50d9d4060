from evalsi._proto.evalsi.v1alpha1 import evaluator_pb2 as _evaluator_pb2
from evalsi._proto.evalsi.v1alpha1 import record_pb2 as _record_pb2
from evalsi._proto.evalsi.v1alpha1 import score_pb2 as _score_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DescribeRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeResponse(_message.Message):
    __slots__ = ("name", "version", "evaluators")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    EVALUATORS_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    evaluators: _containers.RepeatedCompositeFieldContainer[_evaluator_pb2.EvaluatorManifest]
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., evaluators: _Optional[_Iterable[_Union[_evaluator_pb2.EvaluatorManifest, _Mapping]]] = ...) -> None: ...

class EvaluateRequest(_message.Message):
    __slots__ = ("batch_id", "evaluator", "params", "records", "judge")
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    EVALUATOR_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    JUDGE_FIELD_NUMBER: _ClassVar[int]
    batch_id: str
    evaluator: _evaluator_pb2.EvaluatorRef
    params: _struct_pb2.Struct
    records: _containers.RepeatedCompositeFieldContainer[_record_pb2.Record]
    judge: JudgeEndpoint
    def __init__(self, batch_id: _Optional[str] = ..., evaluator: _Optional[_Union[_evaluator_pb2.EvaluatorRef, _Mapping]] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., records: _Optional[_Iterable[_Union[_record_pb2.Record, _Mapping]]] = ..., judge: _Optional[_Union[JudgeEndpoint, _Mapping]] = ...) -> None: ...

class JudgeEndpoint(_message.Message):
    __slots__ = ("name", "base_url", "model", "api_key")
    NAME_FIELD_NUMBER: _ClassVar[int]
    BASE_URL_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    API_KEY_FIELD_NUMBER: _ClassVar[int]
    name: str
    base_url: str
    model: str
    api_key: str
    def __init__(self, name: _Optional[str] = ..., base_url: _Optional[str] = ..., model: _Optional[str] = ..., api_key: _Optional[str] = ...) -> None: ...

class EvaluateResponse(_message.Message):
    __slots__ = ("batch_id", "results", "infra_error")
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    INFRA_ERROR_FIELD_NUMBER: _ClassVar[int]
    batch_id: str
    results: _containers.RepeatedCompositeFieldContainer[_score_pb2.EvaluationResult]
    infra_error: str
    def __init__(self, batch_id: _Optional[str] = ..., results: _Optional[_Iterable[_Union[_score_pb2.EvaluationResult, _Mapping]]] = ..., infra_error: _Optional[str] = ...) -> None: ...

class ReduceRequest(_message.Message):
    __slots__ = ("evaluator", "params", "records", "partials")
    EVALUATOR_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    PARTIALS_FIELD_NUMBER: _ClassVar[int]
    evaluator: _evaluator_pb2.EvaluatorRef
    params: _struct_pb2.Struct
    records: _containers.RepeatedCompositeFieldContainer[_record_pb2.Record]
    partials: _containers.RepeatedCompositeFieldContainer[_score_pb2.EvaluationResult]
    def __init__(self, evaluator: _Optional[_Union[_evaluator_pb2.EvaluatorRef, _Mapping]] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., records: _Optional[_Iterable[_Union[_record_pb2.Record, _Mapping]]] = ..., partials: _Optional[_Iterable[_Union[_score_pb2.EvaluationResult, _Mapping]]] = ...) -> None: ...

class ReduceResponse(_message.Message):
    __slots__ = ("result", "infra_error")
    RESULT_FIELD_NUMBER: _ClassVar[int]
    INFRA_ERROR_FIELD_NUMBER: _ClassVar[int]
    result: _score_pb2.EvaluationResult
    infra_error: str
    def __init__(self, result: _Optional[_Union[_score_pb2.EvaluationResult, _Mapping]] = ..., infra_error: _Optional[str] = ...) -> None: ...
