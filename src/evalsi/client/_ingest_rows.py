"""What ``Client.ingest`` and ``evalsi ingest`` send: records with verdicts computed elsewhere.

The file format is JSONL, one record per line, as any evalsi dataset row (``id``, ``input``,
``output``, ``reference``, ``context``, ``usage``, ``trajectory``, ``metadata``; other keys
become metadata) plus ``results``, the verdicts given on that record::

    {"id": "q1", "input": "2+2?", "output": "4",
     "results": [{"evaluator": "judge", "scores": [{"passed": true, "explanation": "exact"}]},
                 {"evaluator": "latency", "scores": [{"name": "ms", "value": 812}]},
                 {"evaluator": "judge", "trial": 1, "outcome": "error", "reason": "timeout"}]}

A result has ``evaluator`` (required: 1-64 lowercase letters, digits, ``_ . -``), ``outcome``
(``scored``, the default, ``skipped``, ``error`` or ``cancelled``), ``trial`` (default 0),
``scores`` (a scored result holds at least one: ``{"name"?, "value" | "passed" | "label",
"explanation"?}``; without a name a score counts under the evaluator's own metric) and
``reason`` (why it was not scored). From Python the same rows come as dicts, or as
``(Record, [EvaluationResult, ...])`` pairs.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from evalsi._proto.evalsi.v1alpha1 import evaluator_pb2, score_pb2
from evalsi._proto.evalsi.v1alpha1 import ingest_service_pb2 as pb
from evalsi.core import EvaluationResult, Record, UserError
from evalsi.datasets import FieldMap, record_from_dict
from evalsi.wire import record_to_proto, result_to_proto

RESULTS = "results"
_OUTCOMES = {
    "scored": score_pb2.OUTCOME_SCORED,
    "skipped": score_pb2.OUTCOME_SKIPPED,
    "error": score_pb2.OUTCOME_ERROR,
    "cancelled": score_pb2.OUTCOME_CANCELLED,
}
_KINDS = {
    "number": score_pb2.SCORE_KIND_NUMBER,
    "passed": score_pb2.SCORE_KIND_PASSED,
    "label": score_pb2.SCORE_KIND_LABEL,
    "structured": score_pb2.SCORE_KIND_STRUCTURED,
}
_RESULT_KEYS = frozenset(("evaluator", "outcome", "trial", "scores", "reason"))
_SCORE_KEYS = frozenset(("name", "value", "passed", "label", "explanation"))
_EVALUATOR_KEYS = frozenset(("name", "ref", "version", "description", "outputs"))
_OUTPUT_KEYS = frozenset(("name", "type", "higher_is_better", "range", "description"))
_SOURCE_KEYS = frozenset(pb.ExternalSource.DESCRIPTOR.fields_by_name)

Item = Mapping[str, Any] | tuple[Record, Iterable[EvaluationResult]]


class IngestItems:
    """The records to ingest, read as many times as needed: a JSONL file is read again on
    every pass (it may not fit in memory), anything else is held as given."""

    def __init__(self, data: str | os.PathLike[str] | Iterable[Item]) -> None:
        self.path: Path | None = None
        self.items: list[Item] = []
        if isinstance(data, (str, os.PathLike)):
            self.path = Path(data)
            if not self.path.is_file():
                raise UserError(f"{self.path}: no such file", hint="give a JSONL file of records")
        elif isinstance(data, Mapping):
            raise UserError("data: expected records (a JSONL path, or dicts), got one dict")
        else:
            self.items = list(data)

    def __iter__(self) -> Iterator[pb.IngestRecord]:
        if self.path is None:
            for i, item in enumerate(self.items):
                yield _message(item, f"records:{i + 1}", i + 1, "records")
            return
        with self.path.open("rb") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = orjson.loads(line)
                except orjson.JSONDecodeError as e:
                    raise UserError(f"{self.path}:{n}: not JSON: {e}") from None
                yield _message(row, f"{self.path}:{n}", n, str(self.path))

    def evaluator_names(self) -> list[str]:
        """The evaluators the results name, in order of first appearance (one pass)."""
        seen: dict[str, None] = {}
        for message in self:
            for result in message.results:
                seen.setdefault(result.evaluator)
        return list(seen)


def _message(item: Item, where: str, line: int, path: str) -> pb.IngestRecord:
    if isinstance(item, tuple):
        record, results = item
        out = pb.IngestRecord(record=record_to_proto(record))
        for result in results:
            message = result_to_proto(result)
            for name in ("record_id", "evaluator_ref", "duration"):
                message.ClearField(name)  # the server takes them from the record and the run
            out.results.append(message)
        out.record.ClearField("provenance")
        return out
    if not isinstance(item, Mapping):
        raise UserError(f"{where}: expected an object (a record with its results)")
    row = dict(item)
    results = row.pop(RESULTS, [])
    if not isinstance(results, list):
        raise UserError(f"{where}: {RESULTS}: expected a list of results")
    record = record_from_dict(row, FieldMap(), line=line, path=path)  # errors say path:line
    out = pb.IngestRecord(record=record_to_proto(record))
    out.record.ClearField("provenance")
    out.results.extend(_result(r, f"{where}: {RESULTS}[{j}]") for j, r in enumerate(results))
    return out


def _result(item: Any, at: str) -> score_pb2.EvaluationResult:
    if not isinstance(item, Mapping):
        raise UserError(f"{at}: expected an object such as {{evaluator, scores}}")
    _known_keys(item, _RESULT_KEYS, at)
    evaluator = item.get("evaluator")
    if not isinstance(evaluator, str) or not evaluator:
        raise UserError(f"{at}.evaluator: required: the name of the evaluator that gave it")
    outcome = item.get("outcome", "scored")
    if outcome not in _OUTCOMES:
        raise UserError(f"{at}.outcome: expected one of {', '.join(_OUTCOMES)}, got {outcome!r}")
    trial = item.get("trial", 0)
    if isinstance(trial, bool) or not isinstance(trial, int) or trial < 0:
        raise UserError(f"{at}.trial: expected a whole number >= 0, got {trial!r}")
    reason = item.get("reason", "")
    if not isinstance(reason, str):
        raise UserError(f"{at}.reason: expected text")
    scores = item.get("scores", [])
    if not isinstance(scores, list):
        raise UserError(f"{at}.scores: expected a list of scores")
    if outcome == "scored" and not scores:
        raise UserError(
            f"{at}.scores: a scored result needs at least one score",
            hint='e.g. "scores": [{"passed": true}]; or give "outcome": "skipped" and a reason',
        )
    if outcome != "scored" and scores:
        raise UserError(f"{at}.scores: only a scored result holds scores (this one is {outcome})")
    out = score_pb2.EvaluationResult(
        evaluator=evaluator, outcome=_OUTCOMES[outcome], trial=trial, reason=reason
    )
    out.scores.extend(_score(s, f"{at}.scores[{k}]") for k, s in enumerate(scores))
    return out


def _score(item: Any, at: str) -> score_pb2.Score:
    if not isinstance(item, Mapping):
        raise UserError(f'{at}: expected an object such as {{"passed": true}}')
    _known_keys(item, _SCORE_KEYS, at)
    given = [k for k in ("value", "passed", "label") if item.get(k) is not None]
    if len(given) != 1:
        raise UserError(f"{at}: give exactly one of value, passed or label, got {len(given)}")
    out = score_pb2.Score(name=_text(item, "name", at), explanation=_text(item, "explanation", at))
    value = item[given[0]]
    if given[0] == "value":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise UserError(f"{at}.value: expected a number, got {value!r}")
        out.number = float(value)
    elif given[0] == "passed":
        if not isinstance(value, bool):
            raise UserError(f"{at}.passed: expected true or false, got {value!r}")
        out.passed = value
    else:
        if not isinstance(value, str):
            raise UserError(f"{at}.label: expected text, got {value!r}")
        out.label = value
    return out


def external_evaluators(
    given: Iterable[str | Mapping[str, Any]] | None, named: Iterable[str]
) -> list[pb.ExternalEvaluator]:
    """The evaluators to declare: those ``given`` (a name, or ``{name, ref, version,
    description, outputs}``), then any the results name that were not given."""
    out: list[pb.ExternalEvaluator] = []
    for i, item in enumerate(given or ()):
        at = f"evaluators[{i}]"
        if isinstance(item, str):
            out.append(pb.ExternalEvaluator(name=item))
            continue
        if not isinstance(item, Mapping):
            raise UserError(f"{at}: expected a name or {{name, ref, version, outputs}}")
        _known_keys(item, _EVALUATOR_KEYS, at)
        message = pb.ExternalEvaluator(
            name=_text(item, "name", at),
            ref=_text(item, "ref", at),
            version=_text(item, "version", at),
            description=_text(item, "description", at),
        )
        for j, output in enumerate(item.get("outputs") or ()):
            message.outputs.append(_output(output, f"{at}.outputs[{j}]"))
        out.append(message)
    declared = {e.name for e in out}
    out.extend(pb.ExternalEvaluator(name=n) for n in named if n not in declared)
    return out


def external_source(source: Mapping[str, Any] | None) -> pb.ExternalSource:
    """``{tool, tool_version, description, dataset_name, dataset_version}``, all text."""
    given = dict(source or {})
    _known_keys(given, _SOURCE_KEYS, "source")
    return pb.ExternalSource(**{key: _text(given, key, "source") for key in given})


def _output(item: Any, at: str) -> evaluator_pb2.OutputSpec:
    if not isinstance(item, Mapping):
        raise UserError(f"{at}: expected {{name, type, higher_is_better, range}}")
    _known_keys(item, _OUTPUT_KEYS, at)
    kind = item.get("type")
    if kind not in _KINDS:
        raise UserError(f"{at}.type: expected one of {', '.join(_KINDS)}, got {kind!r}")
    out = evaluator_pb2.OutputSpec(
        name=_text(item, "name", at), type=_KINDS[kind], description=_text(item, "description", at)
    )
    better = item.get("higher_is_better")
    if better is not None:
        if not isinstance(better, bool):
            raise UserError(f"{at}.higher_is_better: expected true or false")
        out.higher_is_better = better
    bounds = item.get("range")
    if bounds is not None:
        if not (isinstance(bounds, (list, tuple)) and len(bounds) == 2):
            raise UserError(f"{at}.range: expected [low, high]")
        out.range.low, out.range.high = (float(b) for b in bounds)
    return out


def _text(item: Mapping[str, Any], key: str, at: str) -> str:
    value = item.get(key, "")
    if not isinstance(value, str):
        raise UserError(f"{at}.{key}: expected text, got {value!r}")
    return value


def _known_keys(item: Mapping[str, Any], allowed: frozenset[str], at: str) -> None:
    unknown = sorted(set(item) - allowed)
    if unknown:
        raise UserError(f"{at}: unknown key {unknown[0]!r}; expected {', '.join(sorted(allowed))}")
