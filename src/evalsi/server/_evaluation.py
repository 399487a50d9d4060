"""EvaluationService: the Score way in over the API (``Evaluate`` and ``EvaluateStream``).

Grading uses the pieces ``evalsi.evaluate`` is made of (``bind_all``, the batching runners, the
``Aggregator`` and the judge clients) so a server answer equals the embedded one; a test proves
it. What differs is only what a server must do differently: bound evaluators are cached per
evaluator list (binding validates params against a JSON Schema, which costs more than grading
one record), results are written inline in one commit per message (a writer thread per call
would cost more than the write), and the judges' HTTP session stays open for the next call.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import platform
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal

import orjson
from google.protobuf import duration_pb2

from evalsi._proto.evalsi.v1alpha1 import evaluation_service_pb2 as pb
from evalsi._proto.evalsi.v1alpha1 import record_pb2
from evalsi.core import (
    LABEL,
    NUMBER,
    PASSED,
    Content,
    EvalsiError,
    EvaluationResult,
    Hasher,
    Interval,
    MetricSummary,
    Outcome,
    ParamError,
    Record,
    ResultBatch,
    RunError,
    UnknownEvaluatorError,
    UserError,
    content_hash,
)
from evalsi.datasets import FieldMap
from evalsi.evaluators import BoundEvaluator, DatasetRunner, judges_needed, use_judges
from evalsi.evaluators._runner import Runner
from evalsi.runs import (
    Aggregator,
    EvaluatorMetrics,
    Gate,
    bind_all,
    build_judges,
    evaluate_gates,
    judges_manifest,
    judges_summary,
    runners_for,
)
from evalsi.server._state import ServerState
from evalsi.store import DEFAULT_PROJECT, check_project_id
from evalsi.wire import (
    gate_to_proto,
    record_from_proto,
    result_to_proto,
    struct_from_proto,
    summary_to_proto,
)

log = logging.getLogger("evalsi.server")

Bootstrap = Literal["percentile", "bca"] | None

DATA_NAME = "<memory>"
"""The data location stored in the run spec: records came in the request, as with a list given
to ``evalsi.evaluate``, so reports know there is no file to re-read."""

_CI_METHODS: dict[str, Bootstrap] = {
    "": None,
    "bootstrap-percentile": "percentile",
    "bootstrap-bca": "bca",
}
_PLAN_CACHE_SIZE = 256
INLINE_RECORDS = 256
"""Requests (or stream messages) with more records are graded in a worker thread, so a big
call does not stall the event loop; fewer are graded inline, where a thread hop costs more."""
_MAX_GATES = 100  # evalsi.runs.parse_gates' limit
_RATE_DEFAULTS = (("min_completion_rate", 0.8), ("max_evaluator_error_rate", 0.1))
# The same canonical JSON the in-memory dataset hashes, so dataset_version equals the embedded
# API's for the same records (a test pins it).
_CANONICAL = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
_CONTENT_KINDS = "text, messages, json, row, tensor or media"
_FIELDS = dataclasses.asdict(FieldMap())
_PYTHON = sys.version.split()[0]
_PLATFORM = platform.platform()


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    """An evaluator list, bound and checked once and reused by every call that names it.

    Record runners hold no state between batches (a long run reuses one for every batch), so
    they are shared; dataset runners accumulate values and are made per call.
    """

    bound: tuple[BoundEvaluator, ...]
    runners: tuple[Runner | None, ...]  # None where a fresh DatasetRunner is needed per call
    judges: frozenset[str]
    specs: tuple[dict[str, Any], ...]
    manifest: tuple[dict[str, Any], ...]
    # Gates parsed against this list (CEL compile and dry run), by their expressions.
    gates: dict[tuple[str, ...], tuple[Gate, ...]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, slots=True)
class _Config:
    """What a request asks for, validated: the plan, how to summarise, the gates."""

    plan: _Plan
    cluster_by: str | None
    bootstrap: Bootstrap
    seed: int
    gates: tuple[Gate, ...]
    rates: dict[str, float]
    project_id: str


class EvaluationHandler:
    """Implements the generated ``EvaluationService`` protocol over ``ServerState``."""

    def __init__(self, state: ServerState) -> None:
        self._state = state
        self._plans: OrderedDict[bytes, _Plan] = OrderedDict()
        self._judge_specs = dict(state.config.judges)

    async def evaluate(self, request: pb.EvaluateRequest, ctx: Any, /) -> pb.EvaluateResponse:
        if not request.records:
            raise UserError("records: empty; send at least one record to grade")
        config = self._config(request, request.options, "")
        grading = _Grading(self._state, config, request.name)
        # A big request is checked, graded, stored and put into its answer in a worker thread,
        # so the event loop keeps serving other calls; a tiny one inline, where a thread hop
        # costs more than the work. (An in-memory SQLite store serves its own thread only.)
        offload = len(request.records) > INLINE_RECORDS and self._state.store.any_thread
        try:
            if offload and not grading.has_async:
                return await asyncio.to_thread(grading.answer_sync, request.records)
            batches = await grading.grade(_records(request.records))  # judges use this loop
            if offload:
                return await asyncio.to_thread(grading.answer, batches)
            return grading.answer(batches)
        except BaseException as e:
            grading.fail(e)
            raise

    async def evaluate_stream(
        self, request: AsyncIterator[pb.EvaluateStreamRequest], ctx: Any, /
    ) -> AsyncIterator[pb.EvaluateStreamResponse]:
        grading: _Grading | None = None
        index = 0  # messages received, for field paths
        try:
            async for message in request:
                if grading is None:
                    if not message.HasField("config"):
                        raise UserError(
                            "config: required in the first message of the stream",
                            hint="send {config: {evaluators: [...]}} first; records may come "
                            "in the same message",
                        )
                    c = message.config
                    grading = _Grading(self._state, self._config(c, c.options, "config."), c.name)
                if message.records:
                    records = _records(message.records, f"message {index + 1}: ")
                    if not grading.started:
                        grading.start()
                    if len(records) > INLINE_RECORDS and not grading.has_async:
                        batches = await asyncio.to_thread(grading.grade_sync, records)
                    else:
                        batches = await grading.grade(records)
                    grading.write()
                    out = pb.EvaluateStreamResponse(run_id=grading.run_id)
                    _add_results(out.results, batches)
                    yield out
                index += 1
            if grading is None:
                raise UserError("the stream held no message; send a config first")
            if not grading.started:
                raise UserError("records: the stream held no record to grade")
            tail, metrics, gates = grading.finish()
        except BaseException as e:
            if grading is not None and grading.started:
                grading.fail(e)
            raise
        last = pb.EvaluateStreamResponse(run_id=grading.run_id, dataset_version=grading.version)
        last.results.extend(result_to_proto(r) for r in tail)
        last.metrics.extend(summary_to_proto(m) for m in metrics)
        last.gates.extend(gate_to_proto(g) for g in gates)
        yield last

    # -- request validation ---------------------------------------------------------------------
    def _config(
        self,
        request: pb.EvaluateRequest | pb.EvaluateStreamConfig,
        options: pb.EvaluateOptions,
        prefix: str,
    ) -> _Config:
        if options.ci_method not in _CI_METHODS:
            raise UserError(
                f"{prefix}options.ci_method: unknown method {options.ci_method!r}",
                hint="leave it empty (Wilson / t / cluster-t by metric kind), or ask for "
                "bootstrap-percentile or bootstrap-bca",
            )
        if options.concurrency < 0:
            raise UserError(f"{prefix}options.concurrency: must be >= 0 (0 lets the server pick)")
        bootstrap = _CI_METHODS[options.ci_method]
        if bootstrap is not None and request.cluster_by:
            raise UserError(
                f"{prefix}cluster_by: cannot be combined with a bootstrap ci_method yet: a "
                "record-level bootstrap would ignore the clusters",
                hint="use cluster_by alone (cluster-robust t interval) or the bootstrap alone",
            )
        seed = options.seed if options.HasField("seed") else 0
        plan = self._plan(request.evaluators, prefix)
        rates = {name: _rate(request, name, default, prefix) for name, default in _RATE_DEFAULTS}
        gates = _gates(plan, tuple(request.gates), prefix)
        project = request.project_id or DEFAULT_PROJECT
        try:
            check_project_id(project)
        except UserError as e:
            raise _at(f"{prefix}project_id", e) from None
        return _Config(plan, request.cluster_by or None, bootstrap, seed, gates, rates, project)

    def _plan(self, specs: Sequence[pb.EvaluatorSpec], prefix: str) -> _Plan:
        if not specs:
            raise UserError(
                f"{prefix}evaluators: empty; name at least one",
                hint='e.g. {"ref": "exact-match"}; GET /v1alpha1/evaluators lists them',
            )
        key = b"\0".join(s.SerializeToString(deterministic=True) for s in specs)
        cached = self._plans.get(key)
        if cached is not None:
            self._plans.move_to_end(key)
            return cached
        registry = self._state.registry
        bound: list[BoundEvaluator] = []
        for i, spec in enumerate(specs):
            at = f"{prefix}evaluators[{i}]"
            if not spec.ref.strip():
                raise UserError(f"{at}.ref: empty; give an evaluator name such as exact-match")
            entry = {"ref": spec.ref, "params": struct_from_proto(spec.params), "name": spec.name}
            try:
                bound.extend(bind_all([entry], registry=registry))
            except UnknownEvaluatorError as e:
                raise _at(f"{at}.ref", e) from None
            except ParamError as e:
                raise _at(f"{at}.params", e) from None
            except UserError as e:
                raise _at(at, e) from None
        # Again as a whole, for what only the list can get wrong (one name used twice).
        checked = tuple(bind_all(bound, registry=registry))
        for i, b in enumerate(checked):
            missing = sorted(set(judges_needed([b])) - set(self._judge_specs))
            if missing:
                raise UserError(
                    f"{prefix}evaluators[{i}]: {b.name} needs a judge named {missing[0]!r}, and "
                    "the server has none configured (evalsi has no default judge)",
                    hint="add it under judges: in the server's evalsi.yaml",
                )
        plan = _Plan(
            bound=checked,
            runners=tuple(
                None if isinstance(r, DatasetRunner) else r for r in runners_for(list(checked))
            ),
            judges=frozenset(judges_needed(list(checked))),
            specs=tuple(b.spec() for b in checked),
            manifest=tuple(
                {"name": b.name, "ref": b.ref, "version": b.manifest.version, "params": b.params}
                for b in checked
            ),
        )
        self._plans[key] = plan
        if len(self._plans) > _PLAN_CACHE_SIZE:
            self._plans.popitem(last=False)
        return plan


def _rate(
    request: pb.EvaluateRequest | pb.EvaluateStreamConfig, name: str, default: float, prefix: str
) -> float:
    if not request.HasField(name):
        return default
    value = float(getattr(request, name))
    if not 0 <= value <= 1:  # NaN fails too
        raise UserError(
            f"{prefix}{name}: must be a fraction between 0 and 1, got {value!r}",
            hint=f"for example {default} ({default:.0%}); leave it out for {default}",
        )
    return value


def _gates(plan: _Plan, exprs: tuple[str, ...], prefix: str) -> tuple[Gate, ...]:
    """The gates parsed and checked against the plan's evaluators (as embedded ``evaluate``
    does before any data is read), cached with the plan."""
    if not exprs:
        return ()
    cached = plan.gates.get(exprs)
    if cached is not None:
        return cached
    if len(exprs) > _MAX_GATES:
        raise UserError(f"{prefix}gates: {len(exprs)} given; the limit is {_MAX_GATES}")
    targets = [EvaluatorMetrics.of(b) for b in plan.bound]
    parsed: list[Gate] = []
    for i, expr in enumerate(exprs):
        try:
            parsed.append(Gate.parse(expr, targets, index=i + 1))
        except UserError as e:
            # "gate 3 `expr`: problem" -> "gates[2]: `expr`: problem"
            e.message = e.message.removeprefix(f"gate {i + 1} ")
            raise _at(f"{prefix}gates[{i}]", e) from None
    if len(plan.gates) >= _PLAN_CACHE_SIZE:
        plan.gates.clear()
    plan.gates[exprs] = result = tuple(parsed)
    return result


def _at(path: str, e: UserError) -> UserError:
    """``e`` (same class, so the same status code) with the field path in front of its message."""
    e.message = f"{path}: {e.message}"
    e.args = (e.message,)
    return e


def _records(messages: Sequence[record_pb2.Record], where: str = "") -> list[Record]:
    """Core records from the request's; ``where`` names the stream message, if any."""
    out: list[Record] = []
    for i, message in enumerate(messages):
        at = f"{where}records[{i}]"
        if not message.id:
            raise UserError(f"{at}.id: empty; every record needs an id (unique within the call)")
        if "\x00" in message.id:
            raise UserError(f"{at}.id: contains a NUL character")
        texts = _texts(message)
        if texts is not None:
            out.append(_text_record(message.id, texts))
            continue
        for name in ("input", "output", "reference"):
            if message.HasField(name) and getattr(message, name).WhichOneof("kind") is None:
                raise UserError(f"{at}.{name}: a Content must hold one of {_CONTENT_KINDS}")
        for j, item in enumerate(message.context):
            if item.WhichOneof("kind") is None:
                raise UserError(f"{at}.context[{j}]: a Content must hold one of {_CONTENT_KINDS}")
        try:
            out.append(record_from_proto(message))
        except (ValueError, TypeError) as e:
            raise UserError(f"{at}: {e}") from None
    return out


