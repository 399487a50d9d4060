"""One Score run on the server: the validated request (``_Plan``, ``_Config``), grading with
the pieces ``evalsi.evaluate`` is made of, the summary and gates, and the stored run
(``_Grading``); plus building result messages straight from result columns (``_add_results``).
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import logging
import threading
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, TypeVar

import orjson
from google.protobuf import duration_pb2

from evalsi._proto.evalsi.v1alpha1 import evaluation_service_pb2 as pb
from evalsi._proto.evalsi.v1alpha1 import record_pb2
from evalsi.connectors import Resilience
from evalsi.core import (
    LABEL,
    NUMBER,
    PASSED,
    Content,
    EvaluationResult,
    Hasher,
    MetricSummary,
    Outcome,
    Record,
    ResultBatch,
    RunError,
    RunStatus,
)
from evalsi.datasets import FieldMap, RepeatedIds
from evalsi.evaluators import BoundEvaluator, RecordRunner, Runner
from evalsi.runs import Conclusion, Gate, RunRow, ScoreSession, build_judges, judges_manifest
from evalsi.server._egress import server_egress
from evalsi.server._guard import principal_id
from evalsi.server._proto_records import _records
from evalsi.server._state import ServerState
from evalsi.wire import gate_to_proto, result_to_proto, summary_to_proto, warning_to_proto

log = logging.getLogger("evalsi.server")

T = TypeVar("T")
R = TypeVar("R", pb.EvaluateResponse, pb.EvaluateStreamResponse)
_End = tuple[list[EvaluationResult], list[MetricSummary], list[dict[str, Any]]]
"""The end of a run: its dataset-scope results, summaries and gate verdicts."""

_GRADERS = ThreadPoolExecutor(max_workers=8, thread_name_prefix="evalsi-grading")
"""Where Evaluate's sync evaluators run: never on the event loop, which also serves health
checks, OTLP ingest and every other call. A pool of its own, so calls stuck in C code (which
the time limit cannot stop) hold grading threads, not the loop's default executor that the
store and the ingest use."""


_POLICY_GRADERS = ThreadPoolExecutor(max_workers=8, thread_name_prefix="evalsi-policy-grading")
"""Where the Watch policies' sync evaluators run: grading threads too, but not Evaluate's, so
background traces stuck on a slow evaluator never make a caller's Evaluate wait for a thread."""


async def off_loop(fn: Callable[..., T], *args: Any, pool: ThreadPoolExecutor = _GRADERS) -> T:
    """``fn(*args)`` in a grading thread, with this task's context (as ``asyncio.to_thread``)."""
    call = functools.partial(contextvars.copy_context().run, fn, *args)
    return await asyncio.get_running_loop().run_in_executor(pool, call)


def grade_in_threads(
    time_limit: float,
) -> Callable[[RecordRunner, Sequence[Record], int], Awaitable[ResultBatch]]:
    """How the policies grade with a sync evaluator on the server (``SyncGrading``): in a
    policy grading thread, each call stopped after ``time_limit`` seconds, as Evaluate's are."""

    async def grade(runner: RecordRunner, records: Sequence[Record], trial: int) -> ResultBatch:
        run = functools.partial(runner.run, records, trial=trial, time_limit=time_limit)
        return await off_loop(run, pool=_POLICY_GRADERS)

    return grade


Bootstrap = Literal["percentile", "bca"] | None

DATA_NAME = "<memory>"
"""The data location stored in the run spec: records came in the request, as with a list given
to ``evalsi.evaluate``, so reports know there is no file to re-read."""

