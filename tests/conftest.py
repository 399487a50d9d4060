"""Fixtures shared by unit and integration tests: a fresh PostgreSQL schema per test.

PostgreSQL tests run against the server on loopback (``EVALSI_TEST_PG``, by default
``postgresql+psycopg://postgres@127.0.0.1:5432/test``); they are skipped only when that server
cannot be reached.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

PG_BASE = os.environ.get("EVALSI_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A store URL whose ``search_path`` is a new, empty schema, dropped after the test."""
    try:
        import psycopg
    except ImportError:  # pragma: no cover - psycopg is in the dev extra
        pytest.skip("psycopg is not installed (pip install 'evalsi[postgres]')")
    dsn = PG_BASE.replace("postgresql+psycopg://", "postgresql://", 1)
    try:
        admin = psycopg.connect(dsn, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as e:
        pytest.skip(f"PostgreSQL is unreachable at {PG_BASE}: {e}")
    schema = "evalsi_test_" + uuid.uuid4().hex[:12]
    with admin:
        admin.execute(f"CREATE SCHEMA {schema}")
        try:
            sep = "&" if "?" in PG_BASE else "?"
            yield f"{PG_BASE}{sep}options=-csearch_path%3D{schema}&application_name={schema}"
        finally:
            # a store left open by a failing test must not make the drop wait forever
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s AND pid <> pg_backend_pid()",
                (schema,),
            )
            admin.execute(f"DROP SCHEMA {schema} CASCADE")
