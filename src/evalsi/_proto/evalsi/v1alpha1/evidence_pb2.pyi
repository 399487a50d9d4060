from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SystemDeclarationFile(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "spec")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: DeclarationMeta
    spec: SystemDeclaration
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[DeclarationMeta, _Mapping]] = ..., spec: _Optional[_Union[SystemDeclaration, _Mapping]] = ...) -> None: ...

class DeclarationMeta(_message.Message):
    __slots__ = ("name", "labels")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    name: str
    labels: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ...) -> None: ...

class SystemDeclaration(_message.Message):
    __slots__ = ("system", "tools", "human_involvement", "intended_use", "out_of_scope_use", "thresholds", "exclude", "case_policy")
    SYSTEM_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    HUMAN_INVOLVEMENT_FIELD_NUMBER: _ClassVar[int]
    INTENDED_USE_FIELD_NUMBER: _ClassVar[int]
    OUT_OF_SCOPE_USE_FIELD_NUMBER: _ClassVar[int]
    THRESHOLDS_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_FIELD_NUMBER: _ClassVar[int]
    CASE_POLICY_FIELD_NUMBER: _ClassVar[int]
    system: SystemUnderTest
    tools: _containers.RepeatedCompositeFieldContainer[DeclaredTool]
    human_involvement: str
    intended_use: _containers.RepeatedScalarFieldContainer[str]
    out_of_scope_use: _containers.RepeatedScalarFieldContainer[str]
    thresholds: _containers.RepeatedCompositeFieldContainer[Threshold]
    exclude: _containers.RepeatedCompositeFieldContainer[Exclusion]
    case_policy: CasePolicy
    def __init__(self, system: _Optional[_Union[SystemUnderTest, _Mapping]] = ..., tools: _Optional[_Iterable[_Union[DeclaredTool, _Mapping]]] = ..., human_involvement: _Optional[str] = ..., intended_use: _Optional[_Iterable[str]] = ..., out_of_scope_use: _Optional[_Iterable[str]] = ..., thresholds: _Optional[_Iterable[_Union[Threshold, _Mapping]]] = ..., exclude: _Optional[_Iterable[_Union[Exclusion, _Mapping]]] = ..., case_policy: _Optional[_Union[CasePolicy, _Mapping]] = ...) -> None: ...

class CasePolicy(_message.Message):
    __slots__ = ("pass_rate", "min_eligible_trials")
    PASS_RATE_FIELD_NUMBER: _ClassVar[int]
    MIN_ELIGIBLE_TRIALS_FIELD_NUMBER: _ClassVar[int]
    pass_rate: float
    min_eligible_trials: int
    def __init__(self, pass_rate: _Optional[float] = ..., min_eligible_trials: _Optional[int] = ...) -> None: ...

class SystemUnderTest(_message.Message):
    __slots__ = ("name", "version", "description", "owner")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    description: str
    owner: str
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., description: _Optional[str] = ..., owner: _Optional[str] = ...) -> None: ...

class DeclaredTool(_message.Message):
    __slots__ = ("name", "permission", "data_class", "reversibility", "exposure")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_FIELD_NUMBER: _ClassVar[int]
    DATA_CLASS_FIELD_NUMBER: _ClassVar[int]
    REVERSIBILITY_FIELD_NUMBER: _ClassVar[int]
    EXPOSURE_FIELD_NUMBER: _ClassVar[int]
    name: str
    permission: str
    data_class: str
    reversibility: str
    exposure: str
    def __init__(self, name: _Optional[str] = ..., permission: _Optional[str] = ..., data_class: _Optional[str] = ..., reversibility: _Optional[str] = ..., exposure: _Optional[str] = ...) -> None: ...

class Threshold(_message.Message):
    __slots__ = ("category", "metric", "min", "max", "kind", "statistic")
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    METRIC_FIELD_NUMBER: _ClassVar[int]
    MIN_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    STATISTIC_FIELD_NUMBER: _ClassVar[int]
    category: str
    metric: str
    min: float
    max: float
    kind: str
    statistic: str
    def __init__(self, category: _Optional[str] = ..., metric: _Optional[str] = ..., min: _Optional[float] = ..., max: _Optional[float] = ..., kind: _Optional[str] = ..., statistic: _Optional[str] = ...) -> None: ...

class Exclusion(_message.Message):
    __slots__ = ("scenario", "reason")
    SCENARIO_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    scenario: str
    reason: str
    def __init__(self, scenario: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...
