"""The IngestService's requests read into evalsi's own values: the ingest's header (key, project,
name, external evaluators, source) and each chunk's records and results, every problem a 400
naming its field.

What the checks allow is what ``ingest_service.proto``'s ``@constraints`` state; where two
fields could disagree, the request decides without an error, as upserts do: an evaluator
declared twice keeps its last declaration, two results of one record for the same evaluator and
trial keep the last, a declared range whose bounds come high first is the range between
them. A record with no result for an evaluator gets a SKIPPED one (``NOT_SENT``),
so every record has an outcome for every evaluator, as in any Score run.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from evalsi._proto.evalsi.v1alpha1 import evaluator_pb2
from evalsi._proto.evalsi.v1alpha1 import ingest_service_pb2 as pb
from evalsi.core import (
    DatasetError,
    EvaluationResult,
    EvaluatorRef,
    Outcome,
    OutputSpec,
    Record,
    UnknownEvaluatorError,
    UserError,
    parse_ref,
)
from evalsi.datasets import FieldMap, record_from_dict, record_to_row
from evalsi.runs import EXTERNAL_NAMESPACE, default_metric, external_evaluator
from evalsi.server._ingestion_parts import MISSING_EXAMPLES
from evalsi.server._proto_records import _records
from evalsi.server._state import Limits
from evalsi.store import DEFAULT_PROJECT, check_project_id
from evalsi.wire import manifest_from_proto, score_from_proto

_KEY = re.compile(r"[!-~]{1,128}")
_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")
_VERSION = re.compile(r"[0-9A-Za-z.+-]{1,64}")
_OUTCOMES = {int(o): o for o in Outcome}
MAX_EVALUATORS = 100
MAX_NUMBER = 1e100
"""The largest score a result may give: summaries square the values (variances), and a
square past 1e308 is no number."""
NOT_SENT = "no result was sent for this record"
"""The reason of the SKIPPED result a record gets for an evaluator none of its results name."""


@dataclass(frozen=True, slots=True)
class Header:
    """What starts an ingest (Ingest and StartIngest alike)."""

    project_id: str
    client_key: str
    name: str
    evaluators: list[dict[str, Any]]
    """As the run stores them (``runs.external_evaluator``), in order."""
    source: dict[str, Any]


@dataclass(slots=True)
class Chunk:
    """Consecutive records and their results, as the store and the records file take them."""

    lines: list[bytes]
    """Each record as the line of the run's JSONL file that reads back as it."""
    results: list[dict[tuple[int, int], EvaluationResult]]
    """Per record: its results by (evaluator index, trial)."""
    trials: int = 1
    missing: int = 0
    """(record, evaluator) pairs without a result in any trial (stored as SKIPPED)."""
    missing_examples: list[str] = field(default_factory=list)


def read_header(
    request: pb.IngestRequest | pb.StartIngestRequest, named: Mapping[str, str] | None = None
) -> Header:
    """The header of ``request``; ``named``: the evaluators its results name (and the field of
    the first result naming each), recorded with their name alone when not declared."""
    project = request.project_id or DEFAULT_PROJECT
    try:
        check_project_id(project)
    except UserError as e:
        raise _at("project_id", e) from None
    if not _KEY.fullmatch(request.client_key):
        raise UserError(
            f"client_key: expected 1-128 printable ASCII characters without spaces, got "
            f"{request.client_key[:40]!r}",
            hint="name the ingest, e.g. nightly-2026-12-01: the same key again is the same run",
        )
    if len(request.evaluators) > MAX_EVALUATORS:
        raise UserError(f"evaluators: {len(request.evaluators)} given; at most {MAX_EVALUATORS}")
    declared: dict[str, dict[str, Any]] = {}
    for i, message in enumerate(request.evaluators):
        spec = _evaluator(message, f"evaluators[{i}]")
        declared.pop(spec["name"], None)  # declared twice: the last declaration, in its place
        declared[spec["name"]] = spec
    for name, at in (named or {}).items():
        if name not in declared:
            if not _NAME.fullmatch(name):
                raise UserError(f"{at}: {_bad_name(name)}", hint=_NAME_HINT)
            declared[name] = external_evaluator(name, EvaluatorRef(EXTERNAL_NAMESPACE, name))
    if not declared:
        raise UserError(
            "evaluators: none; declare the evaluators whose verdicts the records carry",
            hint='e.g. {"name": "tool-accuracy", "ref": "mcpjam/tool-accuracy", "version": "1"}',
        )
    if len(declared) > MAX_EVALUATORS:
        raise UserError(f"evaluators: {len(declared)} named; at most {MAX_EVALUATORS}")
    s = request.source
    source = {
        k: v
        for k, v in (
            ("tool", s.tool),
            ("tool_version", s.tool_version),
            ("description", s.description),
            ("dataset_name", s.dataset_name),
            ("dataset_version", s.dataset_version),
        )
        if v
    }
    return Header(project, request.client_key, request.name, list(declared.values()), source)


