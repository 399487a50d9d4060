"""Stored judge calibrations: how a judge agreed with human labels, keyed by what it was.

A calibration holds for one judge (its identity: connector, base URL, model, params — not the
name a spec gives it, nor its secret reference), one evaluator ref (``builtin/llm-judge@1.0.0``),
one prompt template (its hash) and one set of evaluator params (the rubric, the scale; not the
judge's name). Change any of them and the judge must be calibrated again: ``CalibrationKey``
hashes exactly these, and a run whose gate reads a judge is checked against the latest
calibration under its key (``runs/calibration/_gates.py``).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
import sqlalchemy as sa

from evalsi.core import StoreError, content_hash
from evalsi.store._runs import DEFAULT_PROJECT, check_project_id
from evalsi.store._schema import calibrations

if TYPE_CHECKING:
    from evalsi.store._sql import SqlStore

JUDGE_NOT_KEYED = ("name", "secret_ref")
"""Identity fields that do not change a judge's answers, hence not part of the key."""


@dataclass(frozen=True, slots=True)
class CalibrationKey:
    """What a calibration is of (four content hashes and a ref).

    Example:
        >>> a = CalibrationKey.of({"name": "default", "model": "m"}, "builtin/x@1.0.0", "h", {})
        >>> b = CalibrationKey.of({"name": "strict", "model": "m"}, "builtin/x@1.0.0", "h",
        ...                       {"judge": "strict"})
        >>> a == b
        True
    """

    judge_key: str
    evaluator_ref: str
    template_hash: str
    params_hash: str

    @classmethod
    def of(
        cls,
        judge_identity: Mapping[str, Any],
        evaluator_ref: str,
        template_hash: str,
        params: Mapping[str, Any],
    ) -> CalibrationKey:
        judge = {k: v for k, v in judge_identity.items() if k not in JUDGE_NOT_KEYED}
        kept = {k: v for k, v in params.items() if k != "judge"}
        return cls(content_hash(judge), evaluator_ref, template_hash, content_hash(kept))


@dataclass(frozen=True, slots=True)
class Calibration:
    """One stored calibration; ``summary`` is its JSON form (see ``runs.CalibrationResult``)."""

    id: str
    created_at: float
    key: CalibrationKey
    metric: str
    run_id: str
    labels_version: str | None
    n: int
    summary: dict[str, Any]
    project_id: str = DEFAULT_PROJECT


def save_calibration(
    store: SqlStore,
    key: CalibrationKey,
    *,
    metric: str,
    run_id: str,
    labels_version: str | None,
    n: int,
    summary: Mapping[str, Any],
    project_id: str = DEFAULT_PROJECT,
) -> Calibration:
    """Store a calibration (a new row each time: the history is kept, the latest counts)."""
    check_project_id(project_id)
    row = Calibration(
        id="cal-" + time.strftime("%Y%m%d-%H%M%S-", time.gmtime()) + secrets.token_hex(6),
        created_at=time.time(),
        key=key,
        metric=metric,
        run_id=run_id,
        labels_version=labels_version,
        n=n,
        summary=dict(summary),
        project_id=project_id,
    )
    values = {
        "id": row.id,
        "created_at": row.created_at,
        "judge_key": key.judge_key,
        "evaluator_ref": key.evaluator_ref,
        "template_hash": key.template_hash,
        "params_hash": key.params_hash,
        "metric": metric,
        "run_id": run_id,
        "labels_version": labels_version,
        "n": n,
        "summary": row.summary,
        "project_id": project_id,
    }
    try:
        with store.engine.begin() as conn:
            conn.execute(calibrations.insert().values(values))
    except sa.exc.SQLAlchemyError as e:
        raise StoreError(f"cannot store the calibration in {store.location}: {e}") from e
    return row


def latest_calibration(
    store: SqlStore, key: CalibrationKey, *, project_id: str = DEFAULT_PROJECT
) -> Calibration | None:
    """The most recent calibration under ``key`` in the project, or None."""
    c = calibrations.c
    query = (
        sa.select(calibrations)
        .where(c.judge_key == key.judge_key)
        .where(c.evaluator_ref == key.evaluator_ref)
        .where(c.template_hash == key.template_hash)
        .where(c.params_hash == key.params_hash)
        .where(c.project_id == project_id)
        .order_by(c.created_at.desc(), c.pk.desc())
        .limit(1)
    )
    with store.engine.connect() as conn:
        row = conn.execute(query).mappings().first()
    return None if row is None else _calibration(row)


def list_calibrations(
    store: SqlStore, *, project_id: str = DEFAULT_PROJECT, limit: int = 100
) -> list[Calibration]:
    """The project's calibrations, newest first."""
    c = calibrations.c
    query = (
        sa.select(calibrations)
        .where(c.project_id == project_id)
        .order_by(c.created_at.desc(), c.pk.desc())
        .limit(limit)
    )
    with store.engine.connect() as conn:
        return [_calibration(row) for row in conn.execute(query).mappings()]


def _calibration(row: Any) -> Calibration:
    summary = row["summary"]
    if isinstance(summary, (str, bytes)):
        summary = orjson.loads(summary)
    return Calibration(
        id=row["id"],
        created_at=row["created_at"],
        key=CalibrationKey(
            row["judge_key"], row["evaluator_ref"], row["template_hash"], row["params_hash"]
        ),
        metric=row["metric"],
        run_id=row["run_id"],
        labels_version=row["labels_version"],
        n=row["n"],
        summary=dict(summary or {}),
        project_id=row["project_id"],
    )


__all__ = [
    "Calibration",
    "CalibrationKey",
    "latest_calibration",
    "list_calibrations",
    "save_calibration",
]
