"""core -> proto -> bytes -> proto -> core must give back the same object, field for field.

JSON values travel as ``google.protobuf.Value``, whose numbers are doubles. The strategies below
therefore draw JSON numbers that survive that trip exactly and keep their Python type: ints
within +-2**53 and floats with a fractional part. (A float holding an integral value, such as
3.0, comes back as the int 3; ``test_integral_float_reads_back_as_int`` pins that documented
behaviour.) Strings exclude lone surrogates, which protobuf cannot encode as UTF-8. NaN is left
out everywhere because it never equals itself.

Equality is checked twice: with ``==`` (the dataclasses' own equality) and on a canonical form
that records every value's type, because ``==`` alone would let ``True`` pass for ``1`` and
``1`` for ``1.0``.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, get_args

import pytest
from google.protobuf import struct_pb2
from hypothesis import given
from hypothesis import strategies as st

from evalsi._proto.evalsi.v1alpha1 import evaluator_pb2, record_pb2, score_pb2
from evalsi.core import (
    Content,
    EvaluationResult,
    EvaluatorManifest,
    EvaluatorRef,
    Interval,
    IsolationReport,
    MediaRef,
    Message,
    MetricSummary,
    Outcome,
    OutputSpec,
    OutputType,
    Provenance,
    Record,
    Scope,
    Score,
    ScoreKind,
    Step,
    StepKind,
    TabularRow,
    Tensor,
    ToolCall,
    Trajectory,
    Usage,
)
from evalsi.wire import (
    content_from_proto,
    content_to_proto,
    manifest_from_proto,
    manifest_to_proto,
    record_from_proto,
    record_to_proto,
    result_from_proto,
    result_to_proto,
    score_from_proto,
    score_to_proto,
    struct_from_proto,
    struct_to_proto,
    summary_from_proto,
    summary_to_proto,
    value_from_proto,
    value_to_proto,
)

INT64 = st.integers(-(2**63), 2**63 - 1)
COUNTS = st.integers(0, 2**63 - 1)
EXACT_INTS = st.integers(-(2**53), 2**53)
DOUBLES = st.floats(allow_nan=False)  # infinities survive a double; NaN never equals itself
FRACTIONAL = st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: not x.is_integer())
TEXT = st.text(st.characters(codec="utf-8"), max_size=12)


def optional(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


JSON = st.recursive(
    st.none() | st.booleans() | EXACT_INTS | FRACTIONAL | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)
JSON_OBJECTS = st.dictionaries(TEXT, JSON, max_size=3)

TOOL_CALLS = st.builds(ToolCall, name=TEXT, arguments=JSON, id=TEXT)
MESSAGES = st.builds(
    Message,
    role=st.sampled_from(["system", "user", "assistant", "tool"]) | TEXT,
    content=optional(TEXT),
    tool_calls=st.lists(TOOL_CALLS, max_size=2),
    tool_call_id=TEXT,
    name=TEXT,
)
ROWS = st.builds(
    TabularRow,
    features=JSON_OBJECTS,
    prediction=JSON,
    probabilities=st.dictionaries(TEXT, DOUBLES, max_size=3),
)


@st.composite
def tensors(draw: st.DrawFn) -> Tensor:
    shape = tuple(draw(st.lists(st.integers(0, 3), max_size=3)))
    size = 1
    for n in shape:
        size *= n
    values = draw(st.lists(DOUBLES, min_size=size, max_size=size))
    return Tensor(
        dtype=draw(st.sampled_from(["float32", "float64", "int64"])), shape=shape, values=values
    )


MEDIA = st.builds(
    MediaRef,
    uri=TEXT,
    mime_type=TEXT,
    sha256=st.text("0123456789abcdef", max_size=64),
)
CONTENTS = st.one_of(
    TEXT.map(Content.of_text),
    st.lists(MESSAGES, max_size=3).map(Content.of_messages),
    JSON.map(Content.of_json),
    ROWS.map(Content.of_row),
    tensors().map(Content.of_tensor),
    MEDIA.map(Content.of_media),
)
USAGES = st.builds(
    Usage,
    input_tokens=optional(INT64),
    output_tokens=optional(INT64),
    total_tokens=optional(INT64),
    cost_usd=optional(DOUBLES),
    latency_ms=optional(DOUBLES),
)
STEPS = st.builds(
    Step,
    kind=st.sampled_from(get_args(StepKind)),
    name=TEXT,
    input=JSON,
    output=JSON,
    tool_call=optional(TOOL_CALLS),
    usage=optional(USAGES),
    error=TEXT,
    start_time_unix_nano=st.integers(0, 2**64 - 1),
    end_time_unix_nano=st.integers(0, 2**64 - 1),
    span_id=TEXT,
)
TRAJECTORIES = st.builds(Trajectory, steps=st.lists(STEPS, max_size=3))
ISOLATION = st.builds(
    IsolationReport,
    level=st.sampled_from(["", "none", "process", "landlock", "namespaces", "vm"]),
    driver=TEXT,
    details=st.dictionaries(TEXT, TEXT, max_size=3),
)
PROVENANCE = st.builds(
    Provenance,
    source=st.sampled_from(["", "dataset", "run", "trace"]),
    dataset=TEXT,
    dataset_version=TEXT,
    line=INT64,
    run_id=TEXT,
    trace_id=TEXT,
    span_id=TEXT,
    isolation=optional(ISOLATION),
)
RECORDS = st.builds(
    Record,
    id=TEXT,
    input=optional(CONTENTS),
    output=optional(CONTENTS),
    reference=optional(CONTENTS),
    context=st.lists(CONTENTS, max_size=2),
    trajectory=optional(TRAJECTORIES),
    usage=optional(USAGES),
    metadata=JSON_OBJECTS,
    provenance=optional(PROVENANCE),
)


@st.composite
def scores(draw: st.DrawFn) -> Score:
    kind = draw(st.sampled_from(get_args(ScoreKind)))
    value: dict[str, Any]
    if kind == "number":
        value = {"number": draw(DOUBLES)}
    elif kind == "passed":
        value = {"passed": draw(st.booleans())}
    elif kind == "label":
        value = {"label": draw(TEXT)}
    else:
        # None would mean "no value at all", which is not a structured score.
        value = {"structured": draw(JSON.filter(lambda v: v is not None))}
    return Score(
        name=draw(TEXT),
        explanation=draw(TEXT),
        confidence=draw(optional(DOUBLES)),
        cost=draw(optional(USAGES)),
        metadata=draw(JSON_OBJECTS),
        **value,
    )


RESULTS = st.builds(
    EvaluationResult,
    record_id=TEXT,
    evaluator=TEXT,
    evaluator_ref=TEXT,
    outcome=st.sampled_from(Outcome),
    scores=st.lists(scores(), max_size=3),
    reason=TEXT,
    # Durations travel in whole nanoseconds; draw values that are whole nanoseconds already.
    duration_s=st.integers(-(10**15), 10**15).map(lambda ns: ns / 1e9),
    trial=st.integers(0, 2**31 - 1),
)
SUMMARIES = st.builds(
    MetricSummary,
    evaluator=TEXT,
    metric=TEXT,
    kind=st.sampled_from(get_args(ScoreKind)),
    n=COUNTS,
    mean=optional(DOUBLES),
    std=optional(DOUBLES),
    ci=st.builds(
        Interval,
        low=optional(DOUBLES),
        high=optional(DOUBLES),
        method=st.sampled_from(["wilson", "t", "clustered-t", "bootstrap"]) | TEXT,
        level=DOUBLES,
    ),
    scored=COUNTS,
    skipped=COUNTS,
    errors=COUNTS,
    cancelled=COUNTS,
    infra_errors=COUNTS,
    labels=st.dictionaries(TEXT, COUNTS, max_size=3),
    clusters=optional(COUNTS),
    pass_at_k=st.dictionaries(st.integers(1, 100).map(str), DOUBLES, max_size=3),
    pass_hat_k=st.dictionaries(st.integers(1, 100).map(str), DOUBLES, max_size=3),
    trial_variance=optional(DOUBLES),
    higher_is_better=optional(st.booleans()),
)
OUTPUT_SPECS = st.builds(
    OutputSpec,
    name=TEXT,
    type=st.sampled_from(get_args(OutputType)),
    range=optional(st.tuples(DOUBLES, DOUBLES)),
    higher_is_better=optional(st.booleans()),
    description=TEXT,
)
MANIFESTS = st.builds(
    EvaluatorManifest,
    ref=st.builds(EvaluatorRef, namespace=TEXT, name=TEXT, version=TEXT),
    scope=st.sampled_from(Scope),
    requires=st.lists(TEXT, max_size=3).map(tuple),
    outputs=st.lists(OUTPUT_SPECS, max_size=3).map(tuple),
    params_schema=JSON_OBJECTS,
    description=TEXT,
    example=TEXT,
    pack=TEXT,
    batchable=st.booleans(),
)


def canonical(value: Any) -> Any:
    """A comparable form that keeps every value's type (and ignores dict order)."""
    if isinstance(value, Content):
        return ("Content", value.kind, canonical(value.value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        return (
            type(value).__name__,
            tuple((f.name, canonical(getattr(value, f.name))) for f in fields),
        )
    if isinstance(value, enum.Enum):
        return (type(value).__name__, value.name)
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, canonical(v)) for k, v in value.items())))
    if isinstance(value, list | tuple):
        return (type(value).__name__, tuple(canonical(v) for v in value))
    return (type(value).__name__, value)


