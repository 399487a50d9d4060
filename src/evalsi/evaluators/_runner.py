"""The batching runner: one bound evaluator over a batch of records → one result per record.

The rules "only SCORED counts" and "errors are data" live here (docs/ARCHITECTURE.md). A record
lacking a required field is SKIPPED with a reason. An exception inside an evaluator is an ERROR for
that record (its type and message kept) and never stops the run; cancellation is never swallowed.
Only well-formed scores are SCORED.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any

from evalsi.core import (
    INFRA_PREFIX,
    PASSED,
    EvaluationResult,
    Outcome,
    Record,
    ResultBatch,
    RunError,
    Scope,
    Score,
    UserError,
)
from evalsi.evaluators._decorator import BoundEvaluator, RecordError, Skip
from evalsi.evaluators._time_limit import call_with_limit, timed_out

_SCORED, _SKIPPED, _ERROR = Outcome.SCORED, Outcome.SKIPPED, Outcome.ERROR


_PLAIN = ("input", "output", "reference")


def missing_checker(requires: Sequence[str]) -> Callable[[Record], str | None]:
    """A function returning the first required field a record lacks, or None.

    It runs once per record per evaluator, so it is generated as straight-line attribute
    tests (names come from the validated ``requires``, never from data).
    """
    lines = ["def missing(record):"]
    for name in requires:
        if name in _PLAIN:
            lines.append(f"    if record.{name} is None: return {name!r}")
        else:
            lines.append(f"    if not record.has({name!r}): return {name!r}")
    lines.append("    return None")
    namespace: dict[str, Any] = {}
    exec("\n".join(lines), namespace)
    return namespace["missing"]  # type: ignore[no-any-return]


def _plain_verdict(score: Score) -> bool:
    """A lone unnamed pass/fail score with at most an explanation: fits the batch columns."""
    return (
        score.passed.__class__ is bool
        and score.number is None
        and score.label is None
        and score.structured is None
        and not score.name
        and score.confidence is None
        and score.cost is None
        and not score.metadata
    )


def to_scores(value: Any, default_name: str) -> list[Score] | str:
    """Normalise what an evaluator returned; a string result means "malformed: <why>"."""
    if isinstance(value, bool):
        return [Score(name=default_name, passed=value)]
    if isinstance(value, Score):
        scores = [value]
    elif isinstance(value, (int, float)):
        scores = [Score(name=default_name, number=float(value))]
    elif isinstance(value, str):
        return [Score(name=default_name, label=value)]
    elif isinstance(value, (list, tuple)) and value and all(isinstance(s, Score) for s in value):
        scores = list(value)
    else:
        return f"evaluator returned {type(value).__name__}; expected Score, bool, number or str"
    for score in scores:
        problem = score.check()
        if problem:
            return problem
        if not score.name:
            score.name = default_name
    return scores


def _error_reason(e: BaseException) -> str:
    if isinstance(e, RecordError):
        return e.reason
    text = str(e)
    if isinstance(e, RunError):  # infrastructure (a judge's endpoint...), not the evaluator
        return f"{INFRA_PREFIX}{getattr(e, 'kind', 'internal')}): {text}"
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _call(fn: Callable[[Any], Any], arg: Any, limit: float | None) -> tuple[Any, str | None]:
    """``fn(arg)`` and None, or None and why it was stopped: it ran past ``limit`` seconds."""
    if limit is None:
        return fn(arg), None
    value, expired = call_with_limit(fn, arg, limit)
    return (None, timed_out(limit)) if expired else (value, None)


class RecordRunner:
    """Runs one bound record-scope evaluator over batches, filling a ``ResultBatch``."""

    def __init__(self, bound: BoundEvaluator) -> None:
        if bound.scope is not Scope.RECORD:
            raise ValueError(f"{bound.ref} is {bound.scope.value}-scope, not record-scope")
        self.bound = bound
        self.name = bound.name
        self.ref = bound.ref
        # Unnamed scores take the evaluator's own name, not the instance alias, so metric
        # names always match the manifest's declared outputs.
        self.metric = bound.manifest.ref.name
        self.missing = missing_checker(bound.manifest.requires)
        self.batch = bound.batch_fn()
        self.single = bound.record_fn()
        probe = self.batch or self.single
        call = getattr(probe, "__call__", probe)  # noqa: B004 - instances are callable objects
        self.is_async = inspect.iscoroutinefunction(probe) or inspect.iscoroutinefunction(call)

    def _start(self, records: Sequence[Record], trial: int) -> tuple[ResultBatch, list[int]]:
        """A batch with every ineligible record already SKIPPED; returns the eligible indexes."""
        out = ResultBatch(self.name, self.ref, self.metric, [r.id for r in records], trial=trial)
        todo: list[int] = []
        missing = self.missing
        for i, record in enumerate(records):
            lacking = missing(record)
            if lacking is None:
                todo.append(i)
            else:
                out.set_outcome(i, _SKIPPED, f"record has no {lacking}")
        return out, todo

    def _put(self, out: ResultBatch, i: int, value: Any) -> None:
        # bool first: the common pass/fail case stays two list stores
        if value is True or value is False:
            out.kind[i] = PASSED
            out.value[i] = 1.0 if value else 0.0
            return
        if isinstance(value, Skip):
            out.set_outcome(i, _SKIPPED, value.reason)
            return
        if isinstance(value, RecordError):
            out.set_outcome(i, _ERROR, value.reason)
            return
        scores = to_scores(value, self.metric)
        if isinstance(scores, str):
            out.set_outcome(i, _ERROR, scores)
        else:
            out.set_scores(i, scores)

    def run(
        self, records: Sequence[Record], *, trial: int = 0, time_limit: float | None = None
    ) -> ResultBatch:
        """Evaluate a batch synchronously (sync evaluators only).

        With ``time_limit`` (seconds), a call that runs longer is stopped and its records are
        ERROR ``timed out after Ns`` (see ``_time_limit`` for what can and cannot be stopped).
        """
        if self.is_async:
            raise TypeError(f"{self.ref} is async; use run_async")
        if time_limit is not None or self.batch is not None:
            return self._run_called(records, trial, time_limit)
        started = time.perf_counter()
        out = ResultBatch(self.name, self.ref, self.metric, [r.id for r in records], trial=trial)
        fn, put, missing = self.single, self._put, self.missing
        kind, value_col, text_col = out.kind, out.value, out.text
        for i, record in enumerate(records):
            lacking = missing(record)
            if lacking is not None:
                out.set_outcome(i, _SKIPPED, f"record has no {lacking}")
                continue
            try:
                value = fn(record)
            except Skip as s:
                out.set_outcome(i, _SKIPPED, s.reason)
                continue
            except Exception as e:  # the evaluator's own failure: data on the run
                out.set_outcome(i, _ERROR, _error_reason(e))
                continue
            if value is True:  # the common pass/fail case, inline
                kind[i], value_col[i] = PASSED, 1.0
            elif value is False:
                kind[i], value_col[i] = PASSED, 0.0
            elif type(value) is Score and _plain_verdict(value):
                # pass/fail with an explanation, the next most common case
                kind[i], value_col[i] = PASSED, 1.0 if value.passed else 0.0
                text_col[i] = value.explanation or None
            else:
                put(out, i, value)
        out.duration = (time.perf_counter() - started) / max(len(records), 1)
        return out

    def _run_called(
        self, records: Sequence[Record], trial: int, limit: float | None
    ) -> ResultBatch:
        """``run`` for a batch evaluator, or with every call under ``limit`` seconds: the
        server's path, where one slow call must not hold a request (or, on the loop, every
        request) for ever."""
        started = time.perf_counter()
        out, todo = self._start(records, trial)
        if self.batch is not None:
            if todo:
                try:
                    values, stopped = _call(self.batch, [records[i] for i in todo], limit)
                except Exception as e:  # one failing batch call marks its records ERROR
                    self._fail_all(out, todo, _error_reason(e))
                else:
                    if stopped is not None:
                        self._fail_all(out, todo, stopped)
                    else:
                        self._fill(out, todo, values)
        else:
            for i in todo:
                try:
                    value, stopped = _call(self.single, records[i], limit)
                except Skip as s:
                    out.set_outcome(i, _SKIPPED, s.reason)
                except Exception as e:  # the evaluator's own failure: data on the run
                    out.set_outcome(i, _ERROR, _error_reason(e))
                else:
                    if stopped is not None:
                        out.set_outcome(i, _ERROR, stopped)
                    else:
                        self._put(out, i, value)
        out.duration = (time.perf_counter() - started) / max(len(todo), 1)
        return out

    def _fail_all(self, out: ResultBatch, todo: list[int], reason: str) -> None:
        for i in todo:
            out.set_outcome(i, _ERROR, reason)

    def _fill(self, out: ResultBatch, todo: list[int], values: Any) -> None:
        values = values if isinstance(values, list) else list(values)
        if len(values) != len(todo):
            reason = f"batch evaluator returned {len(values)} values for {len(todo)} records"
            self._fail_all(out, todo, reason)
            return
        for i, value in zip(todo, values, strict=True):
            self._put(out, i, value)

    async def run_async(self, records: Sequence[Record], *, trial: int = 0) -> ResultBatch:
        """Evaluate a batch, awaiting async evaluators concurrently."""
        if not self.is_async:
            return self.run(records, trial=trial)
        started = time.perf_counter()
        out, todo = self._start(records, trial)
        if self.batch is not None:
            if todo:
                try:
                    values = await self.batch([records[i] for i in todo])
                except Exception as e:
                    self._fail_all(out, todo, _error_reason(e))
                else:
                    self._fill(out, todo, values)
        else:

            async def one(i: int) -> None:
                try:
                    value = await self.single(records[i])
                except Skip as s:
                    out.set_outcome(i, _SKIPPED, s.reason)
                    return
                except Exception as e:
                    out.set_outcome(i, _ERROR, _error_reason(e))
                    return
                self._put(out, i, value)

            async with asyncio.TaskGroup() as group:
                for i in todo:
                    group.create_task(one(i))
        out.duration = (time.perf_counter() - started) / max(len(todo), 1)
        return out


class MappedValues(Sequence[Any]):
    """The mapped values of a dataset-scope evaluator that maps whole batches (``map_batch``).

    They are kept as chunks, one per fed batch: a ``list`` of per-record values (a batch mapped
    record by record) or what ``map_batch`` returned (anything but a list). ``prepare`` may read
    ``chunks`` to merge the columns directly; indexing or iterating expands every chunk to the
    values ``map`` would have returned (``unbatch``), once, for the rare paths that need them.
    """

    def __init__(self, chunks: list[Any], unbatch: Callable[[Any], list[Any]], n: int) -> None:
        self.chunks = chunks
        self._unbatch = unbatch
        self._n = n
        self._flat: list[Any] | None = None

    def __len__(self) -> int:
        return self._n

    def expand(self) -> list[Any]:
        """Every value, in record order (cached)."""
        if self._flat is None:
            flat: list[Any] = []
            for chunk in self.chunks:
                flat.extend(chunk if isinstance(chunk, list) else self._unbatch(chunk))
            self._flat = flat
        return self._flat

    def __getitem__(self, index: Any) -> Any:
        return self.expand()[index]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.expand())


class DatasetRunner:
    """Runs one dataset-scope evaluator: ``map`` each eligible record, ``reduce`` at the end.

    An evaluator may also define ``map_batch(records)`` and ``unbatch(chunk)``: ``map_batch``
    maps a whole batch at once into a compact chunk (columns, one entry per record, not a list)
    and returns None unless every record is eligible and maps without ``Skip`` or error; that
    batch is then mapped record by record, so odd records keep their exact per-record outcome.
    ``unbatch`` turns a chunk back into the values ``map`` would have returned. ``values`` is
    then a ``MappedValues``.
    """

    def __init__(self, bound: BoundEvaluator) -> None:
        if bound.scope is not Scope.DATASET:
            raise ValueError(f"{bound.ref} is {bound.scope.value}-scope, not dataset-scope")
        self.bound = bound
        self.name = bound.name
        self.ref = bound.ref
        self.missing = missing_checker(bound.manifest.requires)
        instance = bound.instance
        batch, unbatch = getattr(instance, "map_batch", None), getattr(instance, "unbatch", None)
        both = callable(batch) and callable(unbatch)
        self._batch: Callable[[Sequence[Record]], Any] | None = batch if both else None
        self._unbatch: Callable[[Any], list[Any]] | None = unbatch if both else None
        self._list: list[Any] = []
        self._chunks: list[Any] = []
        self._mapped_values: MappedValues | None = None
        self.mapped = 0
        """Records mapped so far (the dataset result's n)."""
        self.cluster_key: Callable[[Record], Hashable] | None = None
        """When set (``--cluster-by``), each mapped record's cluster goes into ``clusters``."""
        self.clusters: list[Hashable] = []
        self.skip_reasons: Counter[str] = Counter()
        self.error_reasons: Counter[str] = Counter()
        self.seconds = 0.0
        self._weighted_reduce: Callable[[Any], list[Score] | str] | None = None

    @property
    def values(self) -> Sequence[Any]:
        """The mapped values: a list, or ``MappedValues`` for a ``map_batch`` evaluator."""
        if self._unbatch is None:
            return self._list
        if self._mapped_values is None or len(self._mapped_values) != self.mapped:
            self._mapped_values = MappedValues(list(self._chunks), self._unbatch, self.mapped)
        return self._mapped_values

    @property
    def skipped(self) -> int:
        return self.skip_reasons.total()

    @property
    def errors(self) -> int:
        return self.error_reasons.total()

    def feed(self, records: Sequence[Record]) -> None:
        started = time.perf_counter()
        if self._batch is not None:
            if records:
                try:  # a chunk maps every record of the batch, else the batch goes record by record
                    chunk = self._batch(records)
                    whole = chunk is not None and not isinstance(chunk, list)
                    whole = whole and len(chunk) == len(records)
                except Exception:  # an optimisation only: map() decides what a record gives
                    whole = False
                if not whole:
                    values: list[Any] = []
                    self._map_each(records, values)
                    chunk = values
                elif self.cluster_key is not None:
                    self.clusters.extend(map(self.cluster_key, records))
                if len(chunk):
                    self._chunks.append(chunk)
                    self.mapped += len(chunk)
        else:
            before = len(self._list)
            self._map_each(records, self._list)
            self.mapped += len(self._list) - before
        self.seconds += time.perf_counter() - started

    def _map_each(self, records: Sequence[Record], out: list[Any]) -> None:
        """``map`` every eligible record into ``out``; count the skipped and failed ones."""
        fn: Callable[[Record], Any] = self.bound.instance.map
        missing, append, key = self.missing, out.append, self.cluster_key
        for record in records:
            lacking = missing(record)
            if lacking is not None:
                self.skip_reasons[f"record has no {lacking}"] += 1
                continue
            try:
                value = fn(record)
            except Skip as s:
                self.skip_reasons[s.reason] += 1
                continue
            except Exception as e:
                self.error_reasons[_error_reason(e)] += 1
                continue
            append(value)
            if key is not None:
                self.clusters.append(key(record))

    def reduce(self, values: Sequence[Any] | None = None) -> list[Score] | str:
        """Reduce the mapped values (or a resample of them); a string means ERROR: why."""
        return self._scores(self.bound.instance.reduce, self.values if values is None else values)

    def _scores(self, reduce: Callable[..., Any], *args: Any) -> list[Score] | str:
        """``reduce(*args)`` as scores; a string means ERROR: why."""
        try:
            out = reduce(*args)
        except Exception as e:
            return _error_reason(e)
        return to_scores(out, self.bound.manifest.ref.name)

    @property
    def weighted(self) -> bool:
        """The evaluator reduces weighted prepared arrays (the fast bootstrap path)."""
        instance = self.bound.instance
        return callable(getattr(instance, "prepare", None)) and callable(
            getattr(instance, "reduce_weighted", None)
        )

    def weighted_reducer(self) -> Callable[[Any], list[Score] | str]:
        """Prepare the mapped values once (``finish`` and every bootstrap replicate share
        them); the returned function reduces them under a vector of weights (bootstrap
        counts). A string result means ERROR: why."""
        if self._weighted_reduce is not None:
            return self._weighted_reduce
        instance = self.bound.instance
        reduce = functools.partial(
            self._scores, instance.reduce_weighted, instance.prepare(self.values)
        )
        self._weighted_reduce = reduce
        return reduce

    def finish(self) -> EvaluationResult:
        """The reduced result. Why records were left out is kept: the reason when nothing was
        eligible, else ``skipped``/``errors`` reason counts in each score's metadata."""
        if not self.mapped:
            outcome = _ERROR if self.error_reasons else _SKIPPED
            reasons = self.error_reasons or self.skip_reasons
            reason = "no record was eligible"
            if reasons:
                top, count = reasons.most_common(1)[0]
                reason = f"{reason}: {count} of {reasons.total()} {_why(outcome)}: {top}"
            return EvaluationResult("", self.name, self.ref, outcome, reason=reason)
        started = time.perf_counter()
        if self.weighted:  # reduce(v) is reduce_weighted(prepare(v), ones): prepare once
            import numpy as np  # here: a record-scope run never needs numpy (start-up)

            try:
                scores = self.weighted_reducer()(np.ones(self.mapped))
            except Exception as e:  # prepare() refused the values
                scores = _error_reason(e)
        else:
            scores = self.reduce()
        self.seconds += time.perf_counter() - started
        if isinstance(scores, str):
            return EvaluationResult("", self.name, self.ref, _ERROR, reason=scores)
        left_out = {
            key: dict(counter.most_common(_REASONS_KEPT))
            for key, counter in (("skipped", self.skip_reasons), ("errors", self.error_reasons))
            if counter
        }
        if left_out:
            for score in scores:
                score.metadata = {**score.metadata, **left_out}
        return EvaluationResult("", self.name, self.ref, _SCORED, scores, duration_s=self.seconds)


_REASONS_KEPT = 10
"""Distinct skip / error reasons kept per dataset-scope result (the most frequent)."""


def _why(outcome: Outcome) -> str:
    return "records failed in map" if outcome is _ERROR else "records skipped"


Runner = RecordRunner | DatasetRunner


def make_runner(bound: BoundEvaluator) -> Runner:
    """The runner for a bound evaluator's scope; undeclared scopes fail loudly."""
    if bound.scope is Scope.RECORD:
        return RecordRunner(bound)
    if bound.scope is Scope.DATASET:
        return DatasetRunner(bound)
    raise UserError(
        f"{bound.ref}: scope {bound.scope.value!r} is declared but not runnable yet "
        "(record and dataset scopes run today)"
    )
