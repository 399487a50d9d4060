"""What the edge hands the policy engine: how it builds judges, how it runs sync evaluators,
and whom it tells each trace's scores. The engine picks none of these itself, so a server and a
test each choose their own."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from evalsi.connectors import EgressPolicy, Resilience
from evalsi.core import EvaluationResult, Record, ResultBatch, UserError
from evalsi.evaluators import JudgeClient, RecordRunner, judges_needed
from evalsi.policies._spec import PolicySpec
from evalsi.runs import JudgeSpec

if TYPE_CHECKING:
    from evalsi.store import SqlStore

JudgeFactory = Callable[[PolicySpec], Mapping[str, JudgeClient]]
"""Builds the judge clients a policy's evaluators ask for (``store_judges`` by default)."""


def store_judges(
    spec: PolicySpec,
    store: SqlStore | None,
    server_judges: Mapping[str, JudgeSpec],
    *,
    egress: EgressPolicy | None,
) -> Mapping[str, JudgeClient]:
    """Judge clients caching their answers in ``store`` for the judges the policy's
    evaluators ask for: the policy's own ``spec.judges``, else the server's."""
    needed = judges_needed([s.bound for s in spec.steps])
    if not needed:
        return {}
    specs = {**server_judges, **spec.judges}
    missing = {name: users for name, users in needed.items() if name not in specs}
    if missing:
        name, users = next(iter(missing.items()))
        raise UserError(
            f"spec.cascade: {', '.join(users)} needs a judge named {name!r}, and none is "
            "configured (evalsi has no default judge)",
            hint=f"add spec.judges.{name} {{connector, baseUrl, model}} to the policy, or "
            "configure it in the server's evalsi.yaml",
        )
    if store is None:
        raise UserError("judges need a store for their answer cache; give the engine one")
    from evalsi.runs import build_judges

    return build_judges(
        {n: specs[n] for n in needed},
        store,
        [s.bound for s in spec.steps],
        resilience=Resilience(egress=egress) if egress is not None else None,
    )


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
