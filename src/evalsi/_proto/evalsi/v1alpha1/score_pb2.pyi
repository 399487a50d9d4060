import datetime

from evalsi._proto.evalsi.v1alpha1 import record_pb2 as _record_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Outcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OUTCOME_UNSPECIFIED: _ClassVar[Outcome]
    OUTCOME_SCORED: _ClassVar[Outcome]
    OUTCOME_SKIPPED: _ClassVar[Outcome]
    OUTCOME_ERROR: _ClassVar[Outcome]
    OUTCOME_CANCELLED: _ClassVar[Outcome]

class ScoreKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SCORE_KIND_UNSPECIFIED: _ClassVar[ScoreKind]
    SCORE_KIND_NUMBER: _ClassVar[ScoreKind]
    SCORE_KIND_PASSED: _ClassVar[ScoreKind]
    SCORE_KIND_LABEL: _ClassVar[ScoreKind]
    SCORE_KIND_STRUCTURED: _ClassVar[ScoreKind]
OUTCOME_UNSPECIFIED: Outcome
OUTCOME_SCORED: Outcome
OUTCOME_SKIPPED: Outcome
OUTCOME_ERROR: Outcome
OUTCOME_CANCELLED: Outcome
SCORE_KIND_UNSPECIFIED: ScoreKind
SCORE_KIND_NUMBER: ScoreKind
SCORE_KIND_PASSED: ScoreKind
SCORE_KIND_LABEL: ScoreKind
SCORE_KIND_STRUCTURED: ScoreKind

class Score(_message.Message):
    __slots__ = ("name", "number", "passed", "label", "structured", "explanation", "confidence", "cost", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _struct_pb2.Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    PASSED_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    STRUCTURED_FIELD_NUMBER: _ClassVar[int]
    EXPLANATION_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    name: str
    number: float
    passed: bool
    label: str
    structured: _struct_pb2.Value
    explanation: str
    confidence: float
    cost: _record_pb2.Usage
    metadata: _containers.MessageMap[str, _struct_pb2.Value]
    def __init__(self, name: _Optional[str] = ..., number: _Optional[float] = ..., passed: _Optional[bool] = ..., label: _Optional[str] = ..., structured: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., explanation: _Optional[str] = ..., confidence: _Optional[float] = ..., cost: _Optional[_Union[_record_pb2.Usage, _Mapping]] = ..., metadata: _Optional[_Mapping[str, _struct_pb2.Value]] = ...) -> None: ...

class EvaluationResult(_message.Message):
    __slots__ = ("record_id", "evaluator", "evaluator_ref", "outcome", "scores", "reason", "duration", "trial")
    RECORD_ID_FIELD_NUMBER: _ClassVar[int]
    EVALUATOR_FIELD_NUMBER: _ClassVar[int]
    EVALUATOR_REF_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    SCORES_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    TRIAL_FIELD_NUMBER: _ClassVar[int]
    record_id: str
    evaluator: str
    evaluator_ref: str
    outcome: Outcome
    scores: _containers.RepeatedCompositeFieldContainer[Score]
    reason: str
    duration: _duration_pb2.Duration
    trial: int
    def __init__(self, record_id: _Optional[str] = ..., evaluator: _Optional[str] = ..., evaluator_ref: _Optional[str] = ..., outcome: _Optional[_Union[Outcome, str]] = ..., scores: _Optional[_Iterable[_Union[Score, _Mapping]]] = ..., reason: _Optional[str] = ..., duration: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., trial: _Optional[int] = ...) -> None: ...

class Interval(_message.Message):
    __slots__ = ("low", "high", "method", "level")
    LOW_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    low: float
    high: float
    method: str
    level: float
    def __init__(self, low: _Optional[float] = ..., high: _Optional[float] = ..., method: _Optional[str] = ..., level: _Optional[float] = ...) -> None: ...

class MetricSummary(_message.Message):
    __slots__ = ("evaluator", "metric", "kind", "n", "mean", "std", "ci", "scored", "skipped", "errors", "cancelled", "infra_errors", "labels", "clusters", "pass_at_k", "pass_hat_k", "trial_variance", "higher_is_better")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class PassAtKEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class PassHatKEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    EVALUATOR_FIELD_NUMBER: _ClassVar[int]
    METRIC_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    MEAN_FIELD_NUMBER: _ClassVar[int]
    STD_FIELD_NUMBER: _ClassVar[int]
    CI_FIELD_NUMBER: _ClassVar[int]
    SCORED_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    INFRA_ERRORS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    PASS_AT_K_FIELD_NUMBER: _ClassVar[int]
    PASS_HAT_K_FIELD_NUMBER: _ClassVar[int]
    TRIAL_VARIANCE_FIELD_NUMBER: _ClassVar[int]
    HIGHER_IS_BETTER_FIELD_NUMBER: _ClassVar[int]
    evaluator: str
    metric: str
    kind: ScoreKind
    n: int
    mean: float
    std: float
    ci: Interval
    scored: int
    skipped: int
    errors: int
    cancelled: int
    infra_errors: int
    labels: _containers.ScalarMap[str, int]
    clusters: int
    pass_at_k: _containers.ScalarMap[str, float]
    pass_hat_k: _containers.ScalarMap[str, float]
    trial_variance: float
    higher_is_better: bool
    def __init__(self, evaluator: _Optional[str] = ..., metric: _Optional[str] = ..., kind: _Optional[_Union[ScoreKind, str]] = ..., n: _Optional[int] = ..., mean: _Optional[float] = ..., std: _Optional[float] = ..., ci: _Optional[_Union[Interval, _Mapping]] = ..., scored: _Optional[int] = ..., skipped: _Optional[int] = ..., errors: _Optional[int] = ..., cancelled: _Optional[int] = ..., infra_errors: _Optional[int] = ..., labels: _Optional[_Mapping[str, int]] = ..., clusters: _Optional[int] = ..., pass_at_k: _Optional[_Mapping[str, float]] = ..., pass_hat_k: _Optional[_Mapping[str, float]] = ..., trial_variance: _Optional[float] = ..., higher_is_better: _Optional[bool] = ...) -> None: ...

class GateResult(_message.Message):
    __slots__ = ("expr", "passed", "verdict", "value", "reason")
    EXPR_FIELD_NUMBER: _ClassVar[int]
    PASSED_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    expr: str
    passed: bool
    verdict: str
    value: float
    reason: str
    def __init__(self, expr: _Optional[str] = ..., passed: _Optional[bool] = ..., verdict: _Optional[str] = ..., value: _Optional[float] = ..., reason: _Optional[str] = ...) -> None: ...

class RunWarning(_message.Message):
    __slots__ = ("kind", "message", "count", "examples")
    KIND_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    EXAMPLES_FIELD_NUMBER: _ClassVar[int]
    kind: str
    message: str
    count: int
    examples: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, kind: _Optional[str] = ..., message: _Optional[str] = ..., count: _Optional[int] = ..., examples: _Optional[_Iterable[str]] = ...) -> None: ...

class FailureCause(_message.Message):
    __slots__ = ("kind", "count", "example")
    KIND_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    EXAMPLE_FIELD_NUMBER: _ClassVar[int]
    kind: str
    count: int
    example: str
    def __init__(self, kind: _Optional[str] = ..., count: _Optional[int] = ..., example: _Optional[str] = ...) -> None: ...
