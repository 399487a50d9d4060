"""What the edge hands the policy engine: how it builds judges, how it runs sync evaluators,
and whom it tells each trace's scores. The engine picks none of these itself, so a server and a
test each choose their own."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol

from evalsi.core import EvaluationResult, Record, ResultBatch
from evalsi.evaluators import JudgeClient, RecordRunner
from evalsi.policies._spec import PolicySpec

JudgeFactory = Callable[[PolicySpec], Mapping[str, JudgeClient]]
"""Builds the judge clients a policy's evaluators ask for (``default_judges`` by default)."""

SyncGrading = Callable[[RecordRunner, Sequence[Record], int], Awaitable[ResultBatch]]
"""Runs a sync evaluator's ``RecordRunner`` over records as trial ``int``, off the caller's
loop. The engine's loop is the server's, which also receives OTLP and answers health checks, so
the server hands in its grading threads with ``limits.evaluatorSeconds``
(``server._grading.grade_in_threads``). Without one the engine calls the runner in line, as an
embedded caller's own loop allows."""


class ScoresHook(Protocol):
    """Told each trace's results as a policy stores them (``evalsi.sinks.OtelScoreExporter``
    sends them to OpenTelemetry). Called on the engine's event loop, so it must only queue:
    grading never waits for a network."""

    def __call__(
        self,
        *,
        project: str,
        policy: str,
        run_id: str,
        trace_id: str,
        span_id: str,
        results: Sequence[EvaluationResult],
    ) -> None: ...
