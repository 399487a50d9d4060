"""Who owns a queued or running run, and whether that owner is still there.

Several machines may share one PostgreSQL store, so a pid alone says nothing about another
machine's run. A run records its owner: the host name, the pid, a random token of the owning
process (a restarted server in a container often gets the same host name AND the same pid) and
a heartbeat, the store clock's time of the owner's last sign of life, which the owning store
refreshes every ``HEARTBEAT_SECONDS`` from a background thread (``_Heartbeat`` in ``_sql.py``).

The owner is judged gone when:

- it is on this host: its pid is not alive, or the pid is ours but the token is not (an earlier
  incarnation of this process);
- it is on another host: its heartbeat is older than ``STALE_AFTER`` seconds by the store's
  clock (so clocks of different machines never need to agree).

A host's own runs are judged by pid, not heartbeat: a process that is stopped (SIGSTOP, a
debugger) is still alive and must not have its run taken over.
"""

from __future__ import annotations

import os
import secrets
import socket
from typing import Any

import sqlalchemy as sa

LIVE = ("queued", "running")
"""Statuses that need a live owner; a run in one of them whose owner is gone reads as
``interrupted``."""

HEARTBEAT_SECONDS = 15.0
STALE_AFTER = 90.0
"""Six missed heartbeats: another host's run is then presumed dead."""


class Lease:
    """The lease of this process's runs: heartbeats every ``heartbeat_s``, presumed dead
    after ``stale_after_s`` (``set_lease``: a cluster's ``leaseTtl``)."""

    heartbeat_s = HEARTBEAT_SECONDS
    stale_after_s = STALE_AFTER


def set_lease(ttl_s: float) -> None:
    """Presume another host's run dead after ``ttl_s`` seconds without a heartbeat, beating
    six times as often (a cluster's ``leaseTtl``: how soon a replica adopts a lost one's runs).
    Every process sharing a store should use the same."""
    Lease.stale_after_s = float(ttl_s)
    Lease.heartbeat_s = float(ttl_s) / 6


HOST = socket.gethostname()[:255]


class _Process:
    token = secrets.token_hex(8)


def _new_token() -> None:
    _Process.token = secrets.token_hex(8)


os.register_at_fork(after_in_child=_new_token)  # a forked child is a different owner


def owner_token() -> str:
    """This process's random token (new in every process, including forked children)."""
    return _Process.token


def owner_values() -> dict[str, Any]:
    """The runs columns that make this process the owner."""
    return {"host": HOST, "pid": os.getpid(), "owner": owner_token()}


def now_sql(dialect: str) -> sa.ColumnElement[float]:
    """The store's clock in epoch seconds, so heartbeats from several hosts compare fairly."""
    if dialect == "postgresql":
        return sa.literal_column("CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS FLOAT)", sa.Float)
    return sa.literal_column("((julianday('now') - 2440587.5) * 86400.0)", sa.Float)


def owner_gone(row: Any, store_now: float | None) -> bool:
    """Whether a run row in a ``LIVE`` status has lost its owner (see the module docstring)."""
    host, pid = row["host"], row["pid"]
    if host is None or host == HOST:  # no host: a row from before owners were recorded
        if not pid:
            return False
        if pid == os.getpid():
            return row["owner"] not in (None, owner_token())
        return not alive(pid)
    beat = row["heartbeat_at"]
    if beat is None or store_now is None:
        return False  # nothing to judge by: never take over a run that may be alive
    return bool(store_now - beat > Lease.stale_after_s)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