def through_the_wire(obj: Any, to_proto: Any, from_proto: Any) -> Any:
    message = to_proto(obj)
    decoded = type(message).FromString(message.SerializeToString())
    assert decoded == message
    back = from_proto(decoded)
    assert back == obj
    assert canonical(back) == canonical(obj)
    return back


# -- round trips --------------------------------------------------------------------------------
@given(RECORDS)
def test_record_round_trip(record: Record) -> None:
    through_the_wire(record, record_to_proto, record_from_proto)


@given(CONTENTS)
def test_content_round_trip(content: Content) -> None:
    through_the_wire(content, content_to_proto, content_from_proto)


@given(scores())
def test_score_round_trip(score: Score) -> None:
    through_the_wire(score, score_to_proto, score_from_proto)


@given(RESULTS)
def test_result_round_trip(result: EvaluationResult) -> None:
    through_the_wire(result, result_to_proto, result_from_proto)


@given(SUMMARIES)
def test_summary_round_trip(summary: MetricSummary) -> None:
    through_the_wire(summary, summary_to_proto, summary_from_proto)


@given(MANIFESTS)
def test_manifest_round_trip(manifest: EvaluatorManifest) -> None:
    through_the_wire(manifest, manifest_to_proto, manifest_from_proto)


@given(JSON)
def test_json_value_round_trip(value: Any) -> None:
    through_the_wire(value, value_to_proto, value_from_proto)


