from evalsi._proto.evalsi.v1alpha1 import run_pb2 as _run_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OnlineEvalPolicy(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "spec")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: _run_pb2.ObjectMeta
    spec: OnlineEvalPolicySpec
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[_run_pb2.ObjectMeta, _Mapping]] = ..., spec: _Optional[_Union[OnlineEvalPolicySpec, _Mapping]] = ...) -> None: ...

class OnlineEvalPolicySpec(_message.Message):
    __slots__ = ("selector", "sampling", "cascade", "on_feedback", "window", "alerts", "promote", "judges", "sinks")
    class JudgesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _run_pb2.Judge
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_run_pb2.Judge, _Mapping]] = ...) -> None: ...
    SELECTOR_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_FIELD_NUMBER: _ClassVar[int]
    CASCADE_FIELD_NUMBER: _ClassVar[int]
    ON_FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    ALERTS_FIELD_NUMBER: _ClassVar[int]
    PROMOTE_FIELD_NUMBER: _ClassVar[int]
    JUDGES_FIELD_NUMBER: _ClassVar[int]
    SINKS_FIELD_NUMBER: _ClassVar[int]
    selector: str
    sampling: Sampling
    cascade: _containers.RepeatedCompositeFieldContainer[CascadeStep]
    on_feedback: _containers.RepeatedCompositeFieldContainer[CascadeStep]
    window: str
    alerts: _containers.RepeatedCompositeFieldContainer[Alert]
    promote: Promote
    judges: _containers.MessageMap[str, _run_pb2.Judge]
    sinks: _containers.RepeatedCompositeFieldContainer[_run_pb2.Sink]
    def __init__(self, selector: _Optional[str] = ..., sampling: _Optional[_Union[Sampling, _Mapping]] = ..., cascade: _Optional[_Iterable[_Union[CascadeStep, _Mapping]]] = ..., on_feedback: _Optional[_Iterable[_Union[CascadeStep, _Mapping]]] = ..., window: _Optional[str] = ..., alerts: _Optional[_Iterable[_Union[Alert, _Mapping]]] = ..., promote: _Optional[_Union[Promote, _Mapping]] = ..., judges: _Optional[_Mapping[str, _run_pb2.Judge]] = ..., sinks: _Optional[_Iterable[_Union[_run_pb2.Sink, _Mapping]]] = ...) -> None: ...

class Sampling(_message.Message):
    __slots__ = ("rate", "always")
    RATE_FIELD_NUMBER: _ClassVar[int]
    ALWAYS_FIELD_NUMBER: _ClassVar[int]
    rate: float
    always: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, rate: _Optional[float] = ..., always: _Optional[_Iterable[str]] = ...) -> None: ...

class CascadeStep(_message.Message):
    __slots__ = ("ref", "name", "params", "when")
    REF_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    WHEN_FIELD_NUMBER: _ClassVar[int]
    ref: str
    name: str
    params: _struct_pb2.Struct
    when: str
    def __init__(self, ref: _Optional[str] = ..., name: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., when: _Optional[str] = ...) -> None: ...

class Alert(_message.Message):
    __slots__ = ("name", "when", "notify", "cooldown")
    NAME_FIELD_NUMBER: _ClassVar[int]
    WHEN_FIELD_NUMBER: _ClassVar[int]
    NOTIFY_FIELD_NUMBER: _ClassVar[int]
    COOLDOWN_FIELD_NUMBER: _ClassVar[int]
    name: str
    when: str
    notify: str
    cooldown: str
    def __init__(self, name: _Optional[str] = ..., when: _Optional[str] = ..., notify: _Optional[str] = ..., cooldown: _Optional[str] = ...) -> None: ...

class Promote(_message.Message):
    __slots__ = ("when", "dataset")
    WHEN_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    when: str
    dataset: str
    def __init__(self, when: _Optional[str] = ..., dataset: _Optional[str] = ...) -> None: ...
