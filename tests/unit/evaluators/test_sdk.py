"""The evaluator SDK: decorator, params, registry, and the SKIPPED / ERROR rules of the runner."""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest

from evalsi.core import (
    Content,
    Outcome,
    OutputSpec,
    ParamError,
    Record,
    Scope,
    Score,
    UnknownEvaluatorError,
    Usage,
)
from evalsi.evaluators import Registry, Skip, evaluator, make_runner


def rec(i: int, output: str | None = "a", reference: str | None = "a", **kw: object) -> Record:
    return Record(
        id=str(i),
        output=Content.of_text(output) if output is not None else None,
        reference=Content.of_text(reference) if reference is not None else None,
        **kw,  # type: ignore[arg-type]
    )


@evaluator(name="test/equal", version="1.2.0", requires=("output", "reference"), output="passed")
def equal(record: Record, *, ignore_case: bool = False) -> bool:
    """Output equals reference."""
    a, b = record.output.as_text(), record.reference.as_text()  # type: ignore[union-attr]
    return a.lower() == b.lower() if ignore_case else a == b


def test_decorator_builds_manifest_from_signature() -> None:
    m = equal.manifest
    assert equal.ref == "test/equal@1.2.0"
    assert m.scope is Scope.RECORD
    assert m.requires == ("output", "reference")
    assert m.outputs == (OutputSpec("equal", "passed", (0.0, 1.0)),)
    assert m.description == "Output equals reference."
    assert m.params_schema["properties"]["ignore_case"] == {"type": "boolean", "default": False}
    assert m.params_schema["additionalProperties"] is False
    # the decorated function stays callable as itself
    assert equal(rec(1)) is True


def test_default_name_and_namespace() -> None:
    @evaluator
    def my_metric(record: Record) -> float:
        return 1.0

    assert my_metric.ref == "local/my-metric@0.0.0"


def test_params_must_be_keyword_only() -> None:
    with pytest.raises(TypeError, match="keyword-only"):

        @evaluator
        def bad(record: Record, threshold: float = 0.5) -> bool:
            return True


def test_requires_unknown_field_is_rejected() -> None:
    with pytest.raises(TypeError, match="unknown record field 'outptu'"):
        evaluator(name="x/y", requires=("outptu",))(lambda r: True)


def test_param_validation_names_the_param_and_coerces_strings() -> None:
    @evaluator(name="t/p")
    def p(
        record: Record,
        *,
        threshold: float = 0.5,
        mode: Literal["any", "all"] = "any",
        values: list[str] | None = None,
        n: int = 1,
    ) -> bool:
        return True

    bound = p.bind({"threshold": "0.7", "mode": "all", "values": "a,b", "n": "3"})
    assert bound.params == {"threshold": 0.7, "mode": "all", "values": ["a", "b"], "n": 3}
    assert p.bind({"values": '["x", "y"]'}).params["values"] == ["x", "y"]
    with pytest.raises(ParamError, match=r"p: param 'threshold' must be a number"):
        p.bind({"threshold": "high"})
    with pytest.raises(ParamError, match="must be one of 'any', 'all'"):
        p.bind({"mode": "some"})
    with pytest.raises(ParamError, match="unknown param 'treshold'") as info:
        p.bind({"treshold": 1})
    assert "threshold" in str(info.value)
    with pytest.raises(ParamError, match="must be an integer"):
        p.bind({"n": True})


def test_required_param() -> None:
    @evaluator(name="t/req")
    def req(record: Record, *, pattern: str) -> bool:
        return True

    assert req.manifest.params_schema["required"] == ["pattern"]
    with pytest.raises(ParamError, match="missing required param"):
        req.bind({})


def test_registry_resolves_three_spellings_and_suggests() -> None:
    reg = Registry([equal])
    for ref in ("test/equal@1.2.0", "test/equal", "equal"):
        assert reg.resolve(ref) is equal
    with pytest.raises(UnknownEvaluatorError, match="unknown evaluator 'eqaul'") as info:
        reg.resolve("eqaul")
    assert "did you mean equal" in str(info.value)
    with pytest.raises(UnknownEvaluatorError, match=r"has no version 9\.9\.9"):
        reg.resolve("test/equal@9.9.9")
    with pytest.raises(UnknownEvaluatorError, match="invalid evaluator reference"):
        reg.resolve("Bad Name!")