@given(JSON_OBJECTS)
def test_json_object_round_trip(value: dict[str, Any]) -> None:
    through_the_wire(value, struct_to_proto, struct_from_proto)


# -- absent is not empty ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "record",
    [
        Record(id="r"),
        Record(id="r", usage=Usage()),
        Record(id="r", trajectory=Trajectory()),
        Record(id="r", provenance=Provenance()),
        Record(id="r", provenance=Provenance(isolation=IsolationReport())),
        Record(id="r", output=Content.of_text("")),
        Record(id="r", output=Content.of_json(None)),
        Record(id="r", output=Content.of_json({})),
        Record(id="r", output=Content.of_json([])),
        Record(id="r", output=Content.of_messages([])),
        Record(id="r", output=Content.of_messages([Message(role="assistant", content=None)])),
        Record(id="r", output=Content.of_messages([Message(role="assistant", content="")])),
        Record(id="r", output=Content.of_row(TabularRow())),
        Record(id="r", output=Content.of_tensor(Tensor("float64", (), []))),
        Record(id="r", output=Content.of_media(MediaRef(""))),
    ],
    ids=repr,
)
def test_absent_and_empty_stay_apart(record: Record) -> None:
    through_the_wire(record, record_to_proto, record_from_proto)


def test_empty_optional_containers_survive() -> None:
    spec = OutputSpec(name="x", type="number", range=(0.0, 0.0), higher_is_better=None)
    manifest = EvaluatorManifest(ref=EvaluatorRef("ns", "x"), outputs=(spec,), params_schema={})
    through_the_wire(manifest, manifest_to_proto, manifest_from_proto)
    score = Score(passed=False, confidence=0.0, cost=Usage(input_tokens=0))
    through_the_wire(score, score_to_proto, score_from_proto)


