"""Ways in that produce runs: Score (grade existing outputs) and Run (call a target, then grade)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalsi.core import lazy_exports

if TYPE_CHECKING:
    from evalsi.connectors import MODEL_CONNECTORS
    from evalsi.runs._aggregate import Aggregator
    from evalsi.runs._cases import Case, CaseBuilder, CategoryFigures, rate, with_unattempted
    from evalsi.runs._cassettes import StoredCassettes
    from evalsi.runs._categories import (
        DEFAULT_CATEGORY_KEY,
        CategoryMetrics,
        category_columns,
        category_rows,
        category_title,
        run_categories,
    )
    from evalsi.runs._dataset_scope import dataset_scope_of_outputs
    from evalsi.runs._execute import execute_run
    from evalsi.runs._export import Export, export_run
    from evalsi.runs._failing import FAILURE_COLUMNS, failing_records, failure_rows, first_failures
    from evalsi.runs._grade import check_version, grade_run, source_dataset
    from evalsi.runs._ingest import (
        EXTERNAL_NAMESPACE,
        conclude_ingest,
        default_metric,
        external_evaluator,
        ingest_batches,
        ingest_run_id,
        ingest_spec,
        is_ingested,
    )
    from evalsi.runs._isolation import (
        IsolationSummary,
        ReportedIsolation,
        isolation_report,
        record_isolation,
        scores_isolation,
        weakest,
    )
    from evalsi.runs._isolation import summaries_from_dicts as isolation_from_dicts
    from evalsi.runs._isolation import summarize_results as isolation_of_results
    from evalsi.runs._judges import (
        JUDGE_CONNECTORS,
        build_judges,
        judges_manifest,
        run_judges,
        without_cache,
    )
    from evalsi.runs._outputs import grade_tasks, join_outputs, rebuild
    from evalsi.runs._plan import EvaluatorLike, bind_all, require_sandboxes, runners_for
    from evalsi.runs._promote import (
        MAX_PROMOTE,
        PROMOTED_KEY,
        PromoteStats,
        Provenance,
        failures_of,
        iso_now,
        promote_run,
        promoted_row,
        row_id,
        wire_safe,
    )
    from evalsi.runs._replay import cassettes_of, check_branch, replay_run, replay_spec
    from evalsi.runs._rerun import rerun_run, stored_spec, unpinned
    from evalsi.runs._result import (
        ISOLATION_COLUMNS,
        ScoreResult,
        format_number,
        isolation_rows,
        metric_columns,
        metric_rows,
        render_markdown,
        render_plain,
    )
    from evalsi.runs._run_result import RunResult
    from evalsi.runs._run_row import RunRow, StoreLike, open_store
    from evalsi.runs._scheduler import RunProgress, Spend, TaskKey, over_budget
    from evalsi.runs._score import Progress, score_async
    from evalsi.runs._session import Conclusion, ScoreSession
    from evalsi.runs._shadow import (
        ShadowResult,
        candidate_inputs,
        candidate_spec,
        check_rows,
        shadow_async,
    )
    from evalsi.runs._shard import (
        Dispatch,
        Dispatched,
        RunContext,
        ShardOutcome,
        execute_shard,
        open_run_context,
    )
    from evalsi.runs._stored import summarize_stored
    from evalsi.runs._summaries import summaries_from_dicts
    from evalsi.runs._tasks import iter_tasks, task_json
    from evalsi.runs._test_plan import (
        PLAN_FORMAT,
        TestPlan,
        effective_thresholds,
        pass_threshold,
        register_plan,
    )
    from evalsi.runs.calibration import CalibrationResult, calibrate_async, uncalibrated_gates
    from evalsi.runs.compare import (
        CompareKind,
        Comparison,
        MetricComparison,
        Unmatched,
        Verdict,
        compare_runs,
    )
    from evalsi.runs.gates import (
        GATE_COLUMNS,
        EvaluatorMetrics,
        Gate,
        GateResult,
        evaluate_gates,
        gate_rows,
        gates_exit_code,
        parse_gates,
    )
    from evalsi.specs import (
        TARGET_KINDS,
        JudgeSpec,
        RunSpec,
        judges_from_doc,
        load_run_spec,
        run_spec_from_dict,
    )


__all__ = [
    "DEFAULT_CATEGORY_KEY",
    "EXTERNAL_NAMESPACE",
    "FAILURE_COLUMNS",
    "GATE_COLUMNS",
    "ISOLATION_COLUMNS",
    "JUDGE_CONNECTORS",
    "MAX_PROMOTE",
    "MODEL_CONNECTORS",
    "PLAN_FORMAT",
    "PROMOTED_KEY",
    "TARGET_KINDS",
    "Aggregator",
    "CalibrationResult",
    "Case",
    "CaseBuilder",
    "CategoryFigures",
    "CategoryMetrics",
    "CompareKind",
    "Comparison",
    "Conclusion",
    "Dispatch",
    "Dispatched",
    "EvaluatorLike",
    "EvaluatorMetrics",
    "Export",
    "Gate",
    "GateResult",
    "IsolationSummary",
    "JudgeSpec",
    "MetricComparison",
    "Progress",
    "PromoteStats",
    "Provenance",
    "ReportedIsolation",
    "RunContext",
    "RunProgress",
    "RunResult",
    "RunRow",
    "RunSpec",
    "ScoreResult",
    "ScoreSession",
    "ShadowResult",
    "ShardOutcome",
    "Spend",
    "StoreLike",
    "StoredCassettes",
    "TaskKey",
    "TestPlan",
    "Unmatched",
    "Verdict",
    "bind_all",
    "build_judges",
    "calibrate_async",
    "candidate_inputs",
    "candidate_spec",
    "cassettes_of",
    "category_columns",
    "category_rows",
    "category_title",
    "check_branch",
    "check_rows",
    "check_version",
    "compare_runs",
    "conclude_ingest",
    "dataset_scope_of_outputs",
    "default_metric",
    "effective_thresholds",
    "evaluate_gates",
    "execute_run",
    "execute_shard",
    "export_run",
    "external_evaluator",
    "failing_records",
    "failure_rows",
    "failures_of",
    "first_failures",
    "format_number",
    "gate_rows",
    "gates_exit_code",
    "grade_run",
    "grade_tasks",
    "ingest_batches",
    "ingest_run_id",
    "ingest_spec",
    "is_ingested",
    "iso_now",
    "isolation_from_dicts",
    "isolation_of_results",
    "isolation_report",
    "isolation_rows",
    "iter_tasks",
    "join_outputs",
    "judges_from_doc",
    "judges_manifest",
    "load_run_spec",
    "metric_columns",
    "metric_rows",
    "open_run_context",
    "open_store",
    "over_budget",
    "parse_gates",
    "pass_threshold",
    "promote_run",
    "promoted_row",
    "rate",
    "rebuild",
    "record_isolation",
    "register_plan",
    "render_markdown",
    "render_plain",
    "replay_run",
    "replay_spec",
    "require_sandboxes",
    "rerun_run",
    "row_id",
    "run_categories",
    "run_judges",
    "run_spec_from_dict",
    "runners_for",
    "score_async",
    "scores_isolation",
    "shadow_async",
    "source_dataset",
    "stored_spec",
    "summaries_from_dicts",
    "summarize_stored",
    "task_json",
    "uncalibrated_gates",
    "unpinned",
    "weakest",
    "wire_safe",
    "with_unattempted",
    "without_cache",
]

# Exports are imported on first use (core/_lazy.py): a command imports only what it needs.
__getattr__ = lazy_exports(__name__, __file__)
