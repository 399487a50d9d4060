"""Results computed elsewhere, kept as a Score run (the server's IngestService).

Nothing is graded here: the verdicts arrive with their records. The rest is a Score run's.
Results are task-keyed upserts (``(seq, trial, evaluator)``), so a chunk sent twice is stored
once; at the end the summaries are recomputed from the store by ``summarize_stored``, over the
``Aggregator`` a Score run feeds while it grades, so n, mean and intervals come out alike. What
differs is said where a reader looks: each evaluator's spec has ``external: true``, the run's
spec ``external`` (the client key and the source) and its summary ``external: true``.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from evalsi.core import (
    DatasetPin,
    EvaluationResult,
    EvaluatorRef,
    OutputSpec,
    ResultBatch,
    RunManifest,
    Seeds,
    content_hash,
)
from evalsi.datasets import FieldMap
from evalsi.runs._session import Graded
from evalsi.runs._stored import summarize_stored

if TYPE_CHECKING:
    from evalsi.store import SqlStore

RUN_PREFIX = "ing-"
EXTERNAL_NAMESPACE = "external"
"""The namespace of an external evaluator declared by its name alone."""


def ingest_run_id(project_id: str, client_key: str) -> str:
    """The run of the ingest ``client_key`` names in ``project_id``: the same pair always gives
    the same id, so a retried or repeated start finds its run instead of making a second one,
    with no table of keys (96 bits of sha256: a collision is out of reach)."""
    digest = hashlib.sha256(f"{project_id}\0{client_key}".encode()).hexdigest()
    return RUN_PREFIX + digest[:24]


def external_evaluator(
    name: str, ref: EvaluatorRef, *, outputs: Sequence[OutputSpec] = (), description: str = ""
) -> dict[str, Any]:
    """What a run stores of an evaluator that ran elsewhere: what it stores of any evaluator
    (instance name, exact ref, params), with its version, its declared outputs (so the end of
    the run can summarise them by kind and direction) and ``external: true``."""
    spec: dict[str, Any] = {
        "name": name,
        "ref": str(ref),
        "version": ref.version,
        "params": {},
        "external": True,
    }
    if description:
        spec["description"] = description
    if outputs:
        spec["outputs"] = [
            {**dataclasses.asdict(o), "range": list(o.range) if o.range is not None else None}
            for o in outputs
        ]
    return spec


def default_metric(spec: Mapping[str, Any]) -> str:
    """The metric an unnamed score of this evaluator counts under: the name in its ref, as the
    store names it when it reads such a score back."""
    ref = str(spec.get("ref", ""))
    return ref.split("@", 1)[0].rsplit("/", 1)[-1] or str(spec.get("name", ""))


def declared_outputs(spec: Mapping[str, Any]) -> tuple[OutputSpec, ...]:
    """The outputs ``external_evaluator`` stored, as ``OutputSpec``s."""
    out = []
    for o in spec.get("outputs") or ():
        low_high = o.get("range")
        out.append(
            OutputSpec(
                name=str(o["name"]),
                type=o["type"],
                range=(float(low_high[0]), float(low_high[1])) if low_high else None,
                higher_is_better=o.get("higher_is_better"),
                description=str(o.get("description", "")),
            )
        )
    return tuple(out)


def ingest_spec(
    evaluators: Sequence[Mapping[str, Any]],
    *,
    data: str,
    client_key: str,
    source: Mapping[str, Any],
) -> dict[str, Any]:
    """The spec of an ingested run: a Score run's (its records are the JSONL file ``data``,
    read with the default fields), plus ``external``."""
    return {
        "evaluators": [dict(e) for e in evaluators],
        "data": data,
        "fields": dataclasses.asdict(FieldMap()),
        "cluster_by": None,
        "bootstrap": None,
        "seed": 0,
        "on_bad_record": "fail",
        "external": {"client_key": client_key, "source": dict(source)},
    }


def is_ingested(spec: Mapping[str, Any]) -> bool:
    """Whether a run of this spec holds ingested results (``ingest_spec`` made it)."""
    external = spec.get("external")
    return isinstance(external, dict) and "client_key" in external


def ingest_batches(
    evaluators: Sequence[Mapping[str, Any]],
    first_seq: int,
    records: Sequence[Mapping[tuple[int, int], EvaluationResult]],
) -> Graded:
    """The results of consecutive records (the record at ``first_seq + i`` has
    ``records[i]``: its results by (evaluator index, trial)) as the store takes them: one batch
    per evaluator, trial and run of consecutive records that have a result for both."""
    metrics = [default_metric(e) for e in evaluators]
    runs: dict[tuple[int, int], list[tuple[int, EvaluationResult]]] = {}
    for position, results in enumerate(records):
        for key in sorted(results):
            runs.setdefault(key, []).append((position, results[key]))
    out: Graded = []
    for (index, _trial), found in sorted(runs.items()):
        start = 0
        for i in range(1, len(found) + 1):
            if i == len(found) or found[i][0] != found[i - 1][0] + 1:
                piece = [r for _, r in found[start:i]]
                batch = ResultBatch.of(piece, metrics[index])
                out.append((index, first_seq + found[start][0], batch))
                start = i
    return out


def conclude_ingest(
    db: SqlStore,
    run_id: str,
    spec: Mapping[str, Any],
    *,
    records: int,
    trials: int,
    version: str,
    warnings: Sequence[Mapping[str, Any]] = (),
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The summary and manifest of the ingested run ``run_id``, from its stored results:
    ``records`` records (the file ``spec["data"]``, of content hash ``version``), ``trials``
    trials (more than one: intervals clustered by record, pass@k, as a Run's)."""
    evaluators = list(spec.get("evaluators") or ())
    stored = summarize_stored(
        db,
        run_id,
        [(str(e["name"]), default_metric(e), declared_outputs(e)) for e in evaluators],
        trials=trials,
        task_counts={},
    )
    source = str(spec.get("data", ""))
    isolation = [i.to_dict() for i in stored.isolation]
    summary: dict[str, Any] = {
        "metrics": [m.to_dict() for m in stored.metrics],
        "gates": [],
        "dataset": {"source": source, "version": version},
        "bad_records": 0,
        "bad_examples": [],
        "isolation": isolation,
        "warnings": [dict(w) for w in warnings],
        "external": True,
    }
    if trials > 1:
        summary["trials"] = trials
        summary["pass_k_samples"] = stored.pass_k_samples()
    manifest = RunManifest.capture(
        spec_hash=content_hash(dict(spec)),
        evaluators=[
            {k: e[k] for k in ("name", "ref", "version", "params", "external")} for e in evaluators
        ],
        dataset=DatasetPin(source, version, records),
        seeds=Seeds(0),
        trials=trials,
    ).finished(isolation=isolation)
    return summary, manifest.to_dict()