# The same canonical JSON the in-memory dataset hashes, so dataset_version equals the embedded
# API's for the same records (a test pins it).
_CANONICAL = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
_FIELDS = dataclasses.asdict(FieldMap())


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
    warnings: tuple[dict[str, Any], ...] = ()
    """What the caller noticed reading its data; a kind here replaces the server's own."""
    dataset_version: str = ""
    """The caller's hash of the file its records came from; empty: the records' own hash."""


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
        plan = config.plan
        specs = {n: spec for n, spec in state.config.judges.items() if n in plan.judges}
        resilience = Resilience(egress=server_egress(state.config))
        self.judges = (
            build_judges(specs, self.store, list(plan.bound), resilience=resilience)
            if specs
            else {}
        )
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
        self.session = ScoreSession(
            plan.bound,
            spec=self.spec,
            runners=plan.runners,
            cluster_by=config.cluster_by,
            bootstrap=config.bootstrap,
            seed=config.seed,
            gates=config.gates,
            rates=config.rates,
            judges=self.judges,
            time_limit=float(state.config.limits.evaluator_seconds),
        )
        self.row = RunRow(
            self.store,
            kind="score",
            spec=self.spec,
            name=name,
            project_id=config.project_id,
            created_by=principal_id(state),
        )
        self._graded: list[tuple[int, int, ResultBatch]] = []
        self._hasher = Hasher()
        # Ids that repeat across the whole call (every message of a stream), as a dataset
        # pass finds them: each is still graded under its own position.
        self._ids = RepeatedIds()
        self.warnings: list[dict[str, Any]] = []
        # A worker thread may still be saving when the request is cancelled: the first of
        # `save` and `fail` to take the lock decides what the run is.
        self._lock = threading.Lock()
        self._settled = False
        self._begun = False  # records passed validation: a failure from here leaves a run

    @property
    def run_id(self) -> str:
        return self.row.run_id

    @property
    def started(self) -> bool:
        return bool(self.run_id)

    @property
    def version(self) -> str:
        return self.config.dataset_version or self._hasher.hexdigest()

    def start(self) -> None:
        self.row.open()
        self._begun = True

    @property
    def records(self) -> int:
        return self.session.records

    async def grade(self, records: list[Record]) -> list[ResultBatch]:
        """Grade ``records``: async evaluators (judges) on this loop, sync ones in a grading
        thread under the time limit."""
        if not self.session.has_async:
            return await off_loop(self.grade_sync, records)
        self._hash(records)
        self._graded = await self.session.grade(records, off_loop=off_loop)
        return [batch for _, _, batch in self._graded]

    def grade_sync(self, records: list[Record]) -> list[ResultBatch]:
        """``grade`` for plans without async evaluators, in a worker thread (it blocks)."""
        self._hash(records)
        self._graded = self.session.grade_sync(records)
        return [batch for _, _, batch in self._graded]

    def _hash(self, records: list[Record]) -> None:
        self._begun = True
        self._ids.add(records, self.session.records + 1)
        update, dumps = self._hasher.update, orjson.dumps
        for record in records:
            update(dumps(record, default=_canonical, option=_CANONICAL))
            update(b"\n")

    def write(self) -> None:
        """Commit what the last ``grade`` produced (a stream, once per message)."""
        if self._graded:
            self.store.write_batches(self.run_id, self._graded)

    def answer_sync(self, records: Sequence[record_pb2.Record]) -> pb.EvaluateResponse:
        return self.answer(self.grade_sync(_records(records)))

    def answer(self, batches: list[ResultBatch]) -> pb.EvaluateResponse:
        """Store the finished run (``save``) and build the response naming it."""
        end = self.save()
        response = pb.EvaluateResponse(
            run_id=self.run_id, dataset_version=self.version, records=self.records, status="done"
        )
        _add_results(response.results, batches)
        return self.concluded(response, end)

    def concluded(self, out: R, end: _End) -> R:
        """``out`` (a response) with the end of the run: the dataset-scope results, the
        summaries, the gate verdicts and the warnings."""
        tail, metrics, gates = end
        out.results.extend(result_to_proto(r) for r in tail)
        out.metrics.extend(summary_to_proto(m) for m in metrics)
        out.gates.extend(gate_to_proto(g) for g in gates)
        out.warnings.extend(warning_to_proto(w) for w in self.warnings)
        return out

    def save(self) -> _End:
        """Summarise, gate, and store the finished run with every result in one transaction;
        the dataset-scope results, the summaries and the gate verdicts."""
        end = self._conclude()
        with self._lock:
            if self._settled:  # the request was cancelled meanwhile; `fail` stored the run
                raise RunError("the request was cancelled before its run was stored")
            self.row.save(
                RunStatus.DONE,
                records=self.records,
                summary=end.summary,
                manifest=end.manifest,
                batches=[*self._graded, *end.dataset_rows],
            )
            self._settled = True
        return end.dataset_results, end.metrics, end.gates

    def finish(self) -> _End:
        """End a stream's run: dataset scope stored, the run marked done with its summary."""
        end = self._conclude()
        if end.dataset_rows:
            self.store.write_batches(self.run_id, end.dataset_rows)
        self.row.finish(
            RunStatus.DONE, records=self.records, summary=end.summary, manifest=end.manifest
        )
        self._settled = True
        return end.dataset_results, end.metrics, end.gates

    def _conclude(self) -> Conclusion:
        """The session's conclusion, with the caller's warnings ahead of the server's own."""
        repeated = self._ids.warning(kind_of_position="record")
        given = {w["kind"] for w in self.config.warnings}
        own = [repeated.to_dict()] if repeated is not None else []
        self.warnings = [
            *map(dict, self.config.warnings),
            *(w for w in own if w["kind"] not in given),
        ]
        end = self.session.conclude(source=DATA_NAME, version=self.version, warnings=self.warnings)
        self.warnings = end.summary["warnings"]  # with what grading noticed (cluster keys)
        return end

    def fail(self, error: BaseException) -> None:
        """Record why the run stopped (a stream keeps what it committed before); never
        raises, so the request's own error is what the caller sees."""
        with self._lock:
            if self._settled or not self._begun:  # a bad request leaves no run
                return
            self._settled = True
        try:
            self.row.fail(error, records=self.records, detail=False)
        except Exception:  # the store failing too must not hide the first error
            log.warning("cannot record the failed run", exc_info=True)
