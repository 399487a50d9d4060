"""The online policy engine: every completed trace through every applied policy.

For each policy whose selector matches a trace: the sampling decision (rate by trace id, or an
``always`` rule), the cascade (``_live``; corpus metrics in ``_corpus``), the scores stored under
its ``watch`` run (``_store``), the window updated, the alerts checked (webhooks sent in the
background), and the record promoted to a dataset when ``promote.when`` holds. Late feedback
(``on_feedback``) runs the policy's ``onFeedback`` steps, and grades a trace the rate passed
over when the policy has the ``feedback.negative`` rule.

Nothing a trace or a webhook does stops the engine: a failing condition counts as false, an
evaluator's exception is that trace's ERROR, a store or promotion failure is counted and logged.
Memory is bounded: windows prune by time (and a cap), latency estimates are five numbers, the
recently graded trace ids are an LRU.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from evalsi.connectors import EgressPolicy
from evalsi.core import (
    DEFAULT_HANDOFF_SIZE,
    Feedback,
    HandedTrace,
    NotFoundError,
    Record,
    ResultBatch,
    RunStatus,
    Trace,
    TraceHandoff,
    UserError,
)
from evalsi.evaluators import JudgeClient, PackOptIn, Registry, use_judges
from evalsi.policies._alerts import Notifier, WebhookNotifier
from evalsi.policies._cel import ConditionError, evaluate
from evalsi.policies._deliver import ScoreDelivery, open_sinks
from evalsi.policies._hooks import JudgeFactory, ScoresHook, SyncGrading, store_judges
from evalsi.policies._live import (
    AppliedPolicy,
    LivePolicy,
    PolicyStats,
    feedback_view,
    score_functions,
    trace_view,
)
from evalsi.policies._promote import Promoter, record_to_row
from evalsi.policies._sampling import sampled
from evalsi.policies._spec import PolicySpec, policy_from_dict
from evalsi.policies._store import PolicyRuns, run_id_for
from evalsi.policies._upkeep import Upkeep
from evalsi.runs import JudgeSpec
from evalsi.store import SqlStore

log = logging.getLogger("evalsi.policies")


DEFAULT_MAX_PENDING = 1024
"""Traces ``submit`` lets wait for grading before it sheds load (counted as ``overloaded``)."""
DEFAULT_CONCURRENCY = 16
"""Traces graded at once by ``submit`` (a judge call takes seconds; checks take microseconds)."""
SINK_CLOSE_S = 10.0
"""How long a replaced or deleted policy, or a closing engine, lets its sinks catch up."""


class PolicyEngine(Upkeep):
    """Applied policies and the work they do on each trace.

    Args:
        registry: where cascade refs resolve, chosen by the caller (the server: its own).
        store: keeps policies (re-applied by ``restore``) and their scores; None keeps nothing.
        packs: the project's ``evaluators.packs`` (cascade refs are explicit, so always allowed).
        judges: judge specs for names a policy's own ``spec.judges`` does not give (the
            server's configured judges).
        judge_factory: replaces how judge clients are built (tests pass fixed judges).
        promoter: where promoted rows go; None ignores ``promote``.
        notifier: delivers alerts (webhooks by default).
        egress: the server's egress policy for judges and the default webhooks (None: any
            address, embedded).
        clock: seconds, for windows and cooldowns (monotonic by default).
        concurrency: traces graded at once by ``submit``.
        max_pending: traces ``submit`` holds before shedding (never ``on_trace``).
        on_scores: told the results of each graded trace (the span: the record's, else the
            root); its failures are logged and counted as ``errors``, never raised.
        grade_sync: runs sync evaluators off this loop (``SyncGrading``); None: in line.
        inbox_size: completed traces the ``inbox`` holds before ingest's offers are dropped.

    ``inbox`` is the hand-over ingest puts completed traces in (``TraceHandoff``); ``start``
    consumes it: each trace graded as ``submit`` does, except that when ``max_pending`` are
    being graded the consumer waits, so the inbox fills and its overflow rule applies.
    """

    def __init__(
        self,
        *,
        registry: Registry,
        store: SqlStore | None = None,
        packs: PackOptIn | None = None,
        judges: Mapping[str, JudgeSpec] | None = None,
        judge_factory: JudgeFactory | None = None,
        promoter: Promoter | None = None,
        notifier: Notifier | None = None,
        clock: Callable[[], float] = time.monotonic,
        concurrency: int = DEFAULT_CONCURRENCY,
        max_pending: int = DEFAULT_MAX_PENDING,
        on_scores: ScoresHook | None = None,
        egress: EgressPolicy | None = None,
        grade_sync: SyncGrading | None = None,
        inbox_size: int = DEFAULT_HANDOFF_SIZE,
    ) -> None:
        self.registry = registry
        self.store = store
        self.runs = PolicyRuns(store) if store is not None else None
        self.packs = packs or PackOptIn()
        self.server_judges = dict(judges or {})
        self.judge_factory = judge_factory or self.default_judges
        self.promoter = promoter
        self.egress = egress
        self.notifier = notifier or WebhookNotifier(egress=egress)
        self.clock = clock
        self._policies: dict[tuple[str, str], LivePolicy] = {}
        self._judges: dict[tuple[str, str], Mapping[str, JudgeClient]] = {}
        self._deliveries: dict[tuple[str, str], ScoreDelivery] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._grading: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(concurrency)
        # (project, trace id) -> its grading under submit, so feedback arriving meanwhile
        # waits for it rather than taking the trace for one no policy graded yet.
        self._in_flight: dict[tuple[str, str], asyncio.Task[None]] = {}
        self.max_pending = max_pending
        self.overloaded = 0
        self.on_scores = on_scores
        self.grade_sync = grade_sync
        self._lock = asyncio.Lock()
        # Ingest hands traces over only for projects with a policy applied.
        self.inbox = TraceHandoff(inbox_size, wants=self.active)
        self._consumer: asyncio.Task[None] | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._saving: asyncio.Task[None] | None = None
        # With server replicas (decision 0019) only the one holding the ``watch`` lease
        # grades, keeps counts in the store and checks alerts; the others show what it kept.
        self.leader = True

    # -- policies -------------------------------------------------------------------------------
    def load(self, doc: Mapping[str, Any], *, project: str = "", source: str = "") -> PolicySpec:
        """Check a policy document against this engine's registry and packs."""
        return policy_from_dict(
            doc, source=source, registry=self.registry, packs=self.packs, project=project
        )

    async def apply(self, spec: PolicySpec, *, kept: bool = False) -> AppliedPolicy:
        """Create the policy or replace the one of the same name in its project; applying the
        same spec again keeps its counts and window (``changed`` is False). ``kept``: the
        version is in the store already (``sync``: applied on another replica), only this
        engine takes it; the leader keeps its counts of the version it replaces."""
        key = (spec.project, spec.name)
        judges = self.judge_factory(spec)  # a missing judge fails here, before anything changes
        async with self._lock:
            current = self._policies.get(key)
            if current is not None and current.spec.spec_hash == spec.spec_hash:
                return AppliedPolicy(current.spec, current.run_id, current.applied_at, False)
            run_id = run_id_for(spec.spec_hash)
            # a missing secret or sink library fails here, before anything changes
            sinks = (
                await asyncio.to_thread(open_sinks, spec.sinks, self.egress) if spec.sinks else []
            )
            if self.runs is not None and kept:
                if current is not None and self.leader:  # the replaced run gets our counts
                    await self.runs.save_state(current.run_id, current.state(time.time()))
            elif self.runs is not None:
                info = await self.runs.save(
                    project=spec.project,
                    name=spec.name,
                    spec_hash=spec.spec_hash,
                    doc=spec.raw,
                    evaluators=[s.bound.spec() for s in spec.steps],
                    replaces=current.run_id if current is not None else None,
                    replaced_state=None if current is None else current.state(time.time()),
                )
                run_id = info.id
            live = LivePolicy(spec, run_id, time.time(), self.clock, self.grade_sync)
            self._policies[key] = live
            self._judges[key] = judges
            self._retire(self._deliveries.pop(key, None))
            if sinks:
                self._deliveries[key] = ScoreDelivery(spec.name, sinks, live.counts)
            if self._ticker is None or self._ticker.done():
                self._ticker = asyncio.create_task(self._tick(), name="evalsi-policy-ticker")
        return AppliedPolicy(spec, run_id, live.applied_at, True)

    async def delete(self, name: str, project: str = "default") -> None:
        async with self._lock:
            live = self._policies.pop((project, name), None)
            self._judges.pop((project, name), None)
            self._retire(self._deliveries.pop((project, name), None))
        if live is None:
            raise NotFoundError(
                f"name: no policy {name!r} in project {project!r}",
                hint="ListPolicies (or `evalsi watch`) shows the policies applied",
            )
        if self.runs is not None:
            await self.runs.end(live.run_id, RunStatus.CANCELLED, live.state(time.time()))

    def _retire(self, delivery: ScoreDelivery | None) -> None:
        """A replaced or deleted policy's sinks catch up in the background, then close."""
        if delivery is not None:
            task = asyncio.create_task(delivery.close(SINK_CLOSE_S))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def get(self, name: str, project: str = "default") -> AppliedPolicy:
        live = self._live(name, project)
        return AppliedPolicy(live.spec, live.run_id, live.applied_at)

    def policies(self, project: str | None = None) -> list[AppliedPolicy]:
        return [
            AppliedPolicy(p.spec, p.run_id, p.applied_at)
            for (proj, _), p in sorted(self._policies.items())
            if project is None or proj == project
        ]

    def active(self, project: str) -> bool:
        """Whether a policy is applied in ``project`` (ingest reads its traces back only then)."""
        return any(p == project for p, _ in self._policies)

    def _live(self, name: str, project: str) -> LivePolicy:
        live = self._policies.get((project, name))
        if live is None:
            raise NotFoundError(
                f"name: no policy {name!r} in project {project!r}",
                hint="ListPolicies (or `evalsi watch`) shows the policies applied",
            )
        return live

    async def restore(self, check: Callable[[PolicySpec], None] | None = None) -> int:
        """Apply again the policies kept in the store (a restarted server); how many. A stored
        policy that no longer loads (an evaluator uninstalled), or that ``check`` refuses with
        a ``UserError`` (a secret the server no longer allows), is logged and left out."""
        if self.runs is None:
            return 0
        restored = 0
        for stored in await self.runs.live():
            try:
                spec = self.load(stored.doc, project=stored.project, source=stored.run_id)
                if check is not None:
                    check(spec)
                await self.apply(spec)
                live = self._policies.get((spec.project, spec.name))
                if live is not None and stored.state is not None:
                    live.restore_state(stored.state, time.time())
            except UserError as e:
                log.error("policy %s/%s not restored: %s", stored.project, stored.name, e)
                continue
            restored += 1
        return restored

    async def sync(
        self, check: Callable[[PolicySpec], None] | None = None, *, counts: bool = False
    ) -> int:
        """Server replicas: the policies kept in the store become this engine's, whichever
        replica applied, replaced or deleted them; with ``counts``, each takes the counts and
        alert states last kept (a replica that does not grade shows those; the one taking the
        ``watch`` lease starts from them). The leader also takes the runs of policies whose
        replica is gone. How many policies changed."""
        if self.runs is None:
            return 0
        started = time.time()
        changed = 0
        kept: set[tuple[str, str]] = set()
        for stored in await self.runs.live():
            key = (stored.project, stored.name)
            kept.add(key)
            live = self._policies.get(key)
            try:
                if live is None or live.run_id != stored.run_id:
                    spec = self.load(stored.doc, project=stored.project, source=stored.run_id)
                    if check is not None:
                        check(spec)
                    changed += (await self.apply(spec, kept=True)).changed
                elif self.leader and stored.status == RunStatus.INTERRUPTED:
                    await self.runs.own(stored.run_id)
            except UserError as e:
                log.error("policy %s/%s not applied here: %s", stored.project, stored.name, e)
                continue
            live = self._policies.get(key)
            if counts and live is not None and stored.state is not None:
                live.restore_state(stored.state, time.time())
        forgotten: list[LivePolicy] = []
        async with self._lock:
            for key, live in list(self._policies.items()):
                # deleted or replaced elsewhere (not one applied here since the store was read)
                if key not in kept and live.applied_at < started:
                    del self._policies[key]
                    self._judges.pop(key, None)
                    self._retire(self._deliveries.pop(key, None))
                    forgotten.append(live)
        for live in forgotten if self.leader else ():  # its ended run gets our counts
            try:
                await self.runs.save_state(live.run_id, live.state(time.time()))
            except Exception:
                log.exception("policy %s: cannot keep its counts", live.spec.name)
        return changed + len(forgotten)

    def default_judges(self, spec: PolicySpec) -> Mapping[str, JudgeClient]:
        """Store-backed judge clients (cached answers) for the judges the policy's evaluators
        ask for: the policy's own ``spec.judges``, else the engine's (the server's)."""
        return store_judges(spec, self.store, self.server_judges, egress=self.egress)

    # -- traces ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Starts consuming ``inbox`` (on the running loop); ``close`` stops it."""
        if self._consumer is None or self._consumer.done():
            self._consumer = asyncio.create_task(self._consume(), name="evalsi-policy-inbox")

    async def _consume(self) -> None:
        while True:
            item: HandedTrace = await self.inbox.get()
            try:
                while len(self._grading) >= self.max_pending:  # the inbox fills meanwhile
                    await asyncio.wait(set(self._grading), return_when=asyncio.FIRST_COMPLETED)
                if item.feedback is None:
                    key = (item.trace.project, item.trace.trace_id)
                    self._background(key, self.on_trace(item.trace, item.record))
                else:
                    work = self.on_feedback(item.trace, item.record, item.feedback)
                    self._background(None, work)
            finally:
                self.inbox.task_done()

    @property
    def dropped(self) -> int:
        """Traces not graded for lack of room: shed by ``submit`` or dropped by ``inbox``."""
        return self.overloaded + self.inbox.dropped

    async def submit(self, trace: Trace, record: Record) -> None:
        """``on_trace`` in the background, for a caller that must not wait for judges (trace
        assembly): at most ``concurrency`` traces graded at once, and beyond ``max_pending``
        waiting, traces are not graded (``overloaded`` counts them)."""
        self._background((trace.project, trace.trace_id), self.on_trace(trace, record))

    async def submit_feedback(self, trace: Trace, record: Record, feedback: Feedback) -> None:
        """``on_feedback`` in the background (the request that carried the feedback does not
        wait for the judges it may start), under the same bounds as ``submit``."""
        self._background(None, self.on_feedback(trace, record, feedback))

    def _background(self, key: tuple[str, str] | None, work: Any) -> None:
        if len(self._grading) >= self.max_pending:
            work.close()
            self.overloaded += 1
            return

        async def run() -> None:
            async with self._slots:
                await work

        task = asyncio.create_task(run())
        self._grading.add(task)
        if key is not None:
            self._in_flight[key] = task
        task.add_done_callback(lambda t: self._graded(t, key))

    def _graded(self, task: asyncio.Task[None], key: tuple[str, str] | None) -> None:
        self._grading.discard(task)
        if key is not None and self._in_flight.get(key) is task:
            del self._in_flight[key]
        if not task.cancelled() and task.exception() is not None:
            log.error("grading a trace failed", exc_info=task.exception())

    async def on_trace(self, trace: Trace, record: Record) -> None:
        """Grade a completed trace under every policy that selects and samples it."""
        view = trace_view(trace)
        for key, live in list(self._policies.items()):
            if key[0] != trace.project:  # another project's policy never sees this trace
                continue
            if not live.selects(trace, view):
                live.counts.skipped["not_selected"] += 1
                continue
            live.counts.selected += 1
            if not live.samples(trace, view):
                live.counts.skipped["not_sampled"] += 1
                continue
            live.counts.sampled += 1
            steps = range(len(live.spec.cascade))
            await self._grade(key, live, trace, record, steps, view, trace.feedback, None)

    async def on_feedback(self, trace: Trace, record: Record, feedback: Feedback) -> None:
        """Feedback arrived for a completed trace: run the ``onFeedback`` steps of the policies
        that graded it, and grade it now under a ``feedback.negative`` policy that had passed
        it over."""
        grading = self._in_flight.get((trace.project, trace.trace_id))
        if grading is not None:  # still being graded: join its scores once they are known
            await asyncio.gather(grading, return_exceptions=True)
        view = trace_view(trace)
        signals = [*trace.feedback, feedback] if feedback not in trace.feedback else trace.feedback
        for key, live in list(self._policies.items()):
            if key[0] != trace.project or not live.selects(trace, view):
                continue
            known = live.recent.get(trace.trace_id)
            cascade = len(live.spec.cascade)
            feedback_steps = list(range(cascade, len(live.spec.steps)))
            if known is None and await self._graded_before(live, trace.trace_id):
                # Graded when it completed, its scores no longer remembered here (a restart,
                # or pushed out of the recent ones): only the feedback steps run.
                known = []
            if known is None and feedback.negative and live.spec.feedback_forces:
                # Passed over when it completed (counted not_sampled then), graded now: also
                # counted sampled (counters only go up; Prometheus reads a drop as a reset).
                live.counts.sampled += 1
                live.counts.forced_by_feedback += 1
                steps = [*range(cascade), *feedback_steps]
                await self._grade(key, live, trace, record, steps, view, signals, None)
            elif known is not None and feedback_steps:
                await self._grade(key, live, trace, record, feedback_steps, view, signals, known)

    async def _graded_before(self, live: LivePolicy, trace_id: str) -> bool:
        """Whether the policy stored results for this trace (or, without a store, whether its
        rate sampled it: an ``always`` rule's choice is then not known)."""
        if self.runs is None:
            return sampled(trace_id, live.spec.rate)
        try:
            return await self.runs.graded(live.run_id, trace_id)
        except Exception:  # the store unavailable: the rate's answer rather than no answer
            log.exception("policy %s: cannot read its results", live.spec.name)
            return sampled(trace_id, live.spec.rate)

    async def _grade(
        self,
        key: tuple[str, str],
        live: LivePolicy,
        trace: Trace,
        record: Record,
        steps: Any,
        view: dict[str, Any],
        feedback: Any,
        known: list[dict[str, Any]] | None,
    ) -> None:
        first = known is None
        try:
            with use_judges(self._judges.get(key, {})):
                rows, scores = await live.grade(trace, record, list(steps), view, feedback, known)
        except Exception:  # our own bug must cost one trace, not the engine
            log.exception("policy %s: grading trace %s failed", live.spec.name, trace.trace_id)
            live.counts.errors += 1
            return
        if self._policies.get(key) is not live:
            return  # deleted or replaced while its evaluators ran: no scores, alerts, promotion
        if first:
            live.counts.evaluated += 1
            live.window.add_trace()
            if record.metadata.get("content_captured") is False and any(
                (b.text[0] or "").startswith("no content") for _, _, b in rows
            ):
                live.counts.skipped["no_content"] += 1
        live.remember(trace.trace_id, scores)
        cascade = len(live.spec.cascade)
        for index, _, batch in rows:
            # an onFeedback step runs again on each new signal: its latest result counts
            live.window.add(batch, key=trace.trace_id if index >= cascade else None)
        await self._store(live, rows)
        if self._policies.get(key) is not live:
            return  # deleted or replaced while its rows were written: no alert, no promotion
        delivery = self._deliveries.get(key)
        if delivery is not None and rows:
            delivery.offer(
                project=live.spec.project,
                run_id=live.run_id,
                trace_id=trace.trace_id,
                span_id=_span_of(trace, record),
                rows=rows,
            )
        if self.on_scores is not None and rows:
            self._tell(self.on_scores, live, trace, record, rows)
        self._check_alerts(live)
        if live.spec.promote is not None and self.promoter is not None:
            await self._promote(live, trace, record, view, scores)

    async def _store(self, live: LivePolicy, rows: list[tuple[int, int, ResultBatch]]) -> None:
        if self.runs is None or not rows:
            return
        try:
            await self.runs.write(live.run_id, rows)
        except Exception:
            log.exception("policy %s: cannot store results", live.spec.name)
            live.counts.errors += 1

    def _tell(
        self,
        hook: ScoresHook,
        live: LivePolicy,
        trace: Trace,
        record: Record,
        rows: list[tuple[int, int, ResultBatch]],
    ) -> None:
        try:
            hook(
                project=live.spec.project,
                policy=live.spec.name,
                run_id=live.run_id,
                trace_id=trace.trace_id,
                span_id=_span_of(trace, record),
                results=[result for _, _, batch in rows for result in batch],
            )
        except Exception:
            log.exception(
                "policy %s: exporting the scores of %s failed", live.spec.name, trace.trace_id
            )
            live.counts.errors += 1

    async def _promote(
        self,
        live: LivePolicy,
        trace: Trace,
        record: Record,
        view: dict[str, Any],
        scores: list[dict[str, Any]],
    ) -> None:
        promote = live.spec.promote
        assert promote is not None
        assert promote.program is not None
        context = {**view, "scores": scores, "feedback": feedback_view(trace.feedback)}
        try:
            holds = evaluate(promote.program, context, score_functions(scores))
        except ConditionError:
            return
        if not holds:
            return
        if record.id != trace.trace_id:
            record = dataclasses.replace(record, id=trace.trace_id)
        row = record_to_row(record, trace_id=trace.trace_id, promoted_by=live.spec.name)
        try:
            assert self.promoter is not None
            version = await self.promoter.promote(live.spec.project, promote.dataset, row)
        except Exception:
            log.exception("policy %s: cannot promote trace %s", live.spec.name, trace.trace_id)
            live.counts.errors += 1
            return
        if version is not None:
            live.counts.promoted += 1

    # -- reading --------------------------------------------------------------------------------
    def stats(self, name: str, project: str = "default") -> PolicyStats:
        live = self._live(name, project)
        self._check_alerts_if_warm(live)  # as of now: the window may have emptied meanwhile
        return live.stats()

    async def drain(self, timeout_s: float | None = None, *, sinks: bool = True) -> None:
        """Wait for the traces ``submit`` took and the alerts being delivered, and (``sinks``)
        for the sinks to have the scores; past ``timeout_s`` (a server shutting down) what is
        left is cancelled and logged."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        if self._consumer is not None and not self._consumer.done():
            # what ingest handed over first reaches grading (the consumer waits for room)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.inbox.join(), timeout_s)
        if not await self._settle(deadline):
            return
        # corpus metrics as of every graded trace, and the alerts they may fire, delivered
        for live in list(self._policies.values()):
            if await live.refresh_corpora(force=True):
                self._check_alerts(live)
        if not await self._settle(deadline):
            return
        if not sinks:
            return
        for delivery in list(self._deliveries.values()):  # the sinks have what was graded
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            await delivery.flush(left)

    async def _settle(self, deadline: float | None) -> bool:
        """Wait for gradings and deliveries; past ``deadline`` cancel them (False)."""
        while self._grading or self._tasks:
            pending = {*self._grading, *self._tasks}
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                log.warning("stopping with %d trace gradings unfinished", len(pending))
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                return False
            await asyncio.wait(pending, timeout=left)
        return True

    async def close(self) -> None:
        """Finish deliveries and close the webhook session (the server's shutdown)."""
        if self._ticker is not None:
            self._ticker.cancel()
            await asyncio.gather(self._ticker, return_exceptions=True)
            self._ticker = None
        # what the inbox holds is graded before its consumer stops; the sinks are given
        # SINK_CLOSE_S below, not every retry of every queued batch (a hanging sink)
        await self.drain(sinks=False)
        if self._consumer is not None:
            self._consumer.cancel()
            await asyncio.gather(self._consumer, return_exceptions=True)
            self._consumer = None
        if self._saving is not None:
            await asyncio.gather(self._saving, return_exceptions=True)
            self._saving = None
        await self.drain(sinks=False)
        deliveries, self._deliveries = list(self._deliveries.values()), {}
        await asyncio.gather(*(d.close(SINK_CLOSE_S) for d in deliveries))
        await self._settle(time.monotonic() + SINK_CLOSE_S)  # retired policies' sinks
        await self._persist()  # the counts as they end, for the next server
        await self.notifier.close()


def _span_of(trace: Trace, record: Record) -> str:
    """The scored span: the record's, else the trace's root."""
    span_id = record.provenance.span_id if record.provenance is not None else ""
    if not span_id and trace.root is not None:
        span_id = trace.root.span_id
    return span_id
