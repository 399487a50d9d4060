import datetime

from evalsi._proto.evalsi.v1alpha1 import record_pb2 as _record_pb2
from evalsi._proto.evalsi.v1alpha1 import run_pb2 as _run_pb2
from evalsi._proto.evalsi.v1alpha1 import score_pb2 as _score_pb2
from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Run(_message.Message):
    __slots__ = ("id", "name", "kind", "status", "create_time", "finish_time", "records", "metrics", "gates", "exit_code", "error", "progress", "spec", "details", "dataset_version", "project_id", "warnings", "infra_error_causes", "target_error_causes", "created_by")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    FINISH_TIME_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    GATES_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    DATASET_VERSION_FIELD_NUMBER: _ClassVar[int]
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    INFRA_ERROR_CAUSES_FIELD_NUMBER: _ClassVar[int]
    TARGET_ERROR_CAUSES_FIELD_NUMBER: _ClassVar[int]
    CREATED_BY_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    kind: str
    status: str
    create_time: _timestamp_pb2.Timestamp
    finish_time: _timestamp_pb2.Timestamp
    records: int
    metrics: _containers.RepeatedCompositeFieldContainer[_score_pb2.MetricSummary]
    gates: _containers.RepeatedCompositeFieldContainer[_score_pb2.GateResult]
    exit_code: int
    error: str
    progress: RunProgress
    spec: _struct_pb2.Struct
    details: _struct_pb2.Struct
    dataset_version: str
    project_id: str
    warnings: _containers.RepeatedCompositeFieldContainer[_score_pb2.RunWarning]
    infra_error_causes: _containers.RepeatedCompositeFieldContainer[_score_pb2.FailureCause]
    target_error_causes: _containers.RepeatedCompositeFieldContainer[_score_pb2.FailureCause]
    created_by: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., kind: _Optional[str] = ..., status: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finish_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., records: _Optional[int] = ..., metrics: _Optional[_Iterable[_Union[_score_pb2.MetricSummary, _Mapping]]] = ..., gates: _Optional[_Iterable[_Union[_score_pb2.GateResult, _Mapping]]] = ..., exit_code: _Optional[int] = ..., error: _Optional[str] = ..., progress: _Optional[_Union[RunProgress, _Mapping]] = ..., spec: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., details: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., dataset_version: _Optional[str] = ..., project_id: _Optional[str] = ..., warnings: _Optional[_Iterable[_Union[_score_pb2.RunWarning, _Mapping]]] = ..., infra_error_causes: _Optional[_Iterable[_Union[_score_pb2.FailureCause, _Mapping]]] = ..., target_error_causes: _Optional[_Iterable[_Union[_score_pb2.FailureCause, _Mapping]]] = ..., created_by: _Optional[str] = ...) -> None: ...

class RunProgress(_message.Message):
    __slots__ = ("tasks_done", "tasks_total", "infra_errors")
    TASKS_DONE_FIELD_NUMBER: _ClassVar[int]
    TASKS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    INFRA_ERRORS_FIELD_NUMBER: _ClassVar[int]
    tasks_done: int
    tasks_total: int
    infra_errors: int
    def __init__(self, tasks_done: _Optional[int] = ..., tasks_total: _Optional[int] = ..., infra_errors: _Optional[int] = ...) -> None: ...