# -- JSON numbers -------------------------------------------------------------------------------
def test_integral_float_reads_back_as_int() -> None:
    back = value_from_proto(value_to_proto({"a": 3.0, "b": 2.5, "c": True, "d": 7}))
    assert back == {"a": 3, "b": 2.5, "c": True, "d": 7}
    assert [type(back[k]) for k in "abcd"] == [int, float, bool, int]


def test_integer_beyond_double_precision_is_refused() -> None:
    assert value_from_proto(value_to_proto(2**53)) == 2**53
    with pytest.raises(ValueError, match="2\\*\\*53"):
        value_to_proto(2**53 + 1)


def test_non_json_values_are_refused() -> None:
    with pytest.raises(TypeError, match="not a JSON value"):
        value_to_proto({"when": object()})
    with pytest.raises(TypeError, match="keys must be strings"):
        value_to_proto({1: "x"})


# -- malformed input ----------------------------------------------------------------------------
def test_score_with_two_values_is_refused() -> None:
    with pytest.raises(ValueError, match="several values"):
        score_to_proto(Score(name="x", number=1.0, passed=True))


def test_content_without_a_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="none is set"):
        content_from_proto(record_pb2.Content())


def test_unspecified_outcome_is_refused() -> None:
    with pytest.raises(ValueError, match="not a known outcome"):
        result_from_proto(score_pb2.EvaluationResult(record_id="r"))


def test_unspecified_score_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="not a known score kind"):
        summary_from_proto(score_pb2.MetricSummary(metric="m"))


def test_unspecified_enums_with_a_documented_default() -> None:
    step_record = record_pb2.Record(
        id="r", trajectory=record_pb2.Trajectory(steps=[record_pb2.Step()])
    )
    decoded = record_from_proto(step_record)
    assert decoded.trajectory is not None
    assert decoded.trajectory.steps[0].kind == "other"
    manifest = manifest_from_proto(
        evaluator_pb2.EvaluatorManifest(ref=evaluator_pb2.EvaluatorRef(name="x"))
    )
    assert manifest.scope is Scope.RECORD
    assert manifest.requires == ()


# -- the schema and the core types agree --------------------------------------------------------
def test_outcome_numbers_match_the_schema() -> None:
    for outcome in Outcome:
        assert score_pb2.Outcome.Value(f"OUTCOME_{outcome.name}") == outcome.value
    assert score_pb2.Outcome.Value("OUTCOME_UNSPECIFIED") == 0


# Core field names that the schema spells differently.
RENAMED = {"duration_s": "duration"}


@pytest.mark.parametrize(
    ("core_type", "message"),
    [
        (Record, record_pb2.Record),
        (Message, record_pb2.Message),
        (ToolCall, record_pb2.ToolCall),
        (TabularRow, record_pb2.TabularRow),
        (Tensor, record_pb2.Tensor),
        (MediaRef, record_pb2.MediaRef),
        (Trajectory, record_pb2.Trajectory),
        (Step, record_pb2.Step),
        (Usage, record_pb2.Usage),
        (Provenance, record_pb2.Provenance),
        (IsolationReport, record_pb2.IsolationReport),
        (Score, score_pb2.Score),
        (EvaluationResult, score_pb2.EvaluationResult),
        (Interval, score_pb2.Interval),
        (MetricSummary, score_pb2.MetricSummary),
        (EvaluatorRef, evaluator_pb2.EvaluatorRef),
        (OutputSpec, evaluator_pb2.OutputSpec),
        (EvaluatorManifest, evaluator_pb2.EvaluatorManifest),
    ],
    ids=lambda x: getattr(x, "__name__", ""),
)
def test_every_field_has_a_counterpart(core_type: type, message: Any) -> None:
    # A field added on one side only would otherwise be dropped silently by the converters.
    core = {RENAMED.get(f.name, f.name) for f in dataclasses.fields(core_type)}
    wire = {f.name for f in message.DESCRIPTOR.fields}  # oneof members included
    assert core == wire


def test_value_is_the_well_known_type() -> None:
    # Struct/Value come from google.protobuf, so every protobuf runtime and JSON mapping agrees.
    assert record_pb2.ToolCall.DESCRIPTOR.fields_by_name["arguments"].message_type is (
        struct_pb2.Value.DESCRIPTOR
    )