def test_registry_picks_newest_version_and_builtin_on_ambiguity() -> None:
    v1 = evaluator(name="builtin/m", version="1.9.0")(lambda r: True)
    v2 = evaluator(name="builtin/m", version="1.10.0")(lambda r: True)
    other = evaluator(name="acme/m", version="3.0.0")(lambda r: True)
    reg = Registry([v1, v2, other])
    assert reg.resolve("m") is v2
    assert reg.resolve("acme/m") is other
    reg2 = Registry([other, evaluator(name="zed/m")(lambda r: True)])
    with pytest.raises(UnknownEvaluatorError, match="ambiguous"):
        reg2.resolve("m")


def test_registry_is_not_global() -> None:
    assert len(Registry()) == 0
    assert "equal" not in Registry()


def test_runner_skips_records_lacking_required_fields() -> None:
    runner = make_runner(equal.bind())
    results = runner.run([rec(1), rec(2, reference=None), rec(3, output=None), rec(4, "A", "a")])
    assert [r.outcome for r in results] == [
        Outcome.SCORED,
        Outcome.SKIPPED,
        Outcome.SKIPPED,
        Outcome.SCORED,
    ]
    assert results[1].reason == "record has no reference"
    assert results[2].reason == "record has no output"
    assert [s.passed for s in results[0].scores + results[3].scores] == [True, False]
    assert results[0].evaluator_ref == "test/equal@1.2.0"


def test_runner_turns_exceptions_into_errors_and_goes_on() -> None:
    @evaluator(name="t/boom")
    def boom(record: Record) -> float:
        if record.id == "2":
            raise ValueError("bad thing")
        if record.id == "3":
            raise Skip("not applicable")
        return 0.5

    results = make_runner(boom.bind()).run([rec(1), rec(2), rec(3), rec(4)])
    assert [r.outcome for r in results] == [
        Outcome.SCORED,
        Outcome.ERROR,
        Outcome.SKIPPED,
        Outcome.SCORED,
    ]
    assert results[1].reason == "ValueError: bad thing"
    assert results[2].reason == "not applicable"
    assert results[3].scores[0].number == 0.5


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "expected Score"),
        (float("nan"), "finite"),
        (Score(), "exactly one"),
        (Score(number=1.0, passed=True), "exactly one"),
        ({"x": 1}, "expected Score"),
    ],
)
def test_malformed_return_values_are_errors_never_zero(value: object, reason: str) -> None:
    ev = evaluator(name="t/ret")(lambda r: value)
    (result,) = make_runner(ev.bind()).run([rec(1)])
    assert result.outcome is Outcome.ERROR
    assert reason in result.reason
    assert result.scores == []


def test_return_value_normalisation() -> None:
    for value, kind in ((True, "passed"), (3, "number"), (0.25, "number"), ("cat", "label")):
        ev = evaluator(name="t/norm")(lambda r, *, _v=value: _v)
        (result,) = make_runner(ev.bind()).run([rec(1)])
        assert result.scores[0].kind == kind
        assert result.scores[0].name == "norm"
    multi = evaluator(name="t/multi")(
        lambda r: [Score(name="a", number=1.0), Score(passed=False, explanation="why")]
    )
    (result,) = make_runner(multi.bind()).run([rec(1)])
    assert [(s.name, s.value) for s in result.scores] == [("a", 1.0), ("multi", False)]


def test_batch_function_and_length_mismatch() -> None:
    @evaluator(name="t/batch", batch=True)
    def batched(records: list[Record], *, offset: float = 0.0) -> list[float]:
        return [len(r.id) + offset for r in records]

    results = make_runner(batched.bind({"offset": 1})).run(
        [rec(1), rec(22, reference=None), rec(333)]
    )
    assert [r.scores[0].number for r in results] == [2.0, 3.0, 4.0]

    short = evaluator(name="t/short", batch=True)(lambda records: [1.0])
    results = make_runner(short.bind()).run([rec(1), rec(2)])
    assert all(r.outcome is Outcome.ERROR for r in results)
    assert "returned 1 values for 2 records" in results[0].reason


