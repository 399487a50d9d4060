import datetime

from evalsi._proto.evalsi.v1alpha1 import policy_pb2 as _policy_pb2
from evalsi._proto.evalsi.v1alpha1 import score_pb2 as _score_pb2
from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Policy(_message.Message):
    __slots__ = ("name", "project_id", "run_id", "apply_time", "spec", "spec_hash")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    APPLY_TIME_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    SPEC_HASH_FIELD_NUMBER: _ClassVar[int]
    name: str
    project_id: str
    run_id: str
    apply_time: _timestamp_pb2.Timestamp
    spec: _policy_pb2.OnlineEvalPolicy
    spec_hash: str
    def __init__(self, name: _Optional[str] = ..., project_id: _Optional[str] = ..., run_id: _Optional[str] = ..., apply_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., spec: _Optional[_Union[_policy_pb2.OnlineEvalPolicy, _Mapping]] = ..., spec_hash: _Optional[str] = ...) -> None: ...

class PolicyStats(_message.Message):
    __slots__ = ("name", "project_id", "selected", "sampled", "evaluated", "skipped", "errors", "alerts_fired", "alert_failures", "promoted", "window", "window_seconds", "firing", "outcomes", "forced_by_feedback", "sink_sent", "sink_failures")
    class SkippedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class OutcomesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    SELECTED_FIELD_NUMBER: _ClassVar[int]
    SAMPLED_FIELD_NUMBER: _ClassVar[int]
    EVALUATED_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    ALERTS_FIRED_FIELD_NUMBER: _ClassVar[int]
    ALERT_FAILURES_FIELD_NUMBER: _ClassVar[int]
    PROMOTED_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    WINDOW_SECONDS_FIELD_NUMBER: _ClassVar[int]
    FIRING_FIELD_NUMBER: _ClassVar[int]
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    FORCED_BY_FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    SINK_SENT_FIELD_NUMBER: _ClassVar[int]
    SINK_FAILURES_FIELD_NUMBER: _ClassVar[int]
    name: str
    project_id: str
    selected: int
    sampled: int
    evaluated: int
    skipped: _containers.ScalarMap[str, int]
    errors: int
    alerts_fired: int
    alert_failures: int
    promoted: int
    window: _containers.RepeatedCompositeFieldContainer[_score_pb2.MetricSummary]
    window_seconds: float
    firing: _containers.RepeatedScalarFieldContainer[str]
    outcomes: _containers.ScalarMap[str, int]
    forced_by_feedback: int
    sink_sent: int
    sink_failures: int
    def __init__(self, name: _Optional[str] = ..., project_id: _Optional[str] = ..., selected: _Optional[int] = ..., sampled: _Optional[int] = ..., evaluated: _Optional[int] = ..., skipped: _Optional[_Mapping[str, int]] = ..., errors: _Optional[int] = ..., alerts_fired: _Optional[int] = ..., alert_failures: _Optional[int] = ..., promoted: _Optional[int] = ..., window: _Optional[_Iterable[_Union[_score_pb2.MetricSummary, _Mapping]]] = ..., window_seconds: _Optional[float] = ..., firing: _Optional[_Iterable[str]] = ..., outcomes: _Optional[_Mapping[str, int]] = ..., forced_by_feedback: _Optional[int] = ..., sink_sent: _Optional[int] = ..., sink_failures: _Optional[int] = ...) -> None: ...

class ApplyPolicyRequest(_message.Message):
    __slots__ = ("policy", "yaml", "project_id")
    POLICY_FIELD_NUMBER: _ClassVar[int]
    YAML_FIELD_NUMBER: _ClassVar[int]
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    policy: _policy_pb2.OnlineEvalPolicy
    yaml: str
    project_id: str
    def __init__(self, policy: _Optional[_Union[_policy_pb2.OnlineEvalPolicy, _Mapping]] = ..., yaml: _Optional[str] = ..., project_id: _Optional[str] = ...) -> None: ...

class ApplyPolicyResponse(_message.Message):
    __slots__ = ("policy", "changed")
    POLICY_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    policy: Policy
    changed: bool
    def __init__(self, policy: _Optional[_Union[Policy, _Mapping]] = ..., changed: _Optional[bool] = ...) -> None: ...

class ListPoliciesRequest(_message.Message):
    __slots__ = ("project_id",)
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    project_id: str
    def __init__(self, project_id: _Optional[str] = ...) -> None: ...

class ListPoliciesResponse(_message.Message):
    __slots__ = ("policies",)
    POLICIES_FIELD_NUMBER: _ClassVar[int]
    policies: _containers.RepeatedCompositeFieldContainer[Policy]
    def __init__(self, policies: _Optional[_Iterable[_Union[Policy, _Mapping]]] = ...) -> None: ...

class GetPolicyRequest(_message.Message):
    __slots__ = ("name", "project_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    project_id: str
    def __init__(self, name: _Optional[str] = ..., project_id: _Optional[str] = ...) -> None: ...

class GetPolicyResponse(_message.Message):
    __slots__ = ("policy",)
    POLICY_FIELD_NUMBER: _ClassVar[int]
    policy: Policy
    def __init__(self, policy: _Optional[_Union[Policy, _Mapping]] = ...) -> None: ...

class DeletePolicyRequest(_message.Message):
    __slots__ = ("name", "project_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    project_id: str
    def __init__(self, name: _Optional[str] = ..., project_id: _Optional[str] = ...) -> None: ...

class DeletePolicyResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetPolicyStatsRequest(_message.Message):
    __slots__ = ("name", "project_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    project_id: str
    def __init__(self, name: _Optional[str] = ..., project_id: _Optional[str] = ...) -> None: ...

class GetPolicyStatsResponse(_message.Message):
    __slots__ = ("stats",)
    STATS_FIELD_NUMBER: _ClassVar[int]
    stats: PolicyStats
    def __init__(self, stats: _Optional[_Union[PolicyStats, _Mapping]] = ...) -> None: ...
