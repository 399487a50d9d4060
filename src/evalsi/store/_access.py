"""What identity and access keep in the store (schema 9): projects made through the API, API
keys (their hashes), role bindings, and the audit log.

Rows in, rows out, as plain dicts: what they mean (a key's principal, a binding's subject) is
``evalsi.auth``'s. Every write is one short transaction; the audit log is written in batches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from evalsi.store._schema import api_keys, audit_events, projects, role_bindings

if TYPE_CHECKING:
    from evalsi.store._sql import SqlStore

AUDIT_PAGE_MAX = 1000


def load_access(store: SqlStore) -> dict[str, list[dict[str, Any]]]:
    """Every project, live API key and role binding, read at once (when the server starts)."""
    with store.engine.connect() as conn:
        return {
            "projects": [dict(r._mapping) for r in conn.execute(sa.select(projects))],
            "keys": [
                dict(r._mapping)
                for r in conn.execute(sa.select(api_keys).where(api_keys.c.revoked_at.is_(None)))
            ],
            "bindings": [dict(r._mapping) for r in conn.execute(sa.select(role_bindings))],
        }


def insert_project(store: SqlStore, row: Mapping[str, Any]) -> bool:
    """Store a project; False when one of that id exists."""
    with store.engine.begin() as conn:
        if conn.execute(sa.select(projects.c.id).where(projects.c.id == row["id"])).first():
            return False
        conn.execute(projects.insert().values(**row))
    return True


def insert_key(store: SqlStore, row: Mapping[str, Any]) -> None:
    with store.engine.begin() as conn:
        conn.execute(api_keys.insert().values(**row))


def list_keys(store: SqlStore, project: str | None) -> list[dict[str, Any]]:
    """The keys of ``project`` (None: all), revoked ones included, newest first."""
    query = sa.select(api_keys).order_by(api_keys.c.created_at.desc())
    if project is not None:
        query = query.where(api_keys.c.project_id == project)
    with store.engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(query)]


def revoke_key(store: SqlStore, key_id: str, project: str, at: float) -> bool:
    """Mark a live key of ``project`` revoked; False when there is none."""
    with store.engine.begin() as conn:
        done = conn.execute(
            api_keys.update()
            .where(
                api_keys.c.id == key_id,
                api_keys.c.project_id == project,
                api_keys.c.revoked_at.is_(None),
            )
            .values(revoked_at=at)
        )
    return bool(done.rowcount)


def insert_binding(store: SqlStore, row: Mapping[str, Any]) -> None:
    with store.engine.begin() as conn:
        conn.execute(role_bindings.insert().values(**row))


def delete_binding(store: SqlStore, binding_id: str, project: str) -> bool:
    with store.engine.begin() as conn:
        done = conn.execute(
            role_bindings.delete().where(
                role_bindings.c.id == binding_id, role_bindings.c.project_id == project
            )
        )
    return bool(done.rowcount)


def write_audit(store: SqlStore, rows: Sequence[Mapping[str, Any]]) -> None:
    """Append audit events in ONE transaction."""
    if rows:
        with store.engine.begin() as conn:
            conn.execute(audit_events.insert(), [dict(r) for r in rows])


def read_audit(
    store: SqlStore,
    projects_of: Sequence[str] | None,
    *,
    limit: int = 100,
    before: int | None = None,
    decision: str = "",
    action: str = "",
) -> list[dict[str, Any]]:
    """Audit events, newest first, of ``projects_of`` (None: all); keyset-paged on ``pk``."""
    query = sa.select(audit_events).order_by(audit_events.c.pk.desc())
    query = query.limit(max(1, min(limit, AUDIT_PAGE_MAX)))
    if projects_of is not None:
        query = query.where(audit_events.c.project_id.in_(list(projects_of)))
    if before is not None:
        query = query.where(audit_events.c.pk < before)
    if decision:
        query = query.where(audit_events.c.decision == decision)
    if action:
        query = query.where(audit_events.c.action == action)
    with store.engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(query)]


def expire_audit(store: SqlStore, before: float) -> int:
    """Delete audit events older than ``before`` (unix seconds); how many."""
    with store.engine.begin() as conn:
        return int(conn.execute(audit_events.delete().where(audit_events.c.time < before)).rowcount)
