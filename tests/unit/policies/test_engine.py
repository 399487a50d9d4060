"""The policy engine on hand-built traces and records: cascade, content, alerts, promotion,
feedback, persistence."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

import pytest

from evalsi.core import (
    VERSION,
    Content,
    DatasetPin,
    Feedback,
    Outcome,
    Record,
    RunManifest,
    Span,
    SpanView,
    Trace,
)
from evalsi.datasets import open_dataset
from evalsi.evaluators import JudgeReply, Registry, evaluator
from evalsi.packs import builtin_registry
from evalsi.policies._engine import PolicyEngine
from evalsi.policies._sampling import result_key, sampled
from evalsi.policies._spec import PolicySpec, policy_from_yaml
from evalsi.policies._store import run_id_for
from evalsi.store import SqlStore

CALLS: dict[str, int] = {}


def sync(fn: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an async test on a fresh event loop (the suite has no async plugin)."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(fn(*args, **kwargs))

    return run


@evaluator(name="test/cheap", requires=("output",))
def cheap(record: Record) -> bool:
    CALLS["cheap"] = CALLS.get("cheap", 0) + 1
    return "ok" in (record.output.as_text() if record.output else "")


@evaluator(name="test/expensive", requires=("output",))
async def expensive(record: Record) -> float:
    CALLS["expensive"] = CALLS.get("expensive", 0) + 1
    await asyncio.sleep(0)
    return float(record.metadata.get("quality", 0.5))


@evaluator(name="test/steps", requires=())
def steps(record: Record) -> float:
    return float(len(record.metadata.get("spans", [])))


@pytest.fixture(autouse=True)
def _reset_calls() -> None:
    CALLS.clear()


@pytest.fixture
def registry() -> Registry:
    r = builtin_registry()
    for ev in (cheap, expensive, steps):
        r.register(ev)
    return r


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Recorder:
    """A notifier that keeps what it was asked to send."""

    def __init__(self, ok: bool = True) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.ok = ok

    async def send(self, url: str, payload: dict[str, Any]) -> bool:
        self.sent.append((url, payload))
        return self.ok

    async def close(self) -> None:
        pass


class ListPromoter:
    def __init__(self) -> None:
        self.rows: list[tuple[str, str, dict[str, Any]]] = []

    async def promote(self, project: str, dataset: str, row: dict[str, Any]) -> str | None:
        if any(r[2]["id"] == row["id"] for r in self.rows):
            return None
        self.rows.append((project, dataset, row))
        return f"v{len(self.rows)}"


HEAD = """\
apiVersion: evals.si/v1alpha1
kind: OnlineEvalPolicy
metadata: {name: p}
spec:
"""


def policy(body: str, registry: Registry) -> PolicySpec:
    return policy_from_yaml(HEAD + body, registry=registry)


def make(
    i: int,
    output: str | None = "ok",
    *,
    service: str = "svc",
    ms: float = 100.0,
    error: bool = False,
    captured: bool = True,
    **metadata: Any,
) -> tuple[Trace, Record]:
    tid = f"{i:032x}"
    root = Span(
        trace_id=tid,
        span_id="1" * 16,
        name="agent",
        start_time_unix_nano=0,
        end_time_unix_nano=int(ms * 1e6),
        status_code=2 if error else 0,
        resource={"service.name": service},
        view=SpanView(type="agent"),
    )
    record = Record(
        id=tid,
        input=Content.of_text("q") if captured else None,
        output=Content.of_text(output) if captured and output is not None else None,
        metadata={"content_captured": captured, **metadata},
    )
    return Trace(tid, spans=[root]), record


async def feed(engine: PolicyEngine, items: Sequence[tuple[Trace, Record]]) -> None:
    for trace, record in items:
        await engine.on_trace(trace, record)
    await engine.drain()


CASCADE = """\
  cascade:
    - {ref: test/cheap}
    - {ref: test/expensive, when: "scores.all(s, s.passed)"}
