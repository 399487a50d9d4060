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
import re
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from typing import Any

from evalsi._proto.evalsi.v1alpha1 import evaluation_service_pb2 as pb
from evalsi.core import ParamError, UnknownEvaluatorError, UserError
from evalsi.evaluators import BoundEvaluator, DatasetRunner, judges_needed
from evalsi.runs import EvaluatorMetrics, Gate, bind_all, require_sandboxes, runners_for
from evalsi.server._grading import Bootstrap, _add_results, _Config, _Grading, _Plan, off_loop
from evalsi.server._proto_records import _records
from evalsi.server._state import ServerState
from evalsi.store import DEFAULT_PROJECT, check_project_id
from evalsi.wire import (
    struct_from_proto,
    warning_from_proto,
)

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
_VERSION = re.compile(r"sha256:[0-9a-f]{64}")  # a dataset version, as every reader writes it
_RATE_DEFAULTS = (("min_completion_rate", 0.8), ("max_evaluator_error_rate", 0.1))
# A caller's warnings are stored with its run as given: bounded so they stay a note.
_MAX_WARNINGS, _MAX_EXAMPLES, _MAX_WARNING_CHARS = 16, 16, 4096


def _within_limit(count: int, most: int, where: str) -> None:
    """Records of one request (or stream message) within ``limits.maxRequestRecords``."""
    if count > most:
        raise UserError(
            f"{where}records: {count} records is over this server's limit of {most} per "
            "request (limits.maxRequestRecords in its evalsi.yaml)",
            hint="send them in several calls, or as several EvaluateStream messages",
        )


class EvaluationHandler:
    """Implements the generated ``EvaluationService`` protocol over ``ServerState``."""

    def __init__(self, state: ServerState) -> None:
        self._state = state
        self._plans: OrderedDict[bytes, _Plan] = OrderedDict()
        self._judge_specs = dict(state.config.judges)

    async def evaluate(self, request: pb.EvaluateRequest, ctx: Any, /) -> pb.EvaluateResponse:
        if not request.records:
            raise UserError("records: empty; send at least one record to grade")
        _within_limit(len(request.records), self._state.config.limits.max_request_records, "")
        config = self._config(request, request.options, "")
        grading = _Grading(self._state, config, request.name)
        # A big request is checked, graded, stored and put into its answer in a worker thread,
        # so the event loop keeps serving other calls; a tiny one inline, where a thread hop
        # costs more than the work. (An in-memory SQLite store serves its own thread only.)
        offload = len(request.records) > INLINE_RECORDS and self._state.store.any_thread
        try:
            if offload and not grading.session.has_async:
                return await off_loop(grading.answer_sync, request.records)
            # sync evaluators in a grading thread under limits.evaluatorSeconds, whatever the
            # size: one slow call must not hold the loop; judges use this loop
            batches = await grading.grade(_records(request.records))
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
                    most = self._state.config.limits.max_request_records
                    _within_limit(len(message.records), most, f"message {index + 1}: ")
                    records = _records(message.records, f"message {index + 1}: ")
                    if not grading.started:
                        grading.start()
                    batches = await grading.grade(records)  # sync evaluators off the loop
                    grading.write()
                    out = pb.EvaluateStreamResponse(run_id=grading.run_id)
                    _add_results(out.results, batches)
                    yield out
                index += 1
            if grading is None:
                raise UserError("the stream held no message; send a config first")
            if not grading.started:
                raise UserError("records: the stream held no record to grade")
            end = grading.finish()
        except BaseException as e:
            if grading is not None and grading.started:
                grading.fail(e)
            raise
        last = pb.EvaluateStreamResponse(run_id=grading.run_id, dataset_version=grading.version)
        yield grading.concluded(last, end)

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
                hint="leave it empty (Wilson / t, cluster-wilson / cluster-t by metric kind), "
                "or ask for "
                "bootstrap-percentile or bootstrap-bca",
            )
        if options.concurrency < 0:
            raise UserError(f"{prefix}options.concurrency: must be >= 0 (0 lets the server pick)")
        bootstrap = _CI_METHODS[options.ci_method]
        if bootstrap is not None and request.cluster_by:
            raise UserError(
                f"{prefix}cluster_by: cannot be combined with a bootstrap ci_method yet: a "
                "record-level bootstrap would ignore the clusters",
                hint="use cluster_by alone (a cluster-adjusted interval) or the bootstrap alone",
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
        warnings = _caller_warnings(request, prefix)
        if request.dataset_version and not _VERSION.fullmatch(request.dataset_version):
            raise UserError(
                f"{prefix}dataset_version: expected sha256:<64 lowercase hex digits> or empty, "
                f"got {request.dataset_version[:80]!r}"
            )
        return _Config(
            plan, request.cluster_by or None, bootstrap, seed, gates, rates, project, warnings,
            request.dataset_version,
        )  # fmt: skip

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
        require_sandboxes(checked)  # a code evaluator with no sandbox here: 400, nothing graded
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


def _caller_warnings(
    request: pb.EvaluateRequest | pb.EvaluateStreamConfig, prefix: str
) -> tuple[dict[str, Any], ...]:
    """The warnings the caller sends with its data, checked against the bounds above."""
    if len(request.warnings) > _MAX_WARNINGS:
        raise UserError(f"{prefix}warnings: {len(request.warnings)} given; at most {_MAX_WARNINGS}")
    out: list[dict[str, Any]] = []
    for i, w in enumerate(request.warnings):
        at = f"{prefix}warnings[{i}]"
        if not w.kind.strip():
            raise UserError(f"{at}.kind: empty; name the kind (bad_records, duplicate_ids, ...)")
        if len(w.examples) > _MAX_EXAMPLES:
            raise UserError(f"{at}.examples: {len(w.examples)} given; at most {_MAX_EXAMPLES}")
        texts = [("kind", w.kind), ("message", w.message)]
        texts += [(f"examples[{j}]", e) for j, e in enumerate(w.examples)]
        for name, text in texts:
            if len(text) > _MAX_WARNING_CHARS:
                raise UserError(f"{at}.{name}: over {_MAX_WARNING_CHARS} characters")
        out.append(warning_from_proto(w))
    return tuple(out)


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


__all__ = ["EvaluationHandler"]
