"""EvaluationService: the Score way in over the API (``Evaluate`` and ``EvaluateStream``).

Grading uses the pieces ``evalsi.evaluate`` is made of (``bind_all``, the batching runners, the
``Aggregator`` and the judge clients) so a server answer equals the embedded one; a test proves
it. What differs is only what a server must do differently: bound evaluators are cached per
evaluator list (binding validates params against a JSON Schema, which costs more than grading
one record), results are written inline in one commit per message (a writer thread per call
would cost more than the write), and the judges' HTTP session stays open for the next call.
"""

from __future__ import annotations

import dataclasses
import platform
import sys
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal

import orjson

from evalsi._proto.evalsi.v1alpha1 import evaluation_service_pb2 as pb
from evalsi._proto.evalsi.v1alpha1 import record_pb2
from evalsi.core import (
    Content,
    EvalsiError,
    EvaluationResult,
    Hasher,
    Interval,
    MetricSummary,
    ParamError,
    Record,
    ResultBatch,
    UnknownEvaluatorError,
    UserError,
    content_hash,
)
from evalsi.datasets import FieldMap
from evalsi.evaluators import BoundEvaluator, DatasetRunner, judges_needed, use_judges
from evalsi.evaluators._runner import Runner
from evalsi.runs import (
    Aggregator,
    bind_all,
    build_judges,
    judges_manifest,
    judges_summary,
    runners_for,
)
from evalsi.server._state import ServerState
from evalsi.wire import record_from_proto, result_to_proto, struct_from_proto, summary_to_proto

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


@dataclasses.dataclass(frozen=True, slots=True)
class _Config:
    """What a request asks for, validated: the plan and how to summarise."""

    plan: _Plan
    cluster_by: str | None
    bootstrap: Bootstrap
    seed: int