def named_evaluators(records: Sequence[pb.IngestRecord]) -> dict[str, str]:
    """The evaluator names the results of ``records`` give, in order of first appearance, each
    with the field of the first result giving it."""
    seen: dict[str, str] = {}
    for i, record in enumerate(records):
        for j, result in enumerate(record.results):
            seen.setdefault(result.evaluator, f"records[{i}].results[{j}].evaluator")
    return seen


def _evaluator(message: pb.ExternalEvaluator, at: str) -> dict[str, Any]:
    name = message.name
    if not _NAME.fullmatch(name):
        raise UserError(f"{at}.name: {_bad_name(name)}", hint=_NAME_HINT)
    if message.version and not _VERSION.fullmatch(message.version):
        raise UserError(f"{at}.version: expected letters, digits, '.', '+' or '-', 1-64 of them")
    if message.ref:
        try:
            parsed = parse_ref(message.ref)
        except UnknownEvaluatorError as e:
            raise _at(f"{at}.ref", e) from None
        if parsed.version or len(message.ref) > 128:
            raise UserError(
                f"{at}.ref: {message.ref[:80]!r}: give NAMESPACE/NAME (at most 128 characters), "
                "the version in `version`"
            )
        ref = EvaluatorRef(parsed.namespace, parsed.name, message.version)
    else:
        ref = EvaluatorRef(EXTERNAL_NAMESPACE, name, message.version)
    outputs: list[OutputSpec] = []
    for j, output in enumerate(message.outputs):
        outputs.append(_output(output, f"{at}.outputs[{j}]"))
    return external_evaluator(name, ref, outputs=outputs, description=message.description)


def _output(message: evaluator_pb2.OutputSpec, at: str) -> OutputSpec:
    if not message.name:
        raise UserError(f"{at}.name: empty; name the metric (Score.name)")
    if message.type == 0:
        raise UserError(f"{at}.type: required: SCORE_KIND_PASSED, _NUMBER, _LABEL or _STRUCTURED")
    if message.HasField("range"):
        low, high = message.range.low, message.range.high
        if not (math.isfinite(low) and math.isfinite(high)):
            raise UserError(f"{at}.range: expected finite bounds, got [{low}, {high}]")
    # The catalog's converter reads an OutputSpec wherever a manifest holds one.
    output = manifest_from_proto(evaluator_pb2.EvaluatorManifest(outputs=[message])).outputs[0]
    if output.range is not None and output.range[0] > output.range[1]:  # the range between them
        output = dataclasses.replace(output, range=(output.range[1], output.range[0]))
    return output


def read_chunk(
    messages: Sequence[pb.IngestRecord],
    evaluators: Sequence[dict[str, Any]],
    limits: Limits,
) -> Chunk:
    """The records of one request and their results, checked against the run's evaluators."""
    if not messages:
        raise UserError("records: empty; send at least one record")
    if len(messages) > limits.max_request_records:
        raise UserError(
            f"records: {len(messages)} records is over this server's limit of "
            f"{limits.max_request_records} per request (limits.maxRequestRecords in its "
            "evalsi.yaml)",
            hint="send them in chunks: StartIngest, AppendIngest, FinalizeIngest",
        )
    index = {str(e["name"]): i for i, e in enumerate(evaluators)}
    named = [(str(e["ref"]), default_metric(e)) for e in evaluators]
    chunk = Chunk(lines=[], results=[])
    for i, message in enumerate(messages):
        at = f"records[{i}]"
        if not message.HasField("record"):
            raise UserError(f"{at}.record: required; the record the results were given on")
        record = _record(message, at)
        found: dict[tuple[int, int], EvaluationResult] = {}
        for j, result in enumerate(message.results):
            key, value = _result(result, record, f"{at}.results[{j}]", index, named, limits)
            found[key] = value
            chunk.trials = max(chunk.trials, key[1] + 1)
        covered = {e for e, _ in found}
        for e, spec in enumerate(evaluators):
            if e not in covered:  # skipped with a reason, as a record an evaluator cannot judge
                chunk.missing += 1
                if len(chunk.missing_examples) < MISSING_EXAMPLES:
                    chunk.missing_examples.append(f"{record.id} ({spec['name']})")
                found[(e, 0)] = EvaluationResult(
                    record_id=record.id,
                    evaluator=str(spec["name"]),
                    evaluator_ref=str(spec["ref"]),
                    outcome=Outcome.SKIPPED,
                    reason=NOT_SENT,
                )
        chunk.lines.append(_line(record, at, i))
        chunk.results.append(found)
    return chunk