class CreateRunRequest(_message.Message):
    __slots__ = ("run", "project_id", "dry_run")
    RUN_FIELD_NUMBER: _ClassVar[int]
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    run: _run_pb2.EvalRun
    project_id: str
    dry_run: bool
    def __init__(self, run: _Optional[_Union[_run_pb2.EvalRun, _Mapping]] = ..., project_id: _Optional[str] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class CreateRunResponse(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: Run
    def __init__(self, run: _Optional[_Union[Run, _Mapping]] = ...) -> None: ...

class GetRunRequest(_message.Message):
    __slots__ = ("id", "project_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    project_id: str
    def __init__(self, id: _Optional[str] = ..., project_id: _Optional[str] = ...) -> None: ...

class GetRunResponse(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: Run
    def __init__(self, run: _Optional[_Union[Run, _Mapping]] = ...) -> None: ...

class ListRunsRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "kind", "status", "project_id")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    kind: str
    status: str
    project_id: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., kind: _Optional[str] = ..., status: _Optional[str] = ..., project_id: _Optional[str] = ...) -> None: ...

class ListRunsResponse(_message.Message):
    __slots__ = ("runs", "next_page_token")
    RUNS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[Run]
    next_page_token: str
    def __init__(self, runs: _Optional[_Iterable[_Union[Run, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class WatchRunRequest(_message.Message):
    __slots__ = ("id", "project_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    project_id: str
    def __init__(self, id: _Optional[str] = ..., project_id: _Optional[str] = ...) -> None: ...

class WatchRunResponse(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: Run
    def __init__(self, run: _Optional[_Union[Run, _Mapping]] = ...) -> None: ...

class ExportBundleRequest(_message.Message):
    __slots__ = ("id", "project_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    project_id: str
    def __init__(self, id: _Optional[str] = ..., project_id: _Optional[str] = ...) -> None: ...

class ExportBundleResponse(_message.Message):
    __slots__ = ("path", "data", "size", "run_id")
    PATH_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    path: str
    data: bytes
    size: int
    run_id: str
    def __init__(self, path: _Optional[str] = ..., data: _Optional[bytes] = ..., size: _Optional[int] = ..., run_id: _Optional[str] = ...) -> None: ...

class CancelRunRequest(_message.Message):
    __slots__ = ("id", "project_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    project_id: str
    def __init__(self, id: _Optional[str] = ..., project_id: _Optional[str] = ...) -> None: ...

class CancelRunResponse(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: Run
    def __init__(self, run: _Optional[_Union[Run, _Mapping]] = ...) -> None: ...

class ResumeRunRequest(_message.Message):
    __slots__ = ("id", "project_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    project_id: str
    def __init__(self, id: _Optional[str] = ..., project_id: _Optional[str] = ...) -> None: ...

class ResumeRunResponse(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: Run
    def __init__(self, run: _Optional[_Union[Run, _Mapping]] = ...) -> None: ...

class ReplayRunRequest(_message.Message):
    __slots__ = ("id", "project_id", "evaluators", "params", "gates", "branch_from_step")
    ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    EVALUATORS_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    GATES_FIELD_NUMBER: _ClassVar[int]
    BRANCH_FROM_STEP_FIELD_NUMBER: _ClassVar[int]
    id: str
    project_id: str
    evaluators: _containers.RepeatedScalarFieldContainer[str]
    params: _struct_pb2.Struct
    gates: _containers.RepeatedScalarFieldContainer[str]
    branch_from_step: int
    def __init__(self, id: _Optional[str] = ..., project_id: _Optional[str] = ..., evaluators: _Optional[_Iterable[str]] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., gates: _Optional[_Iterable[str]] = ..., branch_from_step: _Optional[int] = ...) -> None: ...

class ReplayRunResponse(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: Run
    def __init__(self, run: _Optional[_Union[Run, _Mapping]] = ...) -> None: ...

class ListRunResultsRequest(_message.Message):
    __slots__ = ("id", "page_size", "page_token", "project_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    page_size: int
    page_token: str
    project_id: str
    def __init__(self, id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., project_id: _Optional[str] = ...) -> None: ...

class ListRunResultsResponse(_message.Message):
    __slots__ = ("results", "next_page_token")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[_score_pb2.EvaluationResult]
    next_page_token: str
    def __init__(self, results: _Optional[_Iterable[_Union[_score_pb2.EvaluationResult, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListRunTasksRequest(_message.Message):
    __slots__ = ("id", "page_size", "page_token", "project_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    page_size: int
    page_token: str
    project_id: str
    def __init__(self, id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., project_id: _Optional[str] = ...) -> None: ...

class GetRunCategoriesRequest(_message.Message):
    __slots__ = ("id", "key", "project_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    key: str
    project_id: str
    def __init__(self, id: _Optional[str] = ..., key: _Optional[str] = ..., project_id: _Optional[str] = ...) -> None: ...

class GetRunCategoriesResponse(_message.Message):
    __slots__ = ("categories",)
    CATEGORIES_FIELD_NUMBER: _ClassVar[int]
    categories: _containers.RepeatedCompositeFieldContainer[RunCategory]
    def __init__(self, categories: _Optional[_Iterable[_Union[RunCategory, _Mapping]]] = ...) -> None: ...

class RunCategory(_message.Message):
    __slots__ = ("key", "value", "metrics", "pass_k_samples")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    PASS_K_SAMPLES_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    metrics: _containers.RepeatedCompositeFieldContainer[_score_pb2.MetricSummary]
    pass_k_samples: _struct_pb2.Struct
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ..., metrics: _Optional[_Iterable[_Union[_score_pb2.MetricSummary, _Mapping]]] = ..., pass_k_samples: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ListRunTasksResponse(_message.Message):
    __slots__ = ("tasks", "next_page_token")
    TASKS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[RunTask]
    next_page_token: str
    def __init__(self, tasks: _Optional[_Iterable[_Union[RunTask, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class RunTask(_message.Message):
    __slots__ = ("sample_id", "seq", "trial", "status", "output", "scores", "error", "trajectory")
    SAMPLE_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TRIAL_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    SCORES_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TRAJECTORY_FIELD_NUMBER: _ClassVar[int]
    sample_id: str
    seq: int
    trial: int
    status: str
    output: _struct_pb2.Value
    scores: _containers.RepeatedCompositeFieldContainer[TaskVerdict]
    error: str
    trajectory: TaskTrajectory
    def __init__(self, sample_id: _Optional[str] = ..., seq: _Optional[int] = ..., trial: _Optional[int] = ..., status: _Optional[str] = ..., output: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., scores: _Optional[_Iterable[_Union[TaskVerdict, _Mapping]]] = ..., error: _Optional[str] = ..., trajectory: _Optional[_Union[TaskTrajectory, _Mapping]] = ...) -> None: ...

class TaskVerdict(_message.Message):
    __slots__ = ("evaluator", "outcome", "scores", "reason")
    EVALUATOR_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    SCORES_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    evaluator: str
    outcome: str
    scores: _containers.RepeatedCompositeFieldContainer[_score_pb2.Score]
    reason: str
    def __init__(self, evaluator: _Optional[str] = ..., outcome: _Optional[str] = ..., scores: _Optional[_Iterable[_Union[_score_pb2.Score, _Mapping]]] = ..., reason: _Optional[str] = ...) -> None: ...

class TaskTrajectory(_message.Message):
    __slots__ = ("steps", "stop_reason", "checks", "end_state")
    STEPS_FIELD_NUMBER: _ClassVar[int]
    STOP_REASON_FIELD_NUMBER: _ClassVar[int]
    CHECKS_FIELD_NUMBER: _ClassVar[int]
    END_STATE_FIELD_NUMBER: _ClassVar[int]
    steps: _containers.RepeatedCompositeFieldContainer[TaskStep]
    stop_reason: str
    checks: _containers.RepeatedCompositeFieldContainer[_record_pb2.Check]
    end_state: _struct_pb2.Value
    def __init__(self, steps: _Optional[_Iterable[_Union[TaskStep, _Mapping]]] = ..., stop_reason: _Optional[str] = ..., checks: _Optional[_Iterable[_Union[_record_pb2.Check, _Mapping]]] = ..., end_state: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class TaskStep(_message.Message):
    __slots__ = ("type", "name", "tool", "arguments", "result", "input", "output", "error", "usage")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    type: str
    name: str
    tool: str
    arguments: _struct_pb2.Value
    result: _struct_pb2.Value
    input: _struct_pb2.Value
    output: _struct_pb2.Value
    error: str
    usage: _record_pb2.Usage
    def __init__(self, type: _Optional[str] = ..., name: _Optional[str] = ..., tool: _Optional[str] = ..., arguments: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., result: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., input: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., output: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., error: _Optional[str] = ..., usage: _Optional[_Union[_record_pb2.Usage, _Mapping]] = ...) -> None: ...

class CompareRunsRequest(_message.Message):
    __slots__ = ("baseline", "candidate", "level", "seed", "metrics", "project_id")
    BASELINE_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    baseline: str
    candidate: str
    level: float
    seed: int
    metrics: _containers.RepeatedScalarFieldContainer[str]
    project_id: str
    def __init__(self, baseline: _Optional[str] = ..., candidate: _Optional[str] = ..., level: _Optional[float] = ..., seed: _Optional[int] = ..., metrics: _Optional[_Iterable[str]] = ..., project_id: _Optional[str] = ...) -> None: ...

class CompareRunsResponse(_message.Message):
    __slots__ = ("baseline", "candidate", "metrics", "unmatched", "warnings", "level", "seed", "baseline_dataset_version", "candidate_dataset_version")
    BASELINE_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    UNMATCHED_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    BASELINE_DATASET_VERSION_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_DATASET_VERSION_FIELD_NUMBER: _ClassVar[int]
    baseline: str
    candidate: str
    metrics: _containers.RepeatedCompositeFieldContainer[MetricComparison]
    unmatched: _containers.RepeatedCompositeFieldContainer[UnmatchedMetric]
    warnings: _containers.RepeatedScalarFieldContainer[str]
    level: float
    seed: int
    baseline_dataset_version: str
    candidate_dataset_version: str
    def __init__(self, baseline: _Optional[str] = ..., candidate: _Optional[str] = ..., metrics: _Optional[_Iterable[_Union[MetricComparison, _Mapping]]] = ..., unmatched: _Optional[_Iterable[_Union[UnmatchedMetric, _Mapping]]] = ..., warnings: _Optional[_Iterable[str]] = ..., level: _Optional[float] = ..., seed: _Optional[int] = ..., baseline_dataset_version: _Optional[str] = ..., candidate_dataset_version: _Optional[str] = ...) -> None: ...

class MetricComparison(_message.Message):
    __slots__ = ("evaluator", "metric", "kind", "n_paired", "n_baseline", "n_candidate", "mean_baseline", "mean_candidate", "delta", "ci", "p_value", "mcnemar_p_value", "verdict", "mde", "higher_is_better", "note", "mcnemar")
    EVALUATOR_FIELD_NUMBER: _ClassVar[int]
    METRIC_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    N_PAIRED_FIELD_NUMBER: _ClassVar[int]
    N_BASELINE_FIELD_NUMBER: _ClassVar[int]
    N_CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    MEAN_BASELINE_FIELD_NUMBER: _ClassVar[int]
    MEAN_CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    CI_FIELD_NUMBER: _ClassVar[int]
    P_VALUE_FIELD_NUMBER: _ClassVar[int]
    MCNEMAR_P_VALUE_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    MDE_FIELD_NUMBER: _ClassVar[int]
    HIGHER_IS_BETTER_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    MCNEMAR_FIELD_NUMBER: _ClassVar[int]
    evaluator: str
    metric: str
    kind: str
    n_paired: int
    n_baseline: int
    n_candidate: int
    mean_baseline: float
    mean_candidate: float
    delta: float
    ci: _score_pb2.Interval
    p_value: float
    mcnemar_p_value: float
    verdict: str
    mde: float
    higher_is_better: bool
    note: str
    mcnemar: McNemarTest
    def __init__(self, evaluator: _Optional[str] = ..., metric: _Optional[str] = ..., kind: _Optional[str] = ..., n_paired: _Optional[int] = ..., n_baseline: _Optional[int] = ..., n_candidate: _Optional[int] = ..., mean_baseline: _Optional[float] = ..., mean_candidate: _Optional[float] = ..., delta: _Optional[float] = ..., ci: _Optional[_Union[_score_pb2.Interval, _Mapping]] = ..., p_value: _Optional[float] = ..., mcnemar_p_value: _Optional[float] = ..., verdict: _Optional[str] = ..., mde: _Optional[float] = ..., higher_is_better: _Optional[bool] = ..., note: _Optional[str] = ..., mcnemar: _Optional[_Union[McNemarTest, _Mapping]] = ...) -> None: ...

class McNemarTest(_message.Message):
    __slots__ = ("b01", "b10", "statistic", "p_value", "method")
    B01_FIELD_NUMBER: _ClassVar[int]
    B10_FIELD_NUMBER: _ClassVar[int]
    STATISTIC_FIELD_NUMBER: _ClassVar[int]
    P_VALUE_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    b01: int
    b10: int
    statistic: float
    p_value: float
    method: str
    def __init__(self, b01: _Optional[int] = ..., b10: _Optional[int] = ..., statistic: _Optional[float] = ..., p_value: _Optional[float] = ..., method: _Optional[str] = ...) -> None: ...

class UnmatchedMetric(_message.Message):
    __slots__ = ("evaluator", "metric", "run_id")
    EVALUATOR_FIELD_NUMBER: _ClassVar[int]
    METRIC_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    evaluator: str
    metric: str
    run_id: str
    def __init__(self, evaluator: _Optional[str] = ..., metric: _Optional[str] = ..., run_id: _Optional[str] = ...) -> None: ...
