"""A stored run sent to its sinks (``spec.sinks``, or those ``evalsi export RUN --to`` names):
its header, then its results streamed from the store in batches to every sink at once, then
its summary. The store is read, never the run's memory, so a run exported at its end and
exported again a week later sends the same thing; each sink finds its remote objects again by
the run id (no duplicates).

A sink that fails is reported, never fatal: the results are safe in the store and ``evalsi
export RUN`` sends them again.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from evalsi.core import UserError
from evalsi.runs._run_row import StoreLike, open_store
from evalsi.specs import SinkSpec
from evalsi.store import SqlStore

log = logging.getLogger("evalsi.runs.export")

BATCH = 5000


@dataclass(frozen=True, slots=True)
class Export:
    """One sink's outcome: its receipt, or why it failed."""

    sink: str  # kind and where, as SinkSpec.describe says
    receipt: dict[str, Any] | None = None
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"sink": self.sink, "ok": self.receipt is not None}
        if self.receipt is not None:
            out["receipt"] = self.receipt
        else:
            out["error"] = self.error
        return out


def export_run(store: StoreLike, run_id: str, sinks: Sequence[SinkSpec]) -> list[Export]:
    """Send run ``run_id`` to ``sinks``; one ``Export`` each, in order. What the sinks'
    libraries print (MLflow's run links, W&B's banners) goes to stderr: stdout is the
    caller's (``--format json`` prints one object there and nothing else)."""
    with contextlib.redirect_stdout(sys.stderr):
        return _export(store, run_id, sinks)


def _export(store: StoreLike, run_id: str, sinks: Sequence[SinkSpec]) -> list[Export]:
    from evalsi.connectors import resolve_secret
    from evalsi.sinks import RunHeader, open_sink

    db = open_store(store, create=False)
    info = db.get_run(run_id)
    if info.status in ("running", "queued"):
        raise UserError(f"run {info.id} is {info.status}: export it once it has ended")
    summary = dict(info.summary or {})
    header = RunHeader(
        run_id=info.id,
        name=info.name,
        kind=info.kind,
        status=info.status,
        project=info.project_id,
        created_at=info.created_at,
        finished_at=info.finished_at,
        dataset_version=str((summary.get("dataset") or {}).get("version", "")),
        labels=dict((info.spec.get("metadata") or {}).get("labels") or {}),
        spec_hash=str((info.manifest or {}).get("spec_hash", "")),
    )
    out: list[Export | None] = [None] * len(sinks)
    live: list[tuple[int, Any]] = []
    for i, spec in enumerate(sinks):
        try:
            value = resolve_secret(spec.secret_ref).reveal() if spec.secret_ref else ""
            sink = open_sink(spec.kind, spec.options, secret=value)
            sink.begin(header)
            live.append((i, sink))
        except Exception as e:  # noqa: BLE001 - every sink failure is reported alike
            out[i] = _failed(spec, e)
    try:
        if live:
            for rows in _batches(db, info.id):
                for i, sink in list(live):
                    try:
                        sink.write(rows)
                    except Exception as e:  # noqa: BLE001
                        out[i] = _failed(sinks[i], e)
                        sink.close()
                        live.remove((i, sink))
        for i, sink in live:
            try:
                out[i] = Export(sinks[i].describe(), sink.finish(summary).to_dict())
            except Exception as e:  # noqa: BLE001
                out[i] = _failed(sinks[i], e)
    finally:
        for _, sink in live:
            sink.close()
    return [e for e in out if e is not None]


def _failed(spec: SinkSpec, e: Exception) -> Export:
    text = str(e) if isinstance(e, UserError) else f"{type(e).__name__}: {e}"
    log.warning("%s: not sent: %s", spec.describe(), text)
    return Export(spec.describe(), error=text[:2000])


def _batches(db: SqlStore, run_id: str) -> Iterator[list[Any]]:
    from evalsi.sinks import ResultRow, result_rows

    batch: list[ResultRow] = []
    for _, _, result in db.iter_results(run_id, batch=BATCH):
        batch.extend(result_rows(result))
        if len(batch) >= BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


__all__ = ["Export", "export_run"]
