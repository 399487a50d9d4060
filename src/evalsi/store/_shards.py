"""A cluster run's shards (schema 11): what its owner queued and what workers finished.

The owner records each shard ``queued`` before publishing it, so a shard is never done before it
is known; a worker marks it ``running`` as it starts it (so stopping the run cancels only what
no worker started, and the owner waits for the rest); the worker that stored a shard's tasks
marks it ``done`` (or ``dead`` when it gives up
after the last delivery), and the owner counts the states to know when every task is in. Marking
a shard is idempotent and never moves it back: a redelivered shard finished twice is still one
shard done, and a cancelled run's queued shards stay cancelled.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from evalsi.core import StoreError
from evalsi.store._schema import shards

if TYPE_CHECKING:
    from evalsi.store._sql import SqlStore

SHARD_STATES = ("queued", "running", "done", "dead", "cancelled")
FINAL = ("done", "dead", "cancelled")
OPEN = ("queued", "running")  # a worker may run it (running: again, after its worker died)


def queue_shards(store: SqlStore, run_id: str, items: Sequence[tuple[str, int]]) -> None:
    """Record shards ``(id, tasks)`` as queued (a shard queued again keeps its state)."""
    if not items:
        return
    pk = store._run_pk(run_id)
    now = time.time()
    rows = [
        {"run": pk, "shard": s, "tasks": n, "state": "queued", "updated_at": now} for s, n in items
    ]
    insert = _insert(store)(shards).on_conflict_do_nothing(index_elements=["run", "shard"])
    _write(store, lambda conn: conn.execute(insert, rows))


def start_shard(store: SqlStore, run_id: str, shard: str, worker: str) -> bool:
    """Mark a queued shard running (a running one stays so: its worker died and it is
    delivered again); False when it is finished, cancelled or unknown — not to be run. A
    running shard is not cancelled with its run's queued ones: its owner waits for it."""
    statement = (
        sa.update(shards)
        .where(shards.c.run == store._run_pk(run_id))
        .where(shards.c.shard == shard)
        .where(shards.c.state.in_(OPEN))
        .values(state="running", worker=worker[:255], updated_at=time.time())
    )
    return bool(_write(store, lambda conn: conn.execute(statement).rowcount))


def finish_shard(store: SqlStore, run_id: str, shard: str, state: str, worker: str) -> bool:
    """Mark a queued or running shard ``done``, ``dead``, or ``cancelled`` (a worker did not
    run it: the run's budget was spent); False when it was neither (finished already,
    cancelled, or never queued)."""
    if state not in FINAL:
        raise ValueError(f"a shard finishes done, dead or cancelled, not {state!r}")
    statement = (
        sa.update(shards)
        .where(shards.c.run == store._run_pk(run_id))
        .where(shards.c.shard == shard)
        .where(shards.c.state.in_(OPEN))
        .values(state=state, worker=worker[:255], updated_at=time.time())
    )
    return bool(_write(store, lambda conn: conn.execute(statement).rowcount))


def shard_counts(store: SqlStore, run_id: str, prefix: str = "") -> dict[str, tuple[int, int]]:
    """(shards, tasks) of the run by state (of the shards whose id starts with ``prefix``: one
    session's)."""
    query = (
        sa.select(shards.c.state, sa.func.count(), sa.func.sum(shards.c.tasks))
        .where(shards.c.run == store._run_pk(run_id))
        .group_by(shards.c.state)
    )
    if prefix:
        query = query.where(shards.c.shard.startswith(prefix, autoescape=True))
    with store.engine.connect() as conn:
        return {str(state): (int(n), int(t or 0)) for state, n, t in conn.execute(query)}


def cancel_shards(store: SqlStore, run_id: str, *, running: bool = False) -> int:
    """Mark the run's queued shards cancelled (workers skip them) — and with ``running`` those
    workers are running too (they stop them: the run was cancelled); how many."""
    statement = (
        sa.update(shards)
        .where(shards.c.run == store._run_pk(run_id))
        .where(shards.c.state.in_(OPEN if running else ("queued",)))
        .values(state="cancelled", updated_at=time.time())
    )
    return int(_write(store, lambda conn: conn.execute(statement).rowcount))


def cancelled_among(store: SqlStore, run_id: str, shard_ids: Sequence[str]) -> set[str]:
    """Which of ``shard_ids`` of the run are cancelled (a worker stops those it runs)."""
    if not shard_ids:
        return set()
    query = (
        sa.select(shards.c.shard)
        .where(shards.c.run == store._run_pk(run_id))
        .where(shards.c.shard.in_(list(shard_ids)))
        .where(shards.c.state == "cancelled")
    )
    with store.engine.connect() as conn:
        return {str(s) for s in conn.execute(query).scalars()}


def _insert(store: SqlStore) -> Any:
    """The store's dialect's ``insert`` (it has ``on_conflict_do_*``): the cluster tables'
    upserts share it."""
    from sqlalchemy.dialects import postgresql, sqlite

    return postgresql.insert if store.engine.dialect.name == "postgresql" else sqlite.insert


def _write(store: SqlStore, work: Any) -> Any:
    try:
        with store.engine.begin() as conn:
            return work(conn)
    except sa.exc.SQLAlchemyError as e:
        raise StoreError(f"cannot record shards in {store.location}: {e}") from e


_LOST = ("OperationalError", "InterfaceError")  # PEP 249's names for a lost or failed link


def unavailable(error: BaseException) -> bool:
    """Whether ``error`` says the store could not be reached or lost its connection (worth
    waiting out), as opposed to a refused write: an ``OperationalError`` or ``InterfaceError``
    (SQLAlchemy's, or the driver's own from a raw connection) in it or its causes."""
    seen: BaseException | None = error
    for _ in range(8):  # a short chain: StoreError <- SQLAlchemy <- driver
        if seen is None:
            return False
        if any(cls.__name__ in _LOST for cls in type(seen).__mro__):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


__all__ = [
    "FINAL",
    "SHARD_STATES",
    "cancel_shards",
    "cancelled_among",
    "finish_shard",
    "queue_shards",
    "shard_counts",
    "start_shard",
    "unavailable",
]