_TEXT_ONLY = frozenset(("id", "input", "output", "reference"))


def _texts(message: record_pb2.Record) -> dict[str, str] | None:
    """The text contents of a record holding nothing but an id and text contents (most do),
    else None."""
    texts: dict[str, str] = {}
    for field, value in message.ListFields():
        if field.name not in _TEXT_ONLY:
            return None
        if field.name != "id":
            if value.WhichOneof("kind") != "text":
                return None
            texts[field.name] = value.text
    return texts


def _text_record(record_id: str, texts: dict[str, str]) -> Record:
    """What ``record_from_proto`` builds for such a record, without its walk over every
    field (a test pins the equality)."""

    def content(name: str) -> Content | None:
        text = texts.get(name)
        return None if text is None else Content.of_text(text)

    return Record(
        id=record_id,
        input=content("input"),
        output=content("output"),
        reference=content("reference"),
        context=[],
        metadata={},
    )


def _add_results(out: Any, batches: list[ResultBatch]) -> None:
    """``result_to_proto`` of every entry, built straight from the batch's columns where they
    say everything (one constructor call each instead of a Python walk: ~4x faster on big
    answers); entries with full scores take the general converter."""
    add = out.add
    for batch in batches:
        if not len(batch):
            continue
        duration = duration_pb2.Duration()
        duration.FromNanoseconds(round(batch.duration * 1e9))
        common = {
            "evaluator": batch.evaluator, "evaluator_ref": batch.ref, "trial": batch.trial,
            "duration": duration,
        }  # fmt: skip
        metric, ids, kinds, values, texts = (
            batch.metric, batch.ids, batch.kind, batch.value, batch.text
        )  # fmt: skip
        for i, outcome in enumerate(batch.outcome):
            score: dict[str, Any] | None = None
            if batch.scores[i] is None and outcome in _OUTCOME_PROTO:
                text, value, kind = texts[i], values[i], kinds[i]
                if outcome != Outcome.SCORED:
                    add(record_id=ids[i], outcome=_OUTCOME_PROTO[outcome], reason=text or "",
                        **common)  # fmt: skip
                    continue
                if kind == PASSED and value is not None:
                    score = {"name": metric, "passed": value == 1.0, "explanation": text or ""}
                elif kind == NUMBER and value is not None:
                    score = {"name": metric, "number": value, "explanation": text or ""}
                elif kind == LABEL and text is not None:
                    score = {"name": metric, "label": text}
            if score is None:
                out.append(result_to_proto(batch[i]))
                continue
            add(record_id=ids[i], outcome=_OUTCOME_PROTO[outcome], scores=[score], **common)