class EvaluationHandler:
    """Implements the generated ``EvaluationService`` protocol over ``ServerState``."""

    def __init__(self, state: ServerState) -> None:
        self._state = state
        self._plans: OrderedDict[bytes, _Plan] = OrderedDict()
        self._judge_specs = dict(state.config.judges)

    async def evaluate(self, request: pb.EvaluateRequest, ctx: Any, /) -> pb.EvaluateResponse:
        if not request.records:
            raise UserError("records: empty; send at least one record to grade")
        config = self._config(request.evaluators, request.cluster_by, request.options, "")
        records = _records(request.records)
        grading = _Grading(self._state, config)
        grading.start()
        try:
            batches = await grading.grade(records)
            tail = grading.finish_dataset_scope()
        except BaseException as e:
            grading.fail(e)
            raise
        metrics = grading.done()
        response = pb.EvaluateResponse(
            run_id=grading.run_id,
            dataset_version=grading.version,
            records=grading.records,
            status="done",
        )
        _add_results(response.results, batches)
        response.results.extend(result_to_proto(r) for r in tail)
        response.metrics.extend(summary_to_proto(m) for m in metrics)
        return response

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
                    grading = _Grading(
                        self._state,
                        self._config(c.evaluators, c.cluster_by, c.options, "config."),
                    )
                if message.records:
                    records = _records(message.records, f"message {index + 1}: ")
                    if not grading.started:
                        grading.start()
                    batches = await grading.grade(records)
                    out = pb.EvaluateStreamResponse(run_id=grading.run_id)
                    _add_results(out.results, batches)
                    yield out
                index += 1
            if grading is None:
                raise UserError("the stream held no message; send a config first")
            if not grading.started:
                raise UserError("records: the stream held no record to grade")
            tail = grading.finish_dataset_scope()
        except BaseException as e:
            if grading is not None and grading.started:
                grading.fail(e)
            raise
        metrics = grading.done()
        last = pb.EvaluateStreamResponse(run_id=grading.run_id, dataset_version=grading.version)
        last.results.extend(result_to_proto(r) for r in tail)
        last.metrics.extend(summary_to_proto(m) for m in metrics)
        yield last

    # -- request validation ---------------------------------------------------------------------
    def _config(
        self,
        specs: Sequence[pb.EvaluatorSpec],
        cluster_by: str,
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
        if bootstrap is not None and cluster_by:
            raise UserError(
                f"{prefix}cluster_by: cannot be combined with a bootstrap ci_method yet: a "
                "record-level bootstrap would ignore the clusters",
                hint="use cluster_by alone (cluster-robust t interval) or the bootstrap alone",
            )
        seed = options.seed if options.HasField("seed") else 0
        return _Config(self._plan(specs, prefix), cluster_by or None, bootstrap, seed)

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


def _add_results(out: Any, batches: list[ResultBatch]) -> None:
    for batch in batches:
        out.extend(result_to_proto(batch[i]) for i in range(len(batch)))


def _canonical(value: Any) -> Any:
    if isinstance(value, Content):
        return value.to_value()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    return str(value)


class _Grading:
    """One Score run fed by the request(s): grade batches, store them, summarise at the end."""

    def __init__(self, state: ServerState, config: _Config) -> None:
        self.store = state.store
        self.config = config
        plan = config.plan
        self.runners: list[Runner] = [
            r if r is not None else DatasetRunner(b)
            for r, b in zip(plan.runners, plan.bound, strict=True)
        ]
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
        if self.judges:
            self.spec["judges"] = judges_manifest(self.judges)
        self.run_id = ""
        self.records = 0
        self._hasher = Hasher()
        self._intervals: dict[int, dict[str, Interval]] = {}

    @property
    def started(self) -> bool:
        return bool(self.run_id)

    @property
    def version(self) -> str:
        return self._hasher.hexdigest()

    def start(self) -> None:
        self.run_id = self.store.create_run(kind="score", spec=self.spec).id

    async def grade(self, records: list[Record]) -> list[ResultBatch]:
        """Grade ``records`` with every record-scope evaluator, commit, and return the results."""
        update, dumps = self._hasher.update, orjson.dumps
        for record in records:
            update(dumps(record, default=_canonical, option=_CANONICAL))
            update(b"\n")
        graded: list[tuple[int, int, ResultBatch]] = []
        with use_judges(self.judges):
            for index, runner in enumerate(self.runners):
                if isinstance(runner, DatasetRunner):
                    runner.feed(records)
                    continue
                batch = await runner.run_async(records) if runner.is_async else runner.run(records)
                self.aggregator.add(index, batch, records)
                graded.append((index, self.records, batch))
        if graded:
            self.store.write_batches(self.run_id, graded)
        self.records += len(records)
        return [batch for _, _, batch in graded]

    def finish_dataset_scope(self) -> list[EvaluationResult]:
        """Reduce the dataset-scope evaluators (after the last record); store their results."""
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
        if rows:
            self.store.write_batches(self.run_id, rows)
        return out

    def done(self) -> list[MetricSummary]:
        """The metric summaries; the run is marked done with them."""
        metrics = self.aggregator.summaries(
            bootstrap=self.config.bootstrap,
            seed=self.config.seed,
            dataset_intervals=self._intervals,
        )
        summary: dict[str, Any] = {
            "metrics": [m.to_dict() for m in metrics],
            "gates": [],
            "dataset": {"source": DATA_NAME, "version": self.version},
            "bad_records": 0,
            "bad_examples": [],
        }
        manifest = self._manifest()
        if self.judges:
            summary["judges"] = judges_summary(self.judges)
            manifest["judges"] = judges_manifest(self.judges)
        self.store.finish_run(
            self.run_id, status="done", records=self.records, summary=summary, manifest=manifest
        )
        return metrics

    def fail(self, error: BaseException) -> None:
        """Record why the run stopped; what was committed before stays."""
        message = str(error) if isinstance(error, EvalsiError) else type(error).__name__
        status = "failed" if isinstance(error, Exception) else "interrupted"
        self.store.finish_run(
            self.run_id,
            status=status,
            records=self.records,
            summary=None,
            manifest=None,
            error=message,
        )

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
