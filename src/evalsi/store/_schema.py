"""The store's tables, declared once (SQLAlchemy Core) for SQLite and PostgreSQL.

``results`` is keyed by the task key (run, sample, trial, evaluator): writes are upserts, so a
retried or resumed batch never double-counts. The sample is its position in the dataset
(``seq``), unique by construction even when user ids repeat; the user's id is kept beside it.
Evaluators are numbered within their run (``evaluator`` = index in the run's evaluator list),
which keeps the hot table narrow.
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

SCHEMA_VERSION = 1

metadata = MetaData()

meta = Table(
    "evalsi_meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

runs = Table(
    "runs",
    metadata,
    Column("pk", Integer, primary_key=True, autoincrement=True),
    Column("id", String(64), nullable=False, unique=True),
    Column("name", String(256), nullable=False, default=""),
    Column("kind", String(32), nullable=False),  # score | run | grade
    Column("status", String(32), nullable=False),  # running | done | failed | interrupted
    Column("created_at", Float, nullable=False),
    Column("finished_at", Float),
    Column("pid", Integer),
    Column("records", Integer, nullable=False, default=0),
    Column("spec", JSON, nullable=False),  # evaluators (ref, params, name), data source, options
    Column("manifest", JSON),  # reproducibility: versions, hashes, seeds
    Column("summary", JSON),  # metrics and counts once finished
    Column("error", Text),
)

results = Table(
    "results",
    metadata,
    Column("run", Integer, nullable=False),
    Column("seq", Integer, nullable=False),  # position of the record; -1 for dataset scope
    Column("trial", Integer, nullable=False),
    Column("evaluator", Integer, nullable=False),
    Column("record_id", Text, nullable=False),
    Column("outcome", Integer, nullable=False),  # core.Outcome
    Column("kind", Integer),  # the first score's kind: 1 number, 2 passed, 3 label, 4 structured
    Column("value", Float),  # the first score: number, or 1.0/0.0 for passed
    Column("text", Text),  # why, when not SCORED; else the label (kind 3) or the explanation
    Column("extra", Text),  # JSON of all scores when the first alone does not say everything
    PrimaryKeyConstraint("run", "seq", "trial", "evaluator"),
    sqlite_with_rowid=False,
)

outputs = Table(
    "outputs",
    metadata,
    Column("run", Integer, nullable=False),
    Column("seq", Integer, nullable=False),  # position of the sample in the dataset
    Column("trial", Integer, nullable=False),
    Column("record_id", Text, nullable=False),
    # ok | target_error | skipped | infra_error | cancelled (see runs/_execute.py)
    Column("status", String(16), nullable=False),
    Column("kind", String(32)),  # the infra error kind (rate_limited, timeout...)
    Column("output", Text),  # JSON of Content.to_value()
    Column("usage", Text),  # JSON of the Usage fields that are known
    Column("error", Text),
    Column("attempts", Integer, nullable=False, default=1),
    PrimaryKeyConstraint("run", "seq", "trial"),
    sqlite_with_rowid=False,
)
"""What a Run's target produced for each (sample, trial): added beside ``results`` without a
schema bump, since ``create_all`` adds a missing table to an older store and nothing else
changes."""

judge_cache = Table(
    "judge_cache",
    metadata,
    Column("key", String(80), primary_key=True),  # content hash of judge, template, messages
    Column("text", Text, nullable=False),
    Column("usage", JSON),  # the tokens the original call cost
    Column("created_at", Float, nullable=False),
)
"""Judge answers by the content hash of what was asked (``runs/_judges.py``): a re-run of an
unchanged suite makes no judge calls. Added like ``outputs``, without a schema bump."""

Index("runs_created", runs.c.created_at)
