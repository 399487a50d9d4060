"""Named leases (schema 13): one process of the many sharing a store holds each, by heartbeat.

``acquire`` is one statement that takes a free lease, renews our own, or takes one whose
holder's heartbeat is more than ``ttl_s`` old by the store's clock (so the clocks of several
machines never need to agree), and says whether we hold it afterwards. A holder calls it every
``ttl_s / 6`` (the runs' heartbeat ratio, ``store._owner.set_lease``); a holder that stops
(SIGKILL, a lost machine) loses the lease to the next caller once ``ttl_s`` has passed. At
exactly ``ttl_s`` the lease is still its holder's: stale means older than the TTL, as
``owner_gone`` judges a run's owner.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import sqlalchemy as sa

from evalsi.core import StoreError
from evalsi.store._owner import HOST, now_sql, owner_token
from evalsi.store._schema import leases
from evalsi.store._shards import _insert

if TYPE_CHECKING:
    from evalsi.store._sql import SqlStore


@dataclass(frozen=True, slots=True)
class LeaseHolder:
    """Who holds a lease, as the store saw it."""

    name: str
    owner: str
    host: str
    pid: int
    heartbeat_at: float
    acquired_at: float

    @property
    def ours(self) -> bool:
        return self.owner == owner_token()


def acquire_lease(
    store: SqlStore, name: str, ttl_s: float, *, now: float | None = None
) -> LeaseHolder | None:
    """Take or renew the lease ``name`` for this process; the holder when it is ours, None
    when another process holds it (its heartbeat at most ``ttl_s`` old). ``now`` replaces the
    store's clock (tests of the boundaries)."""
    if ttl_s <= 0:
        raise ValueError(f"a lease needs a positive TTL, not {ttl_s}")
    dialect = store.engine.dialect.name
    clock = now_sql(dialect) if now is None else sa.literal(float(now), sa.Float)
    me = owner_token()
    insert = _insert(store)(leases).values(
        name=name, owner=me, host=HOST, pid=os.getpid(), heartbeat_at=clock, acquired_at=clock
    )
    excluded = insert.excluded
    ours = leases.c.owner == me
    statement = insert.on_conflict_do_update(
        index_elements=["name"],
        set_={
            "owner": excluded.owner,
            "host": excluded.host,
            "pid": excluded.pid,
            "heartbeat_at": excluded.heartbeat_at,
            # a renewal keeps the time it was taken: a new holder is told apart by it
            "acquired_at": sa.case((ours, leases.c.acquired_at), else_=excluded.acquired_at),
        },
        where=sa.or_(ours, excluded.heartbeat_at - leases.c.heartbeat_at > ttl_s),
    ).returning(*leases.c)
    try:
        with store.engine.begin() as conn:
            row = conn.execute(statement).mappings().first()
    except sa.exc.SQLAlchemyError as e:
        raise StoreError(f"cannot take the lease {name!r} in {store.location}: {e}") from e
    return None if row is None else LeaseHolder(**row)


def lease_holder(store: SqlStore, name: str) -> LeaseHolder | None:
    """Who last held the lease (alive or not), None when nobody ever did."""
    with store.engine.connect() as conn:
        row = conn.execute(sa.select(leases).where(leases.c.name == name)).mappings().first()
    return None if row is None else LeaseHolder(**row)


def release_lease(store: SqlStore, name: str) -> bool:
    """Give the lease up if we hold it (a clean shutdown: the next replica takes it at once,
    not a TTL later); whether we did."""
    with store.engine.begin() as conn:
        gone = conn.execute(
            sa.delete(leases).where(leases.c.name == name, leases.c.owner == owner_token())
        ).rowcount
    return bool(gone)
