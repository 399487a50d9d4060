"""The store's tables as schema version 1 created them, frozen: migration 1 creates these.

Never edit this file: stores in the field were made from it. Later changes are migrations
(``_migrations.py``) and the current shape is ``_schema.py``.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
)

metadata_v1 = MetaData()

Table(
    "evalsi_meta",
    metadata_v1,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

runs_v1 = Table(
    "runs",
    metadata_v1,
    Column("pk", Integer, primary_key=True, autoincrement=True),
    Column("id", String(64), nullable=False, unique=True),
    Column("name", String(256), nullable=False, default=""),
    Column("kind", String(32), nullable=False),
    Column("status", String(32), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("finished_at", Float),
    Column("pid", Integer),
    Column("records", Integer, nullable=False, default=0),
    Column("spec", JSON, nullable=False),
    Column("manifest", JSON),
    Column("summary", JSON),
    Column("error", Text),
)

Table(
    "results",
    metadata_v1,
    Column("run", Integer, nullable=False),
    Column("seq", Integer, nullable=False),
    Column("trial", Integer, nullable=False),
    Column("evaluator", Integer, nullable=False),
    Column("record_id", Text, nullable=False),
    Column("outcome", Integer, nullable=False),
    Column("kind", Integer),
    Column("value", Float),
    Column("text", Text),
    Column("extra", Text),
    PrimaryKeyConstraint("run", "seq", "trial", "evaluator"),
    sqlite_with_rowid=False,
)

Table(
    "outputs",
    metadata_v1,
    Column("run", Integer, nullable=False),
    Column("seq", Integer, nullable=False),
    Column("trial", Integer, nullable=False),
    Column("record_id", Text, nullable=False),
    Column("status", String(16), nullable=False),
    Column("kind", String(32)),
    Column("output", Text),
    Column("usage", Text),
    Column("error", Text),
    Column("attempts", Integer, nullable=False, default=1),
    PrimaryKeyConstraint("run", "seq", "trial"),
    sqlite_with_rowid=False,
)

Table(
    "judge_cache",
    metadata_v1,
    Column("key", String(80), primary_key=True),
    Column("text", Text, nullable=False),
    Column("usage", JSON),
    Column("created_at", Float, nullable=False),
)

Index("runs_created", runs_v1.c.created_at)
