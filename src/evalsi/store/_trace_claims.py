"""Traces completed once across server replicas (schema 13, PostgreSQL): ``trace_claims``.

Every replica stores the spans it receives; in the same transaction (``CLAIM_UPSERT`` in
``_trace_rows``, run by ``RowsWriter`` after its span upsert) it upserts one row per trace of
the batch: when a span of it was last stored and when its root first was, by the store's
clock, and how many batches stored its spans. The replica holding the ``watch`` lease
(``store._leases``) claims the traces whose time has come (``claim_due``: ``grace_s`` after the
root was stored, or ``orphan_s`` after the last span of a trace without one, the assembler's
rule), reads each whole from the store whichever replica stored its spans, and marks it done
(``finish_claims``).

Exactly once: a claim is one ``UPDATE`` over rows picked ``FOR UPDATE SKIP LOCKED``, so two
claimers never get the same trace and neither waits for the other (nor for a row an ingest
transaction holds: that trace is taken next time). A span batch stored after a trace was
claimed bumps its ``batches`` past ``claimed_batches``: finishing leaves it open, and it is
completed again as a trace with late spans (its row rebuilt from the store, not graded again:
the completer tells by its trace row). Claims of a holder that lost the lease go back to open
when the next one takes it (``release_claims``). Rows done an hour ago are reaped
(``reap_claims``); a span that reaches a trace after that opens it again, treated the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from evalsi.core import StoreError
from evalsi.store._owner import owner_token

if TYPE_CHECKING:
    from evalsi.store._sql import SqlStore

Key = tuple[str, str]  # (project, trace id)

_CLOCK = "CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS FLOAT)"

REAP_AFTER_S = 3600.0
"""Done rows are kept this long (a late span within it reopens the row; after, a new one)."""


def claim_due(
    store: SqlStore, grace_s: float, orphan_s: float, limit: int, *, now: float | None = None
) -> list[tuple[str, str, float]]:
    """Claim up to ``limit`` open traces whose time has come, for this process: ``(project,
    trace id, claimed_at)``. Due means the root was stored at least ``grace_s`` ago, or the last
    span at least ``orphan_s`` ago (a deadline reached exactly is due)."""
    if limit <= 0:
        return []
    clock, params = _clock(store, now)
    sql = (
        f"UPDATE trace_claims AS c SET claimed_by = :me, claimed_at = {clock}, "
        "claimed_batches = c.batches "
        "FROM (SELECT project_id, trace_id FROM trace_claims "
        "WHERE done_at IS NULL AND claimed_by IS NULL "
        f"AND (root_at <= {clock} - :grace OR last_at <= {clock} - :orphan) "
        "LIMIT :limit FOR UPDATE SKIP LOCKED) AS d "
        "WHERE c.project_id = d.project_id AND c.trace_id = d.trace_id "
        "RETURNING c.project_id, c.trace_id, c.claimed_at"
    )
    params.update(me=owner_token(), grace=float(grace_s), orphan=float(orphan_s), limit=limit)
    rows = _run(store, "claim traces", sql, params)
    return [(str(p), str(t), float(at)) for p, t, at in rows]


def finish_claims(store: SqlStore, keys: Sequence[Key], *, now: float | None = None) -> int:
    """Our claims of these traces settled: done, or open again when a span was stored after
    the claim (completed again later, as a trace with late spans). How many are done."""
    if not keys:
        return 0
    clock, params = _clock(store, now)
    sql = (
        "UPDATE trace_claims AS c SET claimed_by = NULL, claimed_at = NULL, "
        f"done_at = CASE WHEN c.batches = c.claimed_batches THEN {clock} END "
        "FROM (SELECT project_id, trace_id FROM trace_claims "
        f"WHERE claimed_by = :me AND (project_id, trace_id) IN ({_pairs(keys, params)}) "
        "ORDER BY project_id, trace_id FOR UPDATE) AS d "
        "WHERE c.project_id = d.project_id AND c.trace_id = d.trace_id "
        "RETURNING c.done_at"
    )
    params["me"] = owner_token()
    rows = _run(store, "finish trace claims", sql, params)
    return sum(1 for (done,) in rows if done is not None)


def release_claims(store: SqlStore, keys: Sequence[Key] | None = None) -> int:
    """Claims given back (open again): ours of ``keys`` (a batch that failed), or, with no
    ``keys``, every other process's (taken the ``watch`` lease: they lost it). How many."""
    params: dict[str, object] = {"me": owner_token()}
    if keys is None:
        where = "claimed_by IS NOT NULL AND claimed_by <> :me"
    elif not keys:
        return 0
    else:
        where = f"claimed_by = :me AND (project_id, trace_id) IN ({_pairs(keys, params)})"
    sql = (
        "UPDATE trace_claims AS c SET claimed_by = NULL, claimed_at = NULL "
        "FROM (SELECT project_id, trace_id FROM trace_claims "
        f"WHERE done_at IS NULL AND {where} ORDER BY project_id, trace_id FOR UPDATE) AS d "
        "WHERE c.project_id = d.project_id AND c.trace_id = d.trace_id RETURNING 1"
    )
    return len(_run(store, "release trace claims", sql, params))


def reap_claims(
    store: SqlStore, after_s: float = REAP_AFTER_S, limit: int = 5000, *, now: float | None = None
) -> int:
    """Delete up to ``limit`` rows done more than ``after_s`` ago; how many."""
    clock, params = _clock(store, now)
    sql = (
        "DELETE FROM trace_claims WHERE ctid IN (SELECT ctid FROM trace_claims "
        f"WHERE done_at < {clock} - :after LIMIT :limit FOR UPDATE SKIP LOCKED) RETURNING 1"
    )
    params.update(after=float(after_s), limit=limit)
    return len(_run(store, "reap trace claims", sql, params))


def claim_counts(store: SqlStore) -> dict[str, int]:
    """Traces known to the claims by state: ``open``, ``claimed``, ``done``."""
    sql = (
        "SELECT CASE WHEN done_at IS NOT NULL THEN 'done' WHEN claimed_by IS NOT NULL "
        "THEN 'claimed' ELSE 'open' END AS state, COUNT(*) FROM trace_claims GROUP BY 1"
    )
    counts = {"open": 0, "claimed": 0, "done": 0}
    counts.update({str(s): int(n) for s, n in _run(store, "count trace claims", sql, {})})
    return counts


def _clock(store: SqlStore, now: float | None) -> tuple[str, dict[str, object]]:
    """The store's clock as SQL, or ``now`` (tests of the boundaries) as a parameter."""
    _check(store)
    if now is None:
        return _CLOCK, {}
    return "CAST(:now AS FLOAT)", {"now": float(now)}


def _pairs(keys: Sequence[Key], params: dict[str, object]) -> str:
    marks = []
    for i, (project, trace_id) in enumerate(keys):
        params[f"p{i}"], params[f"t{i}"] = project, trace_id
        marks.append(f"(:p{i}, :t{i})")
    return ", ".join(marks)


def _check(store: SqlStore) -> None:
    if store.engine.dialect.name != "postgresql":
        raise StoreError(f"trace claims need PostgreSQL (a cluster's store), not {store.location}")


def _run(store: SqlStore, what: str, sql: str, params: dict[str, object]) -> list[Any]:
    _check(store)
    try:
        with store.engine.begin() as conn:
            return list(conn.execute(sa.text(sql), params))
    except sa.exc.SQLAlchemyError as e:
        raise StoreError(f"cannot {what} in {store.location}: {e}") from e
