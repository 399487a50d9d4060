"""The embedded entry points: ``evaluate`` (Score) and ``run`` (Run), each sync and async."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from evalsi.runs import RunSpec

if TYPE_CHECKING:  # annotations only: calibration and the store load when they are used
    from evalsi.datasets import FieldMap
    from evalsi.evaluators import Registry
    from evalsi.runs import (
        CalibrationResult,
        EvaluatorLike,
        Progress,
        RunProgress,
        RunResult,
        ScoreResult,
    )
    from evalsi.specs import Declaration
    from evalsi.store import SqlStore

T = TypeVar("T")


async def evaluate_async(
    data: Any,
    evaluators: Iterable[EvaluatorLike],
    *,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    fields: FieldMap | None = None,
    cluster_by: str | None = None,
    bootstrap: Literal["percentile", "bca"] | None = None,
    seed: int = 0,
    store: SqlStore | str | os.PathLike[str] | None = None,
    on_bad_record: Literal["fail", "skip"] = "fail",
    name: str = "",
    registry: Registry | None = None,
    progress: Progress | None = None,
    gates: str | Sequence[str] = (),
    min_completion_rate: float = 0.8,
    max_evaluator_error_rate: float = 0.1,
    judges: Mapping[str, Any] | None = None,
    declaration: Declaration | str | os.PathLike[str] | None = None,
) -> ScoreResult:
    """Grade records that already hold outputs (the Score way in).

    Args:
        data: a path (``.jsonl``, ``.json``, ``.csv``, ``.parquet``), an ``hf://`` URI read from
            the local Hugging Face cache, or an iterable of dicts or ``Record`` objects.
        evaluators: names (``"exact-match"``, ``"builtin/exact-match@1.0.0"``), ``@evaluator``
            objects, or ``{"ref": ..., "params": {...}, "name": ...}`` entries.
        params: params per evaluator name, e.g. ``{"exact-match": {"ignore_case": True}}``.
        fields: which row fields hold input, output, reference, id... (``FieldMap``).
        cluster_by: a metadata key whose equal values share a cluster (clustered intervals).
        bootstrap: ``"percentile"`` or ``"bca"`` intervals instead of Wilson / t.
        seed: seed for every resampling.
        store: where results go: a SQLite path, ``":memory:"``, or an open store. Default
            ``.evalsi/evalsi.db`` under the working directory.
        on_bad_record: ``"fail"`` stops at the first malformed row (naming file and line);
            ``"skip"`` counts and reports bad rows and grades the rest.
        name: a label for the run.
        registry: the evaluators to resolve names against (default: built-ins + entry points).
        progress: called after each batch with (records done, bad records).
        gates: CEL conditions on the metrics, checked before any data is read, e.g.
            ``"metric('exact-match').mean >= 0.8"`` or ``"metric('llm-judge').ci.low > 0.6"``.
            Each ends passed, failed, or inconclusive (too little eligible data); see
            ``ScoreResult.gates``.
        min_completion_rate: a gate is inconclusive when a metric it reads has fewer scored
            records than this fraction of all graded (the rest skipped, errored or lost).
        max_evaluator_error_rate: ... or when its evaluator errored on more than this fraction
            of the records it tried to grade.
        judges: the judge models that judge-pack evaluators (``llm-judge``, ``g-eval``,
            ``pairwise``, ``reference-correctness``) may ask, by name: ``{"default":
            {"connector": "openai-compatible", "baseUrl": "http://127.0.0.1:8000/v1",
            "model": "qwen2.5-7b", "params": {"temperature": 0}, "secretRef": "env:KEY"}}``.
            There is no default judge: an evaluator naming a judge that is not here is an
            error before any record is read. Answers are cached in the store.
        declaration: the system under test as its owner declares it (a ``SystemDeclaration``
            file or a ``specs.Declaration``): the run registers a test plan a gate can judge
            (``evalsi gate --bundle``; docs/guides/evidence.md). Thresholds come from it.

    Returns:
        A ``ScoreResult`` with ``run_id``, ``metrics``, ``gates``, ``results``, ``table()``
        and ``to_json()``.

    Example:
        >>> import evalsi
        >>> r = evalsi.evaluate(
        ...     data=[{"output": "Paris", "reference": "paris"}],
        ...     evaluators=["exact-match"],
        ...     params={"exact-match": {"ignore_case": True}},
        ...     store=":memory:",
        ... )
        >>> r.metric("exact-match").n
        1
    """
    from evalsi.runs import score_async  # its statistics import numpy: Runs need them later

    return await score_async(
        data,
        evaluators,
        params=params,
        fields=fields,
        cluster_by=cluster_by,
        bootstrap=bootstrap,
        seed=seed,
        store=store,
        on_bad_record=on_bad_record,
        name=name,
        registry=_registry(registry),
        progress=progress,
        gates=gates,
        min_completion_rate=min_completion_rate,
        max_evaluator_error_rate=max_evaluator_error_rate,
        judges=judges,
        declaration=_declaration(declaration),
    )


def _declaration(value: Declaration | str | os.PathLike[str] | None) -> Declaration | None:
    if value is None or not isinstance(value, str | os.PathLike):
        return value
    from evalsi.specs import load_declaration

    return load_declaration(value)


def evaluate(data: Any, evaluators: Iterable[EvaluatorLike], **options: Any) -> ScoreResult:
    """Synchronous ``evaluate_async`` (same arguments).

    Inside a running event loop (a notebook) the work runs on a helper thread with its own loop.

    Example:
        >>> import evalsi
        >>> evalsi.evaluate([{"output": "{}"}], ["json-valid"], store=":memory:").records
        1
    """
    return _wait(evaluate_async(data, evaluators, **options))


async def run_async(
    spec: RunSpec | str | os.PathLike[str],
    *,
    store: SqlStore | str | os.PathLike[str] | None = None,
    resume: str | None = None,
    dry_run: bool = False,
    progress: RunProgress | None = None,
    registry: Registry | None = None,
    execute_only: bool = False,
) -> RunResult:
    """Run an ``EvalRun`` (the Run way in): call the target on every sample x trial, grade.

    Args:
        spec: a path to an ``EvalRun`` YAML file, or a ``RunSpec`` built in code.
        store: where results go (default ``.evalsi/evalsi.db`` under the working directory).
        resume: the id of an earlier run of the same spec to complete.
        dry_run: return the plan (tasks, projected tokens and cost) without calling anything.
        progress: called with (tasks done, infra errors) as the run goes on.
        registry: the evaluators to resolve refs against (default: built-ins + entry points).
        execute_only: call the target and store the outputs, grade nothing; grade them later
            with ``evalsi.grade(run_id, evaluators)``.

    Returns:
        A ``RunResult``: a ``ScoreResult`` with trials, pass@k / pass^k per pass/fail metric,
        infra errors, spend, and the stop reason when a budget stopped it.
    """
    from evalsi.runs import execute_run, load_run_spec

    loaded = spec if isinstance(spec, RunSpec) else load_run_spec(os.fspath(spec))
    remote: Any = None
    agent = loaded.target.agent
    if agent is not None and agent.harness is not None and not agent.harness.python:
        from evalsi.wire import remote_harness  # the wire loads only for a harness process

        remote = remote_harness
    exporter: Any = None
    if loaded.telemetry is not None:  # the OTel SDK loads only for a run that exports
        from evalsi.sinks import OtlpSpanExporter

        exporter = OtlpSpanExporter
    return await execute_run(
        loaded,
        store=store,
        resume=resume,
        dry_run=dry_run,
        progress=progress,
        registry=_registry(registry),
        execute_only=execute_only,
        remote_harness=remote,
        span_exporter=exporter,
    )


def run(spec: RunSpec | str | os.PathLike[str], **options: Any) -> RunResult:
    """Synchronous ``run_async`` (same arguments); inside an event loop it uses a helper thread.

    Example:
        >>> import evalsi
        >>> evalsi.run("run.yaml", dry_run=True).plan["tasks"]  # doctest: +SKIP
        20
    """
    return _wait(run_async(spec, **options))


async def grade_async(
    source_run: str,
    evaluators: Iterable[EvaluatorLike],
    *,
    store: SqlStore | str | os.PathLike[str] | None = None,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    gates: str | Sequence[str] = (),
    min_completion_rate: float = 0.8,
    max_evaluator_error_rate: float = 0.1,
    name: str = "",
    registry: Registry | None = None,
    judges: Mapping[str, Any] | None = None,
) -> RunResult:
    """Grade the outputs a Run stored (typically ``run(..., execute_only=True)``) into a new run
    linked to it, without calling the target; see ``evalsi.runs.grade_run``."""
    from evalsi.runs import grade_run, open_store

    return await grade_run(
        open_store(store, create=False),
        source_run,
        evaluators,
        params=params,
        gates=gates,
        min_completion_rate=min_completion_rate,
        max_evaluator_error_rate=max_evaluator_error_rate,
        name=name,
        registry=_registry(registry),
        judges=judges,
    )


def grade(source_run: str, evaluators: Iterable[EvaluatorLike], **options: Any) -> RunResult:
    """Synchronous ``grade_async`` (same arguments); inside an event loop it uses a helper thread.

    Example:
        >>> import evalsi
        >>> from evalsi._api import grade
        >>> r = evalsi.run("run.yaml", execute_only=True)  # doctest: +SKIP
        >>> grade(r.run_id, ["exact-match"]).metric("exact-match").n  # doctest: +SKIP
        20
    """
    return _wait(grade_async(source_run, evaluators, **options))


async def calibrate_async(
    labels: Any,
    judge: EvaluatorLike,
    *,
    params: Mapping[str, Any] | None = None,
    judges: Mapping[str, Any] | None = None,
    metric: str | None = None,
    level: Literal["nominal", "ordinal", "interval", "ratio"] | None = None,
    fields: FieldMap | None = None,
    store: SqlStore | str | os.PathLike[str] | None = None,
    registry: Registry | None = None,
    seed: int = 0,
    name: str = "",
    progress: Progress | None = None,
) -> CalibrationResult:
    """Measure how a judge evaluator agrees with human labels (``evalsi calibrate``).

    The judge evaluator grades every labelled record (a stored run; answers cached like any
    judge's); its scores are compared with the labels: accuracy and Cohen's kappa for
    pass/fail or category labels, Pearson, Spearman and MAE for numbers, Krippendorff's alpha
    with several raters, position bias for ``pairwise``, length bias; each with a 95% interval.
    The calibration is stored under the judge's identity, the evaluator ref, its prompt
    template's hash and its params; reports warn about gates on judges without one.

    Args:
        labels: the labelled records: a path (``.jsonl``, ``.json``, ``.csv``, ``.parquet``) or
            an iterable of dicts or ``Record`` objects, each with ``label`` (one rater) or
            ``labels`` (``{"rater": value}``); see docs/guides/calibration.md.
        judge: the judge evaluator: a name (``"llm-judge"``) or ``{"ref": ..., "params": ...}``.
        params: the evaluator's params, with a name in ``judge`` (e.g. ``{"rubric": ...}``).
        judges: the judge models by name, as for ``evaluate`` (there is no default judge).
        metric: which of the evaluator's metrics to compare (default: its own).
        level: Krippendorff's alpha level for numeric labels (default ``"interval"``; pass/fail
            and category labels are nominal).
        fields: which row fields hold input, output, reference, id... (``FieldMap``).
        store: where the judge's run and the calibration go (default ``.evalsi/evalsi.db``).
        registry: the evaluators to resolve names against (default: built-ins + entry points).
        seed: seed for the bootstrap intervals.
        name: a label for the judge's run.
        progress: called after each batch with (records done, bad records).

    Returns:
        A ``CalibrationResult``: ``agreement``, ``position_bias``, ``length_bias``, ``counts``,
        ``warnings``, ``calibration_id``, ``exit_code``; ``to_dict()`` is the JSON shape of
        ``evalsi calibrate --format json``.

    Example:
        >>> import evalsi
        >>> r = evalsi.calibrate("labels.jsonl", "reference-correctness",
        ...                      judges={"default": {"baseUrl": "http://127.0.0.1:8000/v1",
        ...                                          "model": "qwen2.5-7b"}})  # doctest: +SKIP
        >>> r.agreement["cohen_kappa"]["value"]  # doctest: +SKIP
        0.81
    """
    from evalsi.runs import calibrate_async as calibrate_labels

    return await calibrate_labels(
        labels,
        judge,
        params=params,
        judges=judges,
        metric=metric,
        level=level,
        fields=fields,
        store=store,
        registry=_registry(registry),
        seed=seed,
        name=name,
        progress=progress,
    )


def calibrate(labels: Any, judge: EvaluatorLike, **options: Any) -> CalibrationResult:
    """Synchronous ``calibrate_async`` (same arguments); inside an event loop it uses a helper
    thread.

    Example:
        >>> import evalsi
        >>> r = evalsi.calibrate("prefs.jsonl", "pairwise", judges=JUDGES)  # doctest: +SKIP
    """
    return _wait(calibrate_async(labels, judge, **options))


def _wait(work: Coroutine[Any, Any, T]) -> T:
    """``work`` run to its end: on a loop of its own, or inside a running event loop (a
    notebook) on a helper thread with its own loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(work)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="evalsi") as pool:
        return pool.submit(asyncio.run, work).result()


def _registry(given: Registry | None) -> Registry:
    """The registry the engine is handed: the caller's, else the built-ins, entry-point
    packages and the plugins `evalsi plugin install` recorded (the engine itself never picks
    one)."""
    if given is not None:
        return given
    from evalsi.packs import builtin_registry
    from evalsi.plugins import registry_file

    registry = builtin_registry()
    if registry_file().is_file():  # one file test: no plugin, nothing more imported
        from evalsi.plugins import add_plugins

        add_plugins(registry)
    return registry
