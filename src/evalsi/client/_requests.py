"""Request messages built from the arguments the embedded API takes, so ``Client.evaluate``
reads like ``evalsi.evaluate``: records are read locally with the dataset layer, evaluators and
params keep their embedded spelling."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from evalsi._proto.evalsi.v1alpha1 import evaluation_service_pb2 as ev_pb
from evalsi._proto.evalsi.v1alpha1 import record_pb2
from evalsi.core import UserError
from evalsi.datasets import FieldMap, open_dataset
from evalsi.wire import record_to_proto, struct_to_proto

# Leaves room under the server's default 32 MiB body cap for framing and JSON overhead.
DEFAULT_MAX_REQUEST_BYTES = 8 * 1024 * 1024


class _Message(Protocol):
    def ByteSize(self) -> int: ...


M = TypeVar("M", bound=_Message)

CI_METHODS = {"percentile": "bootstrap-percentile", "bca": "bootstrap-bca"}


def evaluator_name(ref: str) -> str:
    """The instance name a ref gets when none is given: ``builtin/exact-match@1`` → exact-match."""
    return ref.split("@", 1)[0].rsplit("/", 1)[-1].strip()


def instance_name(spec: ev_pb.EvaluatorSpec) -> str:
    return spec.name or evaluator_name(spec.ref)


def evaluator_specs(
    evaluators: Iterable[Any], params: Mapping[str, Mapping[str, Any]] | None
) -> list[ev_pb.EvaluatorSpec]:
    """Names, refs or ``{"ref", "params", "name"}`` entries, with ``params`` keyed by instance
    name, evaluator name or ref (as ``evalsi.evaluate`` takes them)."""
    by_name = dict(params or {})
    out: list[ev_pb.EvaluatorSpec] = []
    for item in evaluators:
        alias = ""
        given: Mapping[str, Any] = {}
        if isinstance(item, str):
            ref = item.strip()
        elif isinstance(item, Mapping):
            unknown = set(item) - {"ref", "params", "name"}
            if unknown or "ref" not in item:
                raise UserError(
                    f"evaluator entry {dict(item)!r}: expected keys ref (required), params, name"
                )
            ref = str(item["ref"]).strip()
            given = item.get("params") or {}
            if not isinstance(given, Mapping):
                raise UserError(f"{ref}: params must be a mapping, got {type(given).__name__}")
            alias = str(item.get("name") or "")
        else:
            raise UserError(
                f"cannot send {item!r} to a server as an evaluator",
                hint="a server runs the evaluators it has: give a name or ref "
                "(see `evalsi catalog list --server URL`), or {'ref': ..., 'params': ...}",
            )
        if not ref:
            raise UserError("an evaluator ref is empty", hint="name one, e.g. exact-match")
        name = alias or evaluator_name(ref)
        for key in (name, evaluator_name(ref), ref):
            if key in by_name:
                given = {**by_name[key], **given}
                break
        spec = ev_pb.EvaluatorSpec(ref=ref, name=alias)
        if given:
            spec.params.CopyFrom(struct_to_proto(dict(given)))
        out.append(spec)
    if not out:
        raise UserError("no evaluators given", hint="name at least one, e.g. exact-match")
    return out


def evaluate_options(
    *,
    bootstrap: Literal["percentile", "bca"] | None,
    seed: int,
    concurrency: int = 0,
) -> ev_pb.EvaluateOptions:
    if bootstrap is not None and bootstrap not in CI_METHODS:
        raise UserError(f"bootstrap {bootstrap!r}: expected 'percentile' or 'bca'")
    options = ev_pb.EvaluateOptions(concurrency=concurrency, seed=seed)
    if bootstrap is not None:
        options.ci_method = CI_METHODS[bootstrap]
    return options


@dataclass
class LocalRecords:
    """The records read from the caller's data, with what the embedded result reports of it."""

    records: list[record_pb2.Record]
    ids: list[str]
    source: str
    version: str | None
    bad_records: int
    bad_examples: list[tuple[int, str]]
    warnings: list[dict[str, Any]]
    """What reading noticed (bad rows skipped, repeated ids), named by line as embedded."""


def read_records(
    data: Any, *, fields: FieldMap | None, on_bad_record: Literal["fail", "skip"]
) -> LocalRecords:
    """Read ``data`` as ``evalsi.evaluate`` does (a path, ``hf://`` URI, dicts or Records);
    data with no record to grade is the same error (exit 2) as embedded, before any call."""
    dataset = open_dataset(data, fields=fields, on_bad_record=on_bad_record)
    records: list[record_pb2.Record] = []
    ids: list[str] = []
    for batch in dataset.iter_batches():
        for record in batch:
            records.append(record_to_proto(record))
            ids.append(record.id)
    if not records:
        raise dataset.nothing_read()
    return LocalRecords(
        records=records,
        ids=ids,
        source=dataset.name,
        version=dataset.version,
        bad_records=dataset.bad_count,
        bad_examples=list(dataset.bad_records[:10]),
        warnings=[w.to_dict() for w in dataset.warnings],
    )


def record_batches(messages: Iterable[M], max_bytes: int) -> Iterator[list[M]]:
    """Consecutive messages, as many per batch as fit in ``max_bytes`` (at least one)."""
    batch: list[M] = []
    size = 0
    for message in messages:
        n = message.ByteSize() + 8
        if batch and size + n > max_bytes:
            yield batch
            batch, size = [], 0
        batch.append(message)
        size += n
    if batch:
        yield batch
