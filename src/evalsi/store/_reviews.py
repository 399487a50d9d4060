"""Human reviews of a run's results, stored apart from the automatic scores (schema 8).

One row per (result, reviewer): the result is (run, seq, trial, evaluator index), as in
``results``, and a second import by the same reviewer replaces their review while another
reviewer's stays beside it. Writing a review never touches ``results``: the automatic verdict
remains what the evaluator said, and a report can show both. Which reviews are accepted (the
evidence unchanged since export, a rationale given) is decided by ``evidence/_review.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from evalsi.core import StoreError, UserError
from evalsi.store._schema import reviews

if TYPE_CHECKING:
    from evalsi.store._sql import SqlStore

APPROVALS = ("approved", "rejected")
"""What a reviewer says of an automatic verdict."""

_UPDATED = ("record_id", "approval", "verdict", "rationale", "fingerprint", "imported_at")


@dataclass(frozen=True, slots=True)
class Review:
    """One reviewer's review of one result: the approval, their own verdict (any JSON value,
    or None), why, and the fingerprint of the evidence they saw."""

    run_id: str
    seq: int
    trial: int
    evaluator: int  # index in the run's evaluator list
    record_id: str
    reviewer: str
    approval: str  # APPROVALS
    verdict: Any
    rationale: str
    fingerprint: str
    imported_at: float
    evaluator_name: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "seq": self.seq,
            "trial": self.trial,
            "record_id": self.record_id,
            "evaluator": self.evaluator_name,
            "evaluator_index": self.evaluator,
            "reviewer": self.reviewer,
            "approval": self.approval,
            "verdict": self.verdict,
            "rationale": self.rationale,
            "fingerprint": self.fingerprint,
            "imported_at": self.imported_at,
        }


def save_reviews(store: SqlStore, run_id: str, items: Sequence[Review]) -> int:
    """Upsert ``items`` (all of run ``run_id``) in ONE transaction; returns how many.

    Raises:
        UserError: a review of another run, an approval not in ``APPROVALS``, or an empty
            reviewer or rationale.
    """
    pk = store._run_pk(run_id)
    rows = []
    for r in items:
        if r.run_id != run_id:
            raise UserError(f"a review of run {r.run_id} cannot be stored with run {run_id}")
        if r.approval not in APPROVALS:
            raise UserError(f"a review's approval is {r.approval!r}, not one of {APPROVALS}")
        if not r.reviewer.strip() or not r.rationale.strip():
            raise UserError("a stored review needs a reviewer and a rationale")
        rows.append(
            {
                "run": pk,
                "seq": r.seq,
                "trial": r.trial,
                "evaluator": r.evaluator,
                "reviewer": r.reviewer,
                "record_id": r.record_id,
                "approval": r.approval,
                "verdict": None if r.verdict is None else orjson.dumps(r.verdict).decode(),
                "rationale": r.rationale,
                "fingerprint": r.fingerprint,
                "imported_at": r.imported_at,
            }
        )
    if not rows:
        return 0
    insert = postgresql.insert if store.engine.dialect.name == "postgresql" else sqlite.insert
    statement = insert(reviews)
    statement = statement.on_conflict_do_update(
        index_elements=["run", "seq", "trial", "evaluator", "reviewer"],
        set_={c: statement.excluded[c] for c in _UPDATED},
    )
    try:
        with store.engine.begin() as conn:
            conn.execute(statement, rows)
    except sa.exc.SQLAlchemyError as e:
        raise StoreError(f"cannot store the reviews in {store.location}: {e}") from e
    return len(rows)


def read_reviews(store: SqlStore, run_id: str) -> list[Review]:
    """The run's reviews in result order (sample, trial, evaluator), then by reviewer."""
    names = [str(e.get("name", "")) for e in store.get_run(run_id).evaluators]
    c = reviews.c
    query = (
        sa.select(reviews)
        .where(c.run == store._run_pk(run_id))
        .order_by(c.seq, c.trial, c.evaluator, c.reviewer)
    )
    with store.engine.connect() as conn:
        return [
            Review(
                run_id=run_id,
                seq=row["seq"],
                trial=row["trial"],
                evaluator=row["evaluator"],
                record_id=row["record_id"],
                reviewer=row["reviewer"],
                approval=row["approval"],
                verdict=None if row["verdict"] is None else orjson.loads(row["verdict"]),
                rationale=row["rationale"],
                fingerprint=row["fingerprint"],
                imported_at=row["imported_at"],
                evaluator_name=names[row["evaluator"]] if row["evaluator"] < len(names) else "",
            )
            for row in conn.execute(query).mappings()
        ]


__all__ = ["APPROVALS", "Review", "read_reviews", "save_reviews"]
