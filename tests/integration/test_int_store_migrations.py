"""Several processes open one new store at the same instant: exactly one migrates, the others
wait for its lock and find nothing to do (SQLite: BEGIN IMMEDIATE; PostgreSQL: an advisory
transaction lock). Migration 1 is slowed down in the children so that they all find the
store unmigrated before any of them finishes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from evalsi.store._schema import SCHEMA_VERSION

CHILD = r"""
import json, sys, time
from evalsi.store import _migrations as m
slow = m.MIGRATIONS[0]
def initial(conn):
    time.sleep(0.5)
    slow.apply(conn)
m.MIGRATIONS = (m.Migration(1, slow.name, initial), *m.MIGRATIONS[1:])
from evalsi.store import SqlStore
start = float(sys.argv[2])
while time.time() < start:
    time.sleep(0.001)
store = SqlStore.open(sys.argv[1])
print(json.dumps(store.migrations_applied))
store.close()
"""


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "s.db")
    return str(request.getfixturevalue("pg_url"))


def test_concurrent_opens_migrate_once(store_url: str) -> None:
    start = time.time() + 2.0  # every child has imported SQLAlchemy by then
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, store_url, str(start)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    finished = [child.communicate(timeout=60) for child in children]  # every pipe closed
    outcomes = []
    for child, (out, err) in zip(children, finished, strict=True):
        assert child.returncode == 0, err[-2000:]
        outcomes.append(json.loads(out.strip().splitlines()[-1]))
    every = list(range(1, SCHEMA_VERSION + 1))
    assert sorted(outcomes) == [[], [], [], every]
    url = store_url if "://" in store_url else f"sqlite:///{store_url}"
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.exec_driver_sql("SELECT version FROM evalsi_schema_migrations").all()
        assert sorted(v for (v,) in rows) == every
    finally:
        engine.dispose()