def _line(record: Record, at: str, index: int) -> bytes:
    """The record's line in the run's file, read back as a dataset reader will read it there
    (a report, a bundle): a record the file cannot hold (a negative token count, a NaN, which
    JSON writes as null) is refused now, not once every chunk is in."""
    line = orjson.dumps(record_to_row(record)) + b"\n"
    try:
        record_from_dict(orjson.loads(line), FieldMap(), line=index + 1, path=at)
    except DatasetError as e:
        reason = e.message.removeprefix(f"{at}:{index + 1}: ")
        raise UserError(f"{at}.record: {reason}") from None
    return line


def _record(message: pb.IngestRecord, at: str) -> Record:
    """The record, with the converter Evaluate uses; its errors name this record's path."""
    try:
        return _records([message.record])[0]
    except UserError as e:
        e.message = f"{at}.record" + e.message.removeprefix("records[0]")
        e.args = (e.message,)
        raise


def _result(
    message: Any,
    record: Record,
    at: str,
    index: dict[str, int],
    named: list[tuple[str, str]],
    limits: Limits,
) -> tuple[tuple[int, int], EvaluationResult]:
    """One result as stored: its (evaluator index, trial) and the result, its scores named
    (``named``: each evaluator's ref and the metric of its unnamed scores)."""
    position = index.get(message.evaluator)
    if position is None:
        known = ", ".join(sorted(index)[:10])
        raise UserError(
            f"{at}.evaluator: {message.evaluator[:80]!r} is not an evaluator of this ingest "
            f"({known})",
            hint="declare every evaluator in StartIngest",
        )
    if message.record_id or message.evaluator_ref:
        which = "record_id" if message.record_id else "evaluator_ref"
        raise UserError(
            f"{at}.{which}: leave it empty: the record and the evaluator's declaration say it"
        )
    if message.HasField("duration"):
        raise UserError(f"{at}.duration: not stored for an external verdict; leave it out")
    outcome = _OUTCOMES.get(int(message.outcome))
    if outcome is None:
        raise UserError(
            f"{at}.outcome: required: OUTCOME_SCORED, OUTCOME_SKIPPED, OUTCOME_ERROR or "
            "OUTCOME_CANCELLED"
        )
    trial = int(message.trial)
    if trial < 0 or trial >= limits.max_trials:
        raise UserError(
            f"{at}.trial: {trial} is outside 0..{limits.max_trials - 1} (this server's "
            "limits.maxTrials)"
        )
    scores = []
    if outcome is Outcome.SCORED:
        if not message.scores:
            raise UserError(f"{at}.scores: empty; a scored result holds at least one score")
        for k, s in enumerate(message.scores):
            score = score_from_proto(s)
            problem = score.check()
            if problem is None and score.number is not None and abs(score.number) > MAX_NUMBER:
                problem = f"Score.number {score.number} is out of range: at most ±{MAX_NUMBER:g}"
            if problem is None and score.confidence is not None:
                problem = None if math.isfinite(score.confidence) else "confidence is not finite"
            if problem is not None:
                raise UserError(f"{at}.scores[{k}]: {problem}")
            score.name = score.name or named[position][1]
            scores.append(score)
    elif message.scores:
        raise UserError(
            f"{at}.scores: only a scored result holds scores (this one is {outcome.name.lower()})"
        )
    result = EvaluationResult(
        record_id=record.id,
        evaluator=message.evaluator,
        evaluator_ref=named[position][0],
        outcome=outcome,
        scores=scores,
        reason="" if outcome is Outcome.SCORED else message.reason,
        trial=trial,
    )
    return (position, trial), result


_NAME_HINT = "an evaluator's name is what its results give in `evaluator`, e.g. tool-accuracy"


def _bad_name(name: str) -> str:
    return (
        "expected 1-64 lowercase letters, digits, '_', '.' or '-' starting with a letter or "
        f"digit, got {name[:80]!r}"
    )


def _at(path: str, e: UserError) -> UserError:
    e.message = f"{path}: {e.message}"
    e.args = (e.message,)
    return e