def test_class_evaluator_with_params_instantiated_once() -> None:
    made = []

    @evaluator(name="t/cls", output="number")
    class Counter:
        def __init__(self, *, start: int = 0) -> None:
            made.append(start)
            self.n = start

        def __call__(self, record: Record) -> float:
            self.n += 1
            return float(self.n)

    bound = Counter.bind({"start": 10})
    results = make_runner(bound).run([rec(1), rec(2)])
    assert made == [10]
    assert [r.scores[0].number for r in results] == [11.0, 12.0]


def test_async_evaluator() -> None:
    @evaluator(name="t/async")
    async def slow(record: Record) -> bool:
        await asyncio.sleep(0)
        if record.id == "2":
            raise RuntimeError("judge down")
        return True

    runner = make_runner(slow.bind())
    assert runner.is_async
    results = asyncio.run(runner.run_async([rec(1), rec(2), rec(3, output=None)]))
    assert [r.outcome for r in results] == [Outcome.SCORED, Outcome.ERROR, Outcome.SKIPPED]


def test_dataset_scope_map_reduce() -> None:
    @evaluator(
        name="t/accuracy", scope="dataset", requires=("output", "reference"), output="number"
    )
    class Accuracy:
        def map(self, record: Record) -> bool:
            return record.output.as_text() == record.reference.as_text()  # type: ignore[union-attr]

        def reduce(self, values: list[bool]) -> float:
            return sum(values) / len(values)

    runner = make_runner(Accuracy.bind())
    runner.feed([rec(1), rec(2, "x"), rec(3, reference=None)])  # type: ignore[union-attr]
    runner.feed([rec(4)])  # type: ignore[union-attr]
    result = runner.finish()  # type: ignore[union-attr]
    assert result.outcome is Outcome.SCORED
    assert result.record_id == ""
    assert result.scores[0].number == pytest.approx(2 / 3)


def test_dataset_scope_requires_map_and_reduce() -> None:
    with pytest.raises(TypeError, match="map\\(\\) and reduce\\(\\)"):
        evaluator(name="t/ds", scope="dataset")(lambda r: 1.0)


def test_declared_scopes_that_do_not_run_yet_fail_loudly() -> None:
    ev = evaluator(name="t/span", scope="span")(lambda r: True)
    from evalsi.core import UserError

    with pytest.raises(UserError, match="declared but not runnable yet"):
        make_runner(ev.bind())


def test_requires_usage_subfields() -> None:
    ev = evaluator(name="t/lat", requires=("usage.latency_ms",))(lambda r: r.usage.latency_ms)
    records = [rec(1, usage=Usage(latency_ms=12.0)), rec(2, usage=Usage(cost_usd=1.0)), rec(3)]
    results = make_runner(ev.bind()).run(records)
    assert [r.outcome for r in results] == [Outcome.SCORED, Outcome.SKIPPED, Outcome.SKIPPED]
    assert results[1].reason == "record has no usage.latency_ms"


def test_async_function_with_params() -> None:
    @evaluator(name="t/async-params")
    async def slow(record: Record, *, want: str = "a") -> bool:
        await asyncio.sleep(0)
        return record.output.as_text() == want  # type: ignore[union-attr]

    runner = make_runner(slow.bind({"want": "b"}))
    assert runner.is_async
    results = asyncio.run(runner.run_async([rec(1, "a"), rec(2, "b")]))
    assert [r.scores[0].passed for r in results] == [False, True]


def test_requires_usage_fields_are_checked_at_declaration() -> None:
    with pytest.raises(TypeError, match=r"unknown record field 'usage\.latency'"):
        evaluator(name="t/bad-usage", requires=("usage.latency",))(lambda r: True)
    ok = evaluator(name="t/ok-usage", requires=("usage.tokens", "metadata.topic"))(lambda r: 1.0)
    assert ok.manifest.requires == ("usage.tokens", "metadata.topic")