"""


@sync
async def test_the_cascade_runs_the_expensive_step_only_when_the_cheap_one_passed(
    registry: Registry,
) -> None:
    engine = PolicyEngine(registry=registry, notifier=Recorder())
    await engine.apply(policy(CASCADE, registry))
    await feed(engine, [make(1, "ok"), make(2, "bad"), make(3, "ok fine"), make(4, "nope")])
    assert CALLS == {"cheap": 4, "expensive": 2}
    st = engine.stats("p")
    assert (st.selected, st.sampled, st.evaluated) == (4, 4, 4)
    assert st.outcomes == {"cheap:scored": 4, "expensive:scored": 2, "expensive:skipped": 2}
    judged = next(m for m in st.window if m.evaluator == "expensive")
    assert (judged.n, judged.skipped) == (2, 2)


@sync
async def test_a_judge_is_asked_through_the_judge_context(registry: Registry) -> None:
    asked: list[str] = []

    class Judge:
        async def complete(self, messages: Any, *, seed: Any = None, template: str = "") -> Any:
            asked.append(messages[-1].content)
            return JudgeReply('{"score": 0.25, "reasoning": "terse"}')

        def identity(self) -> dict[str, Any]:
            return {"model": "fixed"}

    engine = PolicyEngine(registry=registry, judge_factory=lambda spec: {"default": Judge()})
    body = (
        "  cascade:\n    - {ref: test/cheap}\n"
        "    - {ref: llm-judge, params: {rubric: 'polite?'}, when: \"passed('cheap')\"}\n"
    )
    await engine.apply(policy(body, registry))
    await feed(engine, [make(1, "ok thanks"), make(2, "go away")])
    assert len(asked) == 1
    assert "ok thanks" in asked[0]
    m = next(m for m in engine.stats("p").window if m.evaluator == "llm-judge")
    assert (m.n, m.mean) == (1, 0.25)


@sync
async def test_a_missing_judge_is_refused_when_applied(registry: Registry) -> None:
    engine = PolicyEngine(registry=registry)
    spec = policy("  cascade: [{ref: llm-judge, params: {rubric: x}}]\n", registry)
    with pytest.raises(Exception, match="needs a judge named 'default'"):
        await engine.apply(spec)
    assert engine.policies() == []


@sync
async def test_selector_and_project_choose_the_traces(registry: Registry) -> None:
    engine = PolicyEngine(registry=registry)
    await engine.apply(
        policy('  selector: \'resource["service.name"] == "svc"\'\n' + CASCADE, registry)
    )
    other_project = make(3)
    other_project[0].project = "elsewhere"
    await feed(engine, [make(1), make(2, service="other"), other_project])
    st = engine.stats("p")
    # another project's trace is not this policy's to count
    assert (st.selected, st.evaluated, st.skipped) == (1, 1, {"not_selected": 1})


@sync
async def test_rate_sampling_follows_the_trace_id(registry: Registry) -> None:
    engine = PolicyEngine(registry=registry)
    await engine.apply(policy("  sampling: {rate: 0.3}\n" + CASCADE, registry))
    items = [make(i) for i in range(200)]
    await feed(engine, items)
    expected = sum(sampled(t.trace_id, 0.3) for t, _ in items)
    st = engine.stats("p")
    assert st.sampled == expected == st.evaluated
    assert st.skipped["not_sampled"] == 200 - expected


@sync
async def test_always_rules_grade_errors_and_slow_traces_at_rate_zero(registry: Registry) -> None:
    engine = PolicyEngine(registry=registry)
    body = "  sampling: {rate: 0, always: ['trace.error', 'latency > p95']}\n" + CASCADE
    await engine.apply(policy(body, registry))
    await feed(engine, [make(1000, ms=9000.0)])  # slow, but no estimate yet: not graded
    await feed(engine, [make(i, ms=100.0) for i in range(100)])
    assert engine.stats("p").sampled == 0  # none is above the p95 of equal durations
    await feed(engine, [make(500, ms=5000.0), make(501, error=True)])
    assert engine.stats("p").sampled == 2


@sync
async def test_a_trace_without_content_skips_content_evaluators_with_the_reason(
    registry: Registry, tmp_path: Path
) -> None:
    store = SqlStore.open(tmp_path / "s.db")
    engine = PolicyEngine(registry=registry, store=store)
    applied = await engine.apply(
        policy("  cascade:\n    - {ref: test/cheap}\n    - {ref: test/steps}\n", registry)
    )
    await feed(engine, [make(1, captured=False, spans=["a", "b"])])
    st = engine.stats("p")
    assert st.skipped == {"no_content": 1}
    assert st.outcomes["cheap:skipped"] == 1
    assert st.outcomes["steps:scored"] == 1  # needs no content: still graded
    got = [(i, r.outcome, r.reason) for _, i, r in store.iter_results(applied.run_id)]
    assert got[0][1] is Outcome.SKIPPED
    assert got[0][2].startswith("no content")
    assert got[1][1] is Outcome.SCORED
    store.close()


@sync
async def test_scores_are_stored_under_the_trace_id_and_regrading_is_idempotent(
    registry: Registry, tmp_path: Path
) -> None:
    store = SqlStore.open(tmp_path / "s.db")
    engine = PolicyEngine(registry=registry, store=store)
    applied = await engine.apply(policy(CASCADE, registry))
    assert applied.run_id == run_id_for(applied.spec.spec_hash)
    trace, record = make(7, "ok")
    for _ in range(3):
        await engine.on_trace(trace, record)
    rows = list(store.iter_results(applied.run_id))
    assert len(rows) == 2
    assert store.count_results(applied.run_id) == 2
    assert {r.record_id for _, _, r in rows} == {trace.trace_id}
    assert {seq for seq, _, _ in rows} == {result_key(trace.trace_id)[0]}
    info = store.get_run(applied.run_id)
    assert (info.kind, info.name, info.status) == ("watch", "p", "running")
    assert [e["name"] for e in info.evaluators] == ["cheap", "expensive"]
    store.close()


@sync
async def test_policies_survive_a_restart_and_a_replaced_version_is_stopped(
    registry: Registry, tmp_path: Path
) -> None:
    store = SqlStore.open(tmp_path / "s.db")
    first = PolicyEngine(registry=registry, store=store)
    old = await first.apply(policy(CASCADE, registry))
    again = await first.apply(policy(CASCADE, registry))
    assert not again.changed
    assert again.run_id == old.run_id
    new = await first.apply(policy("  sampling: {rate: 0.5}\n" + CASCADE, registry))
    assert new.run_id != old.run_id
    assert store.get_run(old.run_id).status == "stopped"
    second = PolicyEngine(registry=registry, store=store)
    assert await second.restore() == 1
    assert [p.run_id for p in second.policies()] == [new.run_id]
    assert second.get("p").spec.rate == 0.5
    await second.delete("p")
    assert store.get_run(new.run_id).status == "cancelled"
    third = PolicyEngine(registry=registry, store=store)
    assert await third.restore() == 0
    store.close()


@sync
async def test_an_ended_version_is_finished_like_any_run_with_its_counts_and_manifest(
    registry: Registry, tmp_path: Path
) -> None:
    store = SqlStore.open(tmp_path / "s.db")
    engine = PolicyEngine(registry=registry, store=store)
    old = await engine.apply(policy(CASCADE, registry))
    for i in range(3):
        await engine.on_trace(*make(i, "ok"))
    new = await engine.apply(policy("  sampling: {rate: 0.5}\n" + CASCADE, registry))
    ended = store.get_run(old.run_id)
    # counts kept at the replacement, not the last periodic save (none happened here)
    assert ended.summary is not None
    assert ended.summary["policy_state"]["counts"]["evaluated"] == 3
    assert (ended.status, ended.records, ended.finished_at is not None) == ("stopped", 3, True)
    manifest = RunManifest.from_dict(ended.manifest or {})
    assert manifest.spec_hash == old.spec.spec_hash
    assert manifest.dataset == DatasetPin("traces:default", None, 3)
    assert [e["name"] for e in manifest.evaluators] == ["cheap", "expensive"]
    assert manifest.evalsi_version == VERSION
    await engine.delete("p")
    gone = store.get_run(new.run_id)
    assert (gone.status, gone.records) == ("cancelled", 0)
    assert RunManifest.from_dict(gone.manifest or {}).dataset.records == 0
    store.close()


@sync
async def test_an_alert_fires_once_on_the_transition_and_re_arms(registry: Registry) -> None:
    clock = Clock()
    notifier = Recorder()
    engine = PolicyEngine(registry=registry, notifier=notifier, clock=clock)
    body = (
        "  cascade: [{ref: test/expensive}]\n"
        "  window: 60s\n"
        "  alerts:\n"
        "    - {name: low, when: \"mean('expensive') < 0.5\", notify: 'https://hooks.test/a'}\n"
    )
    await engine.apply(policy(body, registry))
    await feed(engine, [make(1, quality=0.9), make(2, quality=0.8)])
    assert notifier.sent == []
    await feed(engine, [make(i, quality=0.0) for i in range(3, 9)])  # mean drops below 0.5
    assert len(notifier.sent) == 1  # once, not once per trace
    url, payload = notifier.sent[0]
    assert url == "https://hooks.test/a"
    assert payload["alert"] == "low"
    assert payload["policy"] == "p"
    assert payload["metrics"][0]["evaluator"] == "expensive"
    assert engine.stats("p").firing == ["low"]
    clock.now += 120  # the low scores leave the window
    await feed(engine, [make(20, quality=1.0)])
    assert engine.stats("p").firing == []
    assert len(notifier.sent) == 1
    await feed(engine, [make(i, quality=0.0) for i in range(30, 33)])
    assert len(notifier.sent) == 2
    assert engine.stats("p").alerts_fired == 2


@sync
async def test_cooldown_keeps_a_flapping_alert_quiet(registry: Registry) -> None:
    clock = Clock()
    notifier = Recorder(ok=False)
    engine = PolicyEngine(registry=registry, notifier=notifier, clock=clock)
    body = (
        "  cascade: [{ref: test/expensive}]\n"
        "  window: 10s\n"
        "  alerts:\n"
        "    - {when: \"mean('expensive') < 0.5\", notify: 'https://h.test/', cooldown: 1h}\n"
    )
    await engine.apply(policy(body, registry))
    for i in range(4):
        await feed(engine, [make(i, quality=0.0)])
        clock.now += 20
        await feed(engine, [make(100 + i, quality=1.0)])
        clock.now += 20
    st = engine.stats("p")
    assert len(notifier.sent) == 1
    assert st.alerts_fired == 1
    assert st.alert_failures == 1


@sync
async def test_promote_appends_rows_open_dataset_reads_back(
    registry: Registry, tmp_path: Path
) -> None:
    promoter = ListPromoter()
    engine = PolicyEngine(registry=registry, promoter=promoter)
    body = CASCADE + "  promote: {when: \"passed('cheap') == false\", dataset: regressions}\n"
    await engine.apply(policy(body, registry))
    await feed(engine, [make(1, "ok"), make(2, "wrong answer"), make(2, "wrong answer")])
    assert engine.stats("p").promoted == 1
    [(project, dataset, row)] = promoter.rows
    assert (project, dataset, row["id"]) == ("default", "regressions", f"{2:032x}")
    path = tmp_path / "promoted.jsonl"
    import orjson

    path.write_bytes(orjson.dumps(row) + b"\n")
    [back] = list(open_dataset(str(path)))
    assert back.id == f"{2:032x}"
    assert back.output is not None
    assert back.output.as_text() == "wrong answer"
    assert back.metadata["promoted_by"] == "p"


@sync
async def test_negative_feedback_forces_grading_and_runs_feedback_steps(
    registry: Registry,
) -> None:
    engine = PolicyEngine(registry=registry)
    body = (
        "  sampling: {rate: 0, always: [feedback.negative]}\n"
        "  cascade: [{ref: test/cheap}]\n"
        "  onFeedback:\n"
        "    - {ref: test/expensive, when: 'feedback.negative'}\n"
    )
    await engine.apply(policy(body, registry))
    trace, record = make(1, "ok")
    await engine.on_trace(trace, record)
    assert engine.stats("p").evaluated == 0
    await engine.on_feedback(trace, record, Feedback(trace_id=trace.trace_id, value=1.0))
    assert engine.stats("p").evaluated == 0  # positive feedback forces nothing
    await engine.on_feedback(trace, record, Feedback(trace_id=trace.trace_id, value=-1.0))
    st = engine.stats("p")
    assert st.evaluated == 1
    assert CALLS == {"cheap": 1, "expensive": 1}
    await engine.on_feedback(trace, record, Feedback(trace_id=trace.trace_id, value=-1.0))
    assert engine.stats("p").evaluated == 1
    assert CALLS == {"cheap": 1, "expensive": 2}


@sync
async def test_an_evaluator_that_raises_is_an_error_for_that_trace_only(
    registry: Registry,
) -> None:
    @evaluator(name="test/broken", requires=("output",))
    def broken(record: Record) -> bool:
        raise RuntimeError("boom")

    registry.register(broken)
    engine = PolicyEngine(registry=registry)
    await engine.apply(policy("  cascade: [{ref: test/broken}, {ref: test/cheap}]\n", registry))
    await feed(engine, [make(1), make(2)])
    st = engine.stats("p")
    assert st.evaluated == 2
    assert st.errors == 2
    assert st.outcomes["cheap:scored"] == 2


@sync
async def test_unknown_policies_are_not_found(registry: Registry) -> None:
    from evalsi.core import NotFoundError

    engine = PolicyEngine(registry=registry)
    with pytest.raises(NotFoundError, match="no policy 'nope'"):
        engine.stats("nope")
    with pytest.raises(NotFoundError):
        await engine.delete("nope")


@sync
async def test_submit_grades_in_the_background_and_sheds_beyond_the_bound(
    registry: Registry,
) -> None:
    engine = PolicyEngine(registry=registry, concurrency=2, max_pending=5)
    await engine.apply(policy(CASCADE, registry))
    for i in range(8):
        await engine.submit(*make(i))  # returns at once; nothing graded yet
    assert engine.stats("p").evaluated == 0
    await engine.drain()
    assert engine.stats("p").evaluated == 5
    assert engine.overloaded == 3


@sync
async def test_feedback_during_grading_waits_for_it_instead_of_grading_again(
    registry: Registry,
) -> None:
    gate = asyncio.Event()

    @evaluator(name="test/slow", requires=("output",))
    async def slow(record: Record) -> float:
        CALLS["slow"] = CALLS.get("slow", 0) + 1
        await gate.wait()  # a judge call in flight
        return 1.0

    registry.register(slow)
    engine = PolicyEngine(registry=registry)
    await engine.apply(
        policy(
            "  sampling: {rate: 0.0, always: [trace.error, feedback.negative]}\n"
            "  cascade: [{ref: test/slow}]\n",
            registry,
        )
    )
    trace, record = make(1, error=True)  # sampled by its error, not by the rate
    await engine.submit(trace, record)
    await asyncio.sleep(0)  # grading has started and waits on the judge
    feedback = asyncio.create_task(
        engine.submit_feedback(trace, record, Feedback(trace_id=trace.trace_id, value=-1.0))
    )
    await asyncio.sleep(0.01)
    gate.set()
    await feedback
    await engine.drain()
    stats = engine.stats("p")
    assert CALLS["slow"] == 1
    assert (stats.sampled, stats.evaluated) == (1, 1)


@sync
async def test_drain_with_a_timeout_cancels_what_is_left(registry: Registry) -> None:
    @evaluator(name="test/hang", requires=("output",))
    async def hang(record: Record) -> float:
        await asyncio.Event().wait()
        return 1.0

    registry.register(hang)
    engine = PolicyEngine(registry=registry)
    await engine.apply(policy("  cascade: [{ref: test/hang}]\n", registry))
    await engine.submit(*make(1))
    await asyncio.sleep(0)
    await asyncio.wait_for(engine.drain(timeout_s=0.05), 5)
    assert engine.stats("p").evaluated == 0


@sync
async def test_a_condition_failing_on_the_data_is_decided_false_not_a_crash(
    registry: Registry,
) -> None:
    engine = PolicyEngine(registry=registry, notifier=Recorder())
    # scores[0] does not exist when the first step skipped; x / 0 on a 1-span trace
    await engine.apply(
        policy(
            "  cascade:\n    - {ref: test/cheap}\n"
            '    - {ref: test/steps, when: "scores[0].passed"}\n',
            registry,
        )
    )
    other = policy_from_yaml(
        HEAD.replace("name: p", "name: q")
        + "  selector: 'trace.span_count / (trace.span_count - 1) >= 1'\n"
        + "  cascade: [{ref: test/cheap}]\n",
        registry=registry,
    )
    await engine.apply(other)
    third = policy_from_yaml(
        HEAD.replace("name: p", "name: r") + "  cascade: [{ref: test/cheap}]\n", registry=registry
    )
    await engine.apply(third)
    await feed(engine, [make(1, None)])  # no output: cheap is skipped, scores stays empty
    st = engine.stats("p")
    assert (st.evaluated, st.errors) == (1, 0)
    assert st.outcomes == {"cheap:skipped": 1, "steps:skipped": 1}
    assert engine.stats("q").skipped == {"not_selected": 1}  # 1 / 0: not selected
    assert engine.stats("r").evaluated == 1  # the policies after it still see the trace


@sync
async def test_a_policy_deleted_while_grading_leaves_no_trace(
    registry: Registry, tmp_path: Path
) -> None:
    gate = asyncio.Event()

    @evaluator(name="test/judged", requires=("output",))
    async def judged(record: Record) -> float:
        await gate.wait()  # a judge call in flight
        return 0.0

    registry.register(judged)
    store = SqlStore.open(tmp_path / "s.db")
    notifier, promoter = Recorder(), ListPromoter()
    engine = PolicyEngine(registry=registry, store=store, notifier=notifier, promoter=promoter)
    applied = await engine.apply(
        policy(
            "  cascade: [{ref: test/judged}]\n"
            "  alerts: [{when: \"mean('judged') < 0.5\", notify: 'https://h.example/x'}]\n"
            "  promote: {when: \"score('judged') < 0.5\", dataset: low}\n",
            registry,
        )
    )
    await engine.submit(*make(1))
    await asyncio.sleep(0.01)  # grading waits on the judge
    await engine.delete("p")
    gate.set()
    await engine.drain()
    assert notifier.sent == []
    assert promoter.rows == []
    assert store.count_results(applied.run_id) == 0
    assert store.get_run(applied.run_id).status == "cancelled"
    await engine.close()


@sync
async def test_feedback_steps_graded_again_replace_their_scores(registry: Registry) -> None:
    signals: list[int] = []

    @evaluator(name="test/fbcount", requires=())
    def fbcount(record: Record) -> float:
        signals.append(1)
        return float(len(signals))  # 1.0, then 2.0, then 3.0

    registry.register(fbcount)
    promoter = ListPromoter()
    engine = PolicyEngine(registry=registry, promoter=promoter)
    await engine.apply(
        policy(
            "  cascade: [{ref: test/cheap}]\n"
            "  onFeedback: [{ref: test/fbcount}]\n"
            "  promote: {when: \"score('fbcount') >= 3.0\", dataset: noisy}\n",
            registry,
        )
    )
    trace, record = make(1, "ok")
    await engine.on_trace(trace, record)
    for t in range(3):
        signal = Feedback(trace_id=trace.trace_id, value=-1.0, time_unix_nano=t + 1)
        trace.feedback.append(signal)
        await engine.on_feedback(trace, record, signal)
    st = engine.stats("p")
    counted = next(m for m in st.window if m.evaluator == "fbcount")
    assert (counted.n, counted.mean) == (1, 3.0)  # one trace, its latest score
    assert len(promoter.rows) == 1  # score('fbcount') read the latest, not the first


@sync
async def test_feedback_forcing_a_grade_counts_up_and_grades_once(
    registry: Registry, tmp_path: Path
) -> None:
    store = SqlStore.open(tmp_path / "s.db")
    engine = PolicyEngine(registry=registry, store=store)
    await engine.apply(
        policy(
            "  sampling: {rate: 0, always: [feedback.negative]}\n  cascade: [{ref: test/cheap}]\n",
            registry,
        )
    )
    trace, record = make(1, "ok")
    await engine.on_trace(trace, record)
    for t in range(2):
        signal = Feedback(trace_id=trace.trace_id, value=-1.0, time_unix_nano=t + 1)
        await engine.on_feedback(trace, record, signal)
        engine._policies[("default", "p")].recent.clear()  # as after 10,000 traces or a restart
    st = engine.stats("p")
    assert st.skipped == {"not_sampled": 1}  # never decremented (a counter only goes up)
    assert (st.selected, st.sampled, st.evaluated) == (1, 1, 1)  # the store knew it was graded
    assert st.forced_by_feedback == 1
    assert CALLS == {"cheap": 1}
    await engine.close()


@sync
async def test_alerts_follow_the_window_without_traffic(
    registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalsi.policies import _upkeep

    monkeypatch.setattr(_upkeep, "ALERT_CHECK_S", 0.01)
    clock, notifier = Clock(), Recorder()
    engine = PolicyEngine(registry=registry, notifier=notifier, clock=clock)
    await engine.apply(
        policy(
            "  cascade: [{ref: test/cheap}]\n  window: 10s\n"
            "  alerts: [{name: quiet, when: 'n < 1', notify: 'https://h.example/x'}]\n",
            registry,
        )
    )
    await feed(engine, [make(1, "ok")])
    await asyncio.sleep(0.05)
    assert notifier.sent == []
    assert engine.stats("p").firing == []
    clock.now = 60.0  # a minute without a trace: the window is empty
    for _ in range(100):
        if notifier.sent:
            break
        await asyncio.sleep(0.01)
    assert [p["alert"] for _, p in notifier.sent] == ["quiet"]  # no trace needed to notice
    assert engine.stats("p").firing == ["quiet"]
    await engine.close()


@sync
async def test_a_policy_deleted_while_its_rows_are_written_alerts_nothing(
    registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notifier, promoter = Recorder(), ListPromoter()
    engine = PolicyEngine(
        registry=registry, store=SqlStore.open(tmp_path / "s.db"), notifier=notifier,
        promoter=promoter,
    )  # fmt: skip
    await engine.apply(
        policy(
            "  cascade: [{ref: test/cheap}]\n"
            "  alerts: [{when: 'n >= 1', notify: 'https://h.example/x'}]\n"
            "  promote: {when: 'true', dataset: low}\n",
            registry,
        )
    )
    gate = asyncio.Event()
    assert engine.runs is not None
    write = engine.runs.write

    async def slow_write(run_id: str, rows: Any) -> None:
        await gate.wait()  # a busy store
        await write(run_id, rows)

    monkeypatch.setattr(engine.runs, "write", slow_write)
    await engine.submit(*make(1, "ok"))
    await asyncio.sleep(0.05)
    await engine.delete("p")
    gate.set()
    await engine.drain()
    assert notifier.sent == []
    assert promoter.rows == []
    await engine.close()


@sync
async def test_counts_and_alert_states_survive_a_restart(
    registry: Registry, tmp_path: Path
) -> None:
    store = SqlStore.open(tmp_path / "s.db")
    body = (
        "  cascade: [{ref: test/cheap}]\n"
        "  alerts: [{name: bad, when: \"rate('cheap') < 0.5\", notify: 'https://h.example/x'}]\n"
    )
    notifier = Recorder()
    first = PolicyEngine(registry=registry, store=store, notifier=notifier)
    await first.apply(policy(body, registry))
    await feed(first, [make(1, "bad"), make(2, "nope"), make(3, "ok")])
    before = first.stats("p")
    assert [p["alert"] for _, p in notifier.sent] == ["bad"]
    await first.close()  # keeps the counts and alert states with the policy's run

    notifier = Recorder()
    second = PolicyEngine(registry=registry, store=store, notifier=notifier)
    assert await second.restore() == 1
    after = second.stats("p")
    assert (after.selected, after.sampled, after.evaluated) == (3, 3, 3)
    assert (after.alerts_fired, after.outcomes) == (1, before.outcomes)
    assert after.firing == ["bad"]
    await feed(second, [make(4, "bad")])  # still failing: the alert fired already, no page
    assert notifier.sent == []
    assert second.stats("p").evaluated == 4
    await second.close()


# -- dataset-scope evaluators: corpus metrics over the window's traces --------------------------

HYPS = ["the cat sat on the mat", "a dog runs in the park", "it is raining today", "hello there"]
REFS = ["the cat sat on a mat", "the dog runs in the park", "it rains today", "hello there"]
PAIRS = list(zip(HYPS, REFS, strict=True))


def translated(i: int, hyp: str, ref: str, **metadata: Any) -> tuple[Trace, Record]:
    trace, record = make(i, hyp, **metadata)
    record.reference = Content.of_text(ref)
    return trace, record


@sync
async def test_a_corpus_metric_in_the_cascade_is_the_window_reduced_as_sacrebleu_does(
    registry: Registry,
) -> None:
    import sacrebleu

    clock = Clock()
    engine = PolicyEngine(registry=registry, clock=clock)
    body = "  cascade: [{ref: test/cheap}, {ref: bleu}, {ref: chrf}]\n  window: 60s\n"
    await engine.apply(policy(body, registry))
    await feed(engine, [translated(i, h, r) for i, (h, r) in enumerate(PAIRS)])
    window = {m.evaluator: m for m in engine.stats("p").window}
    assert window["bleu"].mean == pytest.approx(sacrebleu.corpus_bleu(HYPS, [REFS]).score)
    assert window["chrf"].mean == pytest.approx(sacrebleu.corpus_chrf(HYPS, [REFS]).score)
    assert window["bleu"].n == len(HYPS)
    assert window["bleu"].ci.method == "bootstrap-percentile"
    assert window["cheap"].n == len(HYPS)  # the record-scope step still grades each trace
    # the traces leave with the window; a later one is the whole corpus
    clock.now += 120
    await feed(engine, [translated(10, HYPS[0], REFS[0])])
    window = {m.evaluator: m for m in engine.stats("p").window}
    assert window["bleu"].n == 1
    assert window["bleu"].mean == pytest.approx(sacrebleu.corpus_bleu(HYPS[:1], [REFS[:1]]).score)
    # with nothing left in the window the metric is gone, not stale
    clock.now += 120
    await engine.drain()
    assert "bleu" not in {m.evaluator for m in engine.stats("p").window}


@sync
async def test_a_corpus_step_takes_only_the_traces_its_when_admits(registry: Registry) -> None:
    import sacrebleu

    engine = PolicyEngine(registry=registry, clock=Clock())
    body = "  cascade:\n    - {ref: test/cheap}\n    - {ref: bleu, when: \"passed('cheap')\"}\n"
    await engine.apply(policy(body, registry))
    # "ok" in the output passes test/cheap: only those two join the corpus
    items = [("ok the cat", "the cat"), ("no", "yes"), ("ok a dog", "a dog"), ("bad", "good")]
    await feed(engine, [translated(i, h, r) for i, (h, r) in enumerate(items)])
    bleu = next(m for m in engine.stats("p").window if m.evaluator == "bleu")
    admitted = [items[0], items[2]]
    expected = sacrebleu.corpus_bleu([h for h, _ in admitted], [[r for _, r in admitted]]).score
    assert (bleu.n, bleu.mean) == (2, pytest.approx(expected))


@sync
async def test_an_alert_reads_a_corpus_metric(registry: Registry) -> None:
    notifier = Recorder()
    engine = PolicyEngine(registry=registry, notifier=notifier, clock=Clock())
    body = (
        "  cascade: [{ref: bleu}]\n"
        "  alerts:\n"
        "    - {name: low-bleu, when: \"mean('bleu') < 50 && n >= 3\", notify: 'https://h.test/a'}\n"
    )
    await engine.apply(policy(body, registry))
    await feed(
        engine,
        [translated(i, "these are the same words", "these are the same words") for i in range(3)],
    )
    assert notifier.sent == []
    assert engine.stats("p").firing == []
    await feed(engine, [translated(i, "zz yy xx ww", "aa bb cc dd") for i in range(3, 12)])
    assert [p["alert"] for _, p in notifier.sent] == ["low-bleu"]
    assert "bleu" in {m["evaluator"] for m in notifier.sent[0][1]["metrics"]}
    assert engine.stats("p").firing == ["low-bleu"]


@sync
async def test_a_corpus_metric_stores_no_row_per_trace(registry: Registry, tmp_path: Path) -> None:
    store = SqlStore.open(tmp_path / "e.db")
    engine = PolicyEngine(registry=registry, store=store, clock=Clock())
    applied = await engine.apply(policy("  cascade: [{ref: exact-match}, {ref: bleu}]\n", registry))
    await feed(engine, [translated(i, h, r) for i, (h, r) in enumerate(PAIRS)])
    assert {r.evaluator for _, _, r in store.iter_results(applied.run_id)} == {"exact-match"}
    store.close()
