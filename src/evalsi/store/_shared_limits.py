"""Budgets and rate limits a cluster run's workers share (schema 12).

Spend: each worker process keeps its running totals for a (run, session) and writes them whole
to its own row (``record_spend``); the run's spend is the sum of the rows (``session_spend``).
Writing the total, not an increment, makes a write repeated after a lost answer harmless.

Rate limits: fixed windows per limit key, each allowing ``cap`` requests (and tokens). A taker
adds what it needs to the current window only when that stays within the cap — one atomic
upsert, so concurrent workers on any machine never overdraw a window together.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from evalsi.core import StoreError
from evalsi.store._schema import rate_windows, run_spend
from evalsi.store._shards import _insert

if TYPE_CHECKING:
    from evalsi.store._sql import SqlStore

TOTALS = ("tokens", "usd", "usd_unknown", "calls", "updated_at")


def record_spend(
    store: SqlStore,
    run_id: str,
    session: str,
    spender: str,
    *,
    tokens: int,
    usd: float,
    usd_unknown: int,
    calls: int,
) -> None:
    """Set ``spender``'s running totals for the run's ``session``."""
    values = {
        "run": store._run_pk(run_id),
        "session": session[:64],
        "spender": spender[:255],
        "tokens": int(tokens),
        "usd": float(usd),
        "usd_unknown": int(usd_unknown),
        "calls": int(calls),
        "updated_at": time.time(),
    }
    insert = _insert(store)(run_spend).values(values)
    statement = insert.on_conflict_do_update(
        index_elements=["run", "session", "spender"],
        set_={k: insert.excluded[k] for k in TOTALS},
    )
    _write(store, "record the spend of", lambda conn: conn.execute(statement))


def session_spend(store: SqlStore, run_id: str, session: str) -> tuple[int, float, int, int]:
    """(tokens, usd, calls whose cost is unknown, calls) of every spender of the session."""
    c = run_spend.c
    query = sa.select(
        sa.func.coalesce(sa.func.sum(c.tokens), 0),
        sa.func.coalesce(sa.func.sum(c.usd), 0.0),
        sa.func.coalesce(sa.func.sum(c.usd_unknown), 0),
        sa.func.coalesce(sa.func.sum(c.calls), 0),
    ).where(c.run == store._run_pk(run_id), c.session == session[:64])
    with store.engine.connect() as conn:
        tokens, usd, unknown, calls = conn.execute(query).one()
    return int(tokens), float(usd), int(unknown), int(calls)


def take_rate(
    store: SqlStore,
    key: str,
    slot: int,
    *,
    requests: float,
    tokens: float,
    request_cap: float | None,
    token_cap: float | None,
) -> bool:
    """Add ``requests`` and ``tokens`` to window ``slot`` of ``key`` if it stays within the caps
    (``None``: that one is not limited); a window's first taker always fits (a single estimate
    over the cap would otherwise never go). Whether it was taken."""
    w = rate_windows.c
    insert = _insert(store)(rate_windows).values(
        key=key[:255], slot=int(slot), requests=float(requests), tokens=float(tokens)
    )
    within = []
    if request_cap is not None:
        within.append(w.requests + insert.excluded.requests <= request_cap)
    if token_cap is not None:
        within.append(w.tokens + insert.excluded.tokens <= token_cap)
    statement = insert.on_conflict_do_update(
        index_elements=["key", "slot"],
        set_={
            "requests": w.requests + insert.excluded.requests,
            "tokens": w.tokens + insert.excluded.tokens,
        },
        where=sa.and_(*within) if within else None,
    ).returning(w.slot)

    def take(conn: sa.Connection) -> bool:
        return conn.execute(statement).first() is not None

    return bool(_write(store, "take from the rate limit", take))


def settle_rate(store: SqlStore, key: str, slot: int, tokens: float) -> None:
    """Correct window ``slot`` of ``key`` by ``tokens`` (a call's actual use less its estimate;
    may be negative, may pass the cap: later takers wait)."""
    w = rate_windows.c
    statement = (
        sa.update(rate_windows)
        .where(w.key == key[:255], w.slot == int(slot))
        .values(tokens=w.tokens + float(tokens))
    )
    _write(store, "settle the rate limit", lambda conn: conn.execute(statement))


def prune_rate(store: SqlStore, key: str, before_slot: int) -> None:
    """Delete the windows of ``key`` before ``before_slot``."""
    w = rate_windows.c
    statement = sa.delete(rate_windows).where(w.key == key[:255], w.slot < int(before_slot))
    _write(store, "prune the rate limit", lambda conn: conn.execute(statement))


def _write(store: SqlStore, what: str, work: Any) -> Any:
    try:
        with store.engine.begin() as conn:
            return work(conn)
    except sa.exc.SQLAlchemyError as e:
        raise StoreError(f"cannot {what} a cluster run in {store.location}: {e}") from e


__all__ = ["prune_rate", "record_spend", "session_spend", "settle_rate", "take_rate"]
