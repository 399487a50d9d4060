from evalsi._proto.evalsi.v1alpha1 import score_pb2 as _score_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Scope(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SCOPE_UNSPECIFIED: _ClassVar[Scope]
    SCOPE_RECORD: _ClassVar[Scope]
    SCOPE_DATASET: _ClassVar[Scope]
    SCOPE_SPAN: _ClassVar[Scope]
    SCOPE_SESSION: _ClassVar[Scope]
    SCOPE_COMPARATIVE: _ClassVar[Scope]
SCOPE_UNSPECIFIED: Scope
SCOPE_RECORD: Scope
SCOPE_DATASET: Scope
SCOPE_SPAN: Scope
SCOPE_SESSION: Scope
SCOPE_COMPARATIVE: Scope

class EvaluatorRef(_message.Message):
    __slots__ = ("namespace", "name", "version")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    version: str
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ..., version: _Optional[str] = ...) -> None: ...

class Range(_message.Message):
    __slots__ = ("low", "high")
    LOW_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    low: float
    high: float
    def __init__(self, low: _Optional[float] = ..., high: _Optional[float] = ...) -> None: ...

class OutputSpec(_message.Message):
    __slots__ = ("name", "type", "range", "higher_is_better", "description")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    RANGE_FIELD_NUMBER: _ClassVar[int]
    HIGHER_IS_BETTER_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    name: str
    type: _score_pb2.ScoreKind
    range: Range
    higher_is_better: bool
    description: str
    def __init__(self, name: _Optional[str] = ..., type: _Optional[_Union[_score_pb2.ScoreKind, str]] = ..., range: _Optional[_Union[Range, _Mapping]] = ..., higher_is_better: _Optional[bool] = ..., description: _Optional[str] = ...) -> None: ...

class EvaluatorManifest(_message.Message):
    __slots__ = ("ref", "scope", "requires", "outputs", "params_schema", "description", "example", "pack", "batchable")
    REF_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    REQUIRES_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    PARAMS_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    EXAMPLE_FIELD_NUMBER: _ClassVar[int]
    PACK_FIELD_NUMBER: _ClassVar[int]
    BATCHABLE_FIELD_NUMBER: _ClassVar[int]
    ref: EvaluatorRef
    scope: Scope
    requires: _containers.RepeatedScalarFieldContainer[str]
    outputs: _containers.RepeatedCompositeFieldContainer[OutputSpec]
    params_schema: _struct_pb2.Struct
    description: str
    example: str
    pack: str
    batchable: bool
    def __init__(self, ref: _Optional[_Union[EvaluatorRef, _Mapping]] = ..., scope: _Optional[_Union[Scope, str]] = ..., requires: _Optional[_Iterable[str]] = ..., outputs: _Optional[_Iterable[_Union[OutputSpec, _Mapping]]] = ..., params_schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., description: _Optional[str] = ..., example: _Optional[str] = ..., pack: _Optional[str] = ..., batchable: _Optional[bool] = ...) -> None: ...