def _outcomes() -> dict[int, int]:
    """Core outcome → wire outcome, as ``result_to_proto`` maps them."""
    out = {}
    for outcome in Outcome:
        result = EvaluationResult(record_id="", evaluator="", evaluator_ref="", outcome=outcome)
        out[int(outcome)] = int(result_to_proto(result).outcome)
    return out


_OUTCOME_PROTO = _outcomes()


def _canonical(value: Any) -> Any:
    if isinstance(value, Content):
        return value.to_value()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    return str(value)


class _Grading:
    """One Score run fed by the request(s): grade batches, summarise, gate, store.

    A one-message ``Evaluate`` grades everything, then stores the finished run with its
    results in one transaction (``save``); a stream creates the run up front, commits each
    message's results (``write``) and marks it done at the end (``finish``).
    """

    def __init__(self, state: ServerState, config: _Config, name: str) -> None:
        self.store = state.store
        self.config = config
        self.name = name
        plan = config.plan
        self.runners: list[Runner] = [
            r if r is not None else DatasetRunner(b)
            for r, b in zip(plan.runners, plan.bound, strict=True)
        ]
        self.has_async = any(not isinstance(r, DatasetRunner) and r.is_async for r in self.runners)
        self.aggregator = Aggregator(
            [(b.name, b.manifest.outputs) for b in plan.bound],
            cluster_by=config.cluster_by,
            keep_values=config.bootstrap is not None,
        )
        specs = {n: spec for n, spec in state.config.judges.items() if n in plan.judges}
        self.judges = build_judges(specs, self.store, list(plan.bound)) if specs else {}
        self.spec: dict[str, Any] = {
            "evaluators": list(plan.specs),
            "data": DATA_NAME,
            "fields": _FIELDS,
            "cluster_by": config.cluster_by,
            "bootstrap": config.bootstrap,
            "seed": config.seed,
            "on_bad_record": "fail",
        }
        if config.gates:
            self.spec["gates"] = [g.expr for g in config.gates]
            self.spec.update(config.rates)
        if self.judges:
            self.spec["judges"] = judges_manifest(self.judges)
        self.run_id = ""
        self.records = 0
        self._graded: list[tuple[int, int, ResultBatch]] = []
        self._hasher = Hasher()
        self._intervals: dict[int, dict[str, Interval]] = {}
        # A worker thread may still be saving when the request is cancelled: the first of
        # `save` and `fail` to take the lock decides what the run is.
        self._lock = threading.Lock()
        self._settled = False
        self._begun = False  # records passed validation: a failure from here leaves a run

    @property
    def started(self) -> bool:
        return bool(self.run_id)

    @property
    def version(self) -> str:
        return self._hasher.hexdigest()

    def start(self) -> None:
        self.run_id = self.store.create_run(
            kind="score", spec=self.spec, name=self.name, project_id=self.config.project_id
        ).id
        self._begun = True

    async def grade(self, records: list[Record]) -> list[ResultBatch]:
        """Grade ``records`` with every record-scope evaluator (judges on this loop)."""
        if not self.has_async:
            return self.grade_sync(records)
        self._hash(records)
        graded: list[tuple[int, int, ResultBatch]] = []
        with use_judges(self.judges):
            for index, runner in enumerate(self.runners):
                if isinstance(runner, DatasetRunner):
                    runner.feed(records)
                    continue
                batch = await runner.run_async(records) if runner.is_async else runner.run(records)
                self.aggregator.add(index, batch, records)
                graded.append((index, self.records, batch))
        return self._graded_now(graded, len(records))

    def grade_sync(self, records: list[Record]) -> list[ResultBatch]:
        """``grade`` for plans without async evaluators; safe in a worker thread."""
        self._hash(records)
        graded: list[tuple[int, int, ResultBatch]] = []
        for index, runner in enumerate(self.runners):
            if isinstance(runner, DatasetRunner):
                runner.feed(records)
                continue
            batch = runner.run(records)
            self.aggregator.add(index, batch, records)
            graded.append((index, self.records, batch))
        return self._graded_now(graded, len(records))

    def _hash(self, records: list[Record]) -> None:
        self._begun = True
        update, dumps = self._hasher.update, orjson.dumps
        for record in records:
            update(dumps(record, default=_canonical, option=_CANONICAL))
            update(b"\n")

    def _graded_now(
        self, graded: list[tuple[int, int, ResultBatch]], records: int
    ) -> list[ResultBatch]:
        self._graded = graded
        self.records += records
        return [batch for _, _, batch in graded]

    def write(self) -> None:
        """Commit what the last ``grade`` produced (a stream, once per message)."""
        if self._graded:
            self.store.write_batches(self.run_id, self._graded)

    def answer_sync(self, records: Sequence[record_pb2.Record]) -> pb.EvaluateResponse:
        return self.answer(self.grade_sync(_records(records)))

    def answer(self, batches: list[ResultBatch]) -> pb.EvaluateResponse:
        """Store the finished run (``save``) and build the response naming it."""
        tail, metrics, gates = self.save()
        response = pb.EvaluateResponse(
            run_id=self.run_id, dataset_version=self.version, records=self.records, status="done"
        )
        _add_results(response.results, batches)
        response.results.extend(result_to_proto(r) for r in tail)
        response.metrics.extend(summary_to_proto(m) for m in metrics)
        response.gates.extend(gate_to_proto(g) for g in gates)
        return response

    def save(self) -> tuple[list[EvaluationResult], list[MetricSummary], list[dict[str, Any]]]:
        """Summarise, gate, and store the finished run with every result in one transaction;
        the dataset-scope results, the summaries and the gate verdicts."""
        rows, tail = self._dataset_scope()
        metrics, gates, summary, manifest = self._conclude()
        with self._lock:
            if self._settled:  # the request was cancelled meanwhile; `fail` stored the run
                raise RunError("the request was cancelled before its run was stored")
            self.run_id = self.store.save_run(
                kind="score",
                spec=self.spec,
                name=self.name,
                project_id=self.config.project_id,
                status="done",
                records=self.records,
                summary=summary,
                manifest=manifest,
                batches=[*self._graded, *rows],
            )
            self._settled = True
        return tail, metrics, gates

    def finish(self) -> tuple[list[EvaluationResult], list[MetricSummary], list[dict[str, Any]]]:
        """End a stream's run: dataset scope stored, the run marked done with its summary."""
        rows, tail = self._dataset_scope()
        if rows:
            self.store.write_batches(self.run_id, rows)
        metrics, gates, summary, manifest = self._conclude()
        self.store.finish_run(
            self.run_id, status="done", records=self.records, summary=summary, manifest=manifest
        )
        self._settled = True
        return tail, metrics, gates

    def _dataset_scope(self) -> tuple[list[tuple[int, int, ResultBatch]], list[EvaluationResult]]:
        """Reduce the dataset-scope evaluators (after the last record)."""
        rows: list[tuple[int, int, ResultBatch]] = []
        out: list[EvaluationResult] = []
        for index, runner in enumerate(self.runners):
            if not isinstance(runner, DatasetRunner):
                continue
            result = runner.finish()
            self.aggregator.add_dataset(
                index, result, mapped=len(runner.values), skipped=runner.skipped,
                errors=runner.errors,
            )  # fmt: skip
            rows.append((index, -1, ResultBatch.of([result], runner.bound.manifest.ref.name)))
            out.append(result)
            if self.config.bootstrap and runner.values:
                from evalsi.runs import dataset_bootstrap

                self._intervals[index] = dataset_bootstrap(
                    runner, bootstrap=self.config.bootstrap, seed=self.config.seed
                )
        return rows, out

    def _conclude(
        self,
    ) -> tuple[list[MetricSummary], list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
        """The metric summaries and gate verdicts, and the run's summary and manifest as the
        embedded Score path stores them."""
        config = self.config
        metrics = self.aggregator.summaries(
            bootstrap=config.bootstrap, seed=config.seed, dataset_intervals=self._intervals
        )
        gates = evaluate_gates(config.gates, metrics, **config.rates) if config.gates else []
        summary: dict[str, Any] = {
            "metrics": [m.to_dict() for m in metrics],
            "gates": gates,
            "dataset": {"source": DATA_NAME, "version": self.version},
            "bad_records": 0,
            "bad_examples": [],
        }
        manifest = self._manifest()
        if self.judges:
            summary["judges"] = judges_summary(self.judges)
            manifest["judges"] = judges_manifest(self.judges)
        return metrics, gates, summary, manifest

    def fail(self, error: BaseException) -> None:
        """Record why the run stopped (a stream keeps what it committed before); never
        raises, so the request's own error is what the caller sees."""
        message = str(error) if isinstance(error, EvalsiError) else type(error).__name__
        status = "failed" if isinstance(error, Exception) else "interrupted"
        with self._lock:
            if self._settled or not self._begun:  # a bad request leaves no run
                return
            self._settled = True
        try:
            if self.run_id:
                self.store.finish_run(
                    self.run_id, status=status, records=self.records, summary=None,
                    manifest=None, error=message,
                )  # fmt: skip
            else:
                self.run_id = self.store.save_run(
                    kind="score", spec=self.spec, name=self.name, status=status,
                    project_id=self.config.project_id,
                    records=self.records, summary=None, manifest=None, error=message,
                )  # fmt: skip
        except Exception:  # the store failing too must not hide the first error
            log.warning("cannot record the failed run", exc_info=True)

    def _manifest(self) -> dict[str, Any]:
        from evalsi import __version__

        return {
            "evalsi_version": __version__,
            "spec_hash": content_hash(self.spec),
            "evaluators": list(self.config.plan.manifest),
            "dataset": {"source": DATA_NAME, "version": self.version, "records": self.records},
            "seed": self.config.seed,
            "python": _PYTHON,
            "platform": _PLATFORM,
            "created_at": time.time(),
            "unpinned": [],
        }


__all__ = ["EvaluationHandler"]
