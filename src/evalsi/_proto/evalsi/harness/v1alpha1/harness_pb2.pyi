from evalsi._proto.evalsi.v1alpha1 import record_pb2 as _record_pb2
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
    __slots__ = ("name", "version", "tools")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    tools: _containers.RepeatedCompositeFieldContainer[ToolInfo]
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[ToolInfo, _Mapping]]] = ...) -> None: ...

class ToolInfo(_message.Message):
    __slots__ = ("name", "description", "permission", "data_class", "reversible", "exposure")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_FIELD_NUMBER: _ClassVar[int]
    DATA_CLASS_FIELD_NUMBER: _ClassVar[int]
    REVERSIBLE_FIELD_NUMBER: _ClassVar[int]
    EXPOSURE_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    permission: str
    data_class: str
    reversible: bool
    exposure: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., permission: _Optional[str] = ..., data_class: _Optional[str] = ..., reversible: _Optional[bool] = ..., exposure: _Optional[str] = ...) -> None: ...

class SetupRequest(_message.Message):
    __slots__ = ("run_id", "task_id", "trial", "seed", "input", "fixtures", "workspace", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _struct_pb2.Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TRIAL_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    FIXTURES_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    task_id: str
    trial: int
    seed: int
    input: _record_pb2.Content
    fixtures: _struct_pb2.Value
    workspace: str
    metadata: _containers.MessageMap[str, _struct_pb2.Value]
    def __init__(self, run_id: _Optional[str] = ..., task_id: _Optional[str] = ..., trial: _Optional[int] = ..., seed: _Optional[int] = ..., input: _Optional[_Union[_record_pb2.Content, _Mapping]] = ..., fixtures: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., workspace: _Optional[str] = ..., metadata: _Optional[_Mapping[str, _struct_pb2.Value]] = ...) -> None: ...

class SetupResponse(_message.Message):
    __slots__ = ("session",)
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: str
    def __init__(self, session: _Optional[str] = ...) -> None: ...

class RunRequest(_message.Message):
    __slots__ = ("session",)
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: str
    def __init__(self, session: _Optional[str] = ...) -> None: ...

class RunEvent(_message.Message):
    __slots__ = ("step", "final")
    STEP_FIELD_NUMBER: _ClassVar[int]
    FINAL_FIELD_NUMBER: _ClassVar[int]
    step: _record_pb2.Step
    final: Final
    def __init__(self, step: _Optional[_Union[_record_pb2.Step, _Mapping]] = ..., final: _Optional[_Union[Final, _Mapping]] = ...) -> None: ...

class Final(_message.Message):
    __slots__ = ("output", "usage", "stop_reason")
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    STOP_REASON_FIELD_NUMBER: _ClassVar[int]
    output: _record_pb2.Content
    usage: _record_pb2.Usage
    stop_reason: str
    def __init__(self, output: _Optional[_Union[_record_pb2.Content, _Mapping]] = ..., usage: _Optional[_Union[_record_pb2.Usage, _Mapping]] = ..., stop_reason: _Optional[str] = ...) -> None: ...

class CheckRequest(_message.Message):
    __slots__ = ("session",)
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: str
    def __init__(self, session: _Optional[str] = ...) -> None: ...

class CheckResponse(_message.Message):
    __slots__ = ("checks", "end_state")
    CHECKS_FIELD_NUMBER: _ClassVar[int]
    END_STATE_FIELD_NUMBER: _ClassVar[int]
    checks: _containers.RepeatedCompositeFieldContainer[_record_pb2.Check]
    end_state: _struct_pb2.Value
    def __init__(self, checks: _Optional[_Iterable[_Union[_record_pb2.Check, _Mapping]]] = ..., end_state: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class TeardownRequest(_message.Message):
    __slots__ = ("session",)
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: str
    def __init__(self, session: _Optional[str] = ...) -> None: ...

class TeardownResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
