from evalsi._proto.evalsi.v1alpha1 import evaluator_pb2 as _evaluator_pb2
from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ListEvaluatorsRequest(_message.Message):
    __slots__ = ("pack",)
    PACK_FIELD_NUMBER: _ClassVar[int]
    pack: str
    def __init__(self, pack: _Optional[str] = ...) -> None: ...

class ListEvaluatorsResponse(_message.Message):
    __slots__ = ("evaluators",)
    EVALUATORS_FIELD_NUMBER: _ClassVar[int]
    evaluators: _containers.RepeatedCompositeFieldContainer[_evaluator_pb2.EvaluatorManifest]
    def __init__(self, evaluators: _Optional[_Iterable[_Union[_evaluator_pb2.EvaluatorManifest, _Mapping]]] = ...) -> None: ...

class GetEvaluatorRequest(_message.Message):
    __slots__ = ("ref",)
    REF_FIELD_NUMBER: _ClassVar[int]
    ref: str
    def __init__(self, ref: _Optional[str] = ...) -> None: ...

class GetEvaluatorResponse(_message.Message):
    __slots__ = ("evaluator",)
    EVALUATOR_FIELD_NUMBER: _ClassVar[int]
    evaluator: _evaluator_pb2.EvaluatorManifest
    def __init__(self, evaluator: _Optional[_Union[_evaluator_pb2.EvaluatorManifest, _Mapping]] = ...) -> None: ...

class ListPacksRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Pack(_message.Message):
    __slots__ = ("name", "description", "evaluators", "extra", "enabled")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    EVALUATORS_FIELD_NUMBER: _ClassVar[int]
    EXTRA_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    evaluators: _containers.RepeatedScalarFieldContainer[str]
    extra: str
    enabled: bool
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., evaluators: _Optional[_Iterable[str]] = ..., extra: _Optional[str] = ..., enabled: _Optional[bool] = ...) -> None: ...

class ListPacksResponse(_message.Message):
    __slots__ = ("packs",)
    PACKS_FIELD_NUMBER: _ClassVar[int]
    packs: _containers.RepeatedCompositeFieldContainer[Pack]
    def __init__(self, packs: _Optional[_Iterable[_Union[Pack, _Mapping]]] = ...) -> None: ...

class ListConnectorsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Connector(_message.Message):
    __slots__ = ("name", "roles", "description")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ROLES_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    name: str
    roles: str
    description: str
    def __init__(self, name: _Optional[str] = ..., roles: _Optional[str] = ..., description: _Optional[str] = ...) -> None: ...

class ListConnectorsResponse(_message.Message):
    __slots__ = ("connectors",)
    CONNECTORS_FIELD_NUMBER: _ClassVar[int]
    connectors: _containers.RepeatedCompositeFieldContainer[Connector]
    def __init__(self, connectors: _Optional[_Iterable[_Union[Connector, _Mapping]]] = ...) -> None: ...
