"""The store's tables, declared once (SQLAlchemy Core) for SQLite and PostgreSQL.

``results`` is keyed by the task key (run, sample, trial, evaluator): writes are upserts, so a
retried or resumed batch never double-counts. The sample is its position in the dataset
(``seq``), unique by construction even when user ids repeat; the user's id is kept beside it.
Evaluators are numbered within their run (``evaluator`` = index in the run's evaluator list),
which keeps the hot table narrow.

This is the shape after the last migration (``_migrations.py``), which is what queries use;
stores are created and upgraded only by running the migrations in order. Runs and outputs carry
``project_id`` (``"default"`` unless the run says) and ``tenant_id``, reserved for
multi-tenancy: ``""`` (no tenant) until auth arrives. ``results`` rows, the hot path, are scoped
through their run's key instead (``results.run`` = ``runs.pk``; ``runs_scope`` indexes the
runs of a project): two more columns there cost about 8% of Score throughput and 40% more disk
(docs/decisions/0006-store-migrations.md).
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
)

SCHEMA_VERSION = 13
"""The number of the last migration; a store at a higher version was written by a newer evalsi."""

metadata = MetaData()

meta = Table(
    "evalsi_meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

schema_migrations = Table(
    "evalsi_schema_migrations",
    metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("name", String(128), nullable=False),
    Column("applied_at", Float, nullable=False),
)


def _scope() -> tuple[Column[str], Column[str]]:
    return (
        Column("project_id", String(64), nullable=False, server_default="default"),
        Column("tenant_id", String(64), nullable=False, server_default=""),
    )


runs = Table(
    "runs",
    metadata,
    Column("pk", Integer, primary_key=True, autoincrement=True),
    Column("id", String(64), nullable=False, unique=True),
    Column("name", String(256), nullable=False, default=""),
    Column("kind", String(32), nullable=False),  # score | run | grade
    Column("status", String(32), nullable=False),  # _runs.STATUSES
    Column("created_at", Float, nullable=False),
    Column("finished_at", Float),
    Column("pid", Integer),
    Column("records", Integer, nullable=False, default=0),
    Column("spec", JSON, nullable=False),  # evaluators (ref, params, name), data source, options
    Column("manifest", JSON),  # reproducibility: versions, hashes, seeds
    Column("summary", JSON),  # metrics and counts once finished
    Column("error", Text),
    *_scope(),
    # the process that owns a queued or running run (see _owner.py): host, a per-process
    # token, and the store clock's time of its last heartbeat
    Column("host", String(255)),
    Column("owner", String(32)),
    Column("heartbeat_at", Float),
    Column("created_by", String(512), nullable=False, server_default=""),  # provider/subject
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
    # the infra error kind (rate_limited, timeout...); for a target error http_<status>
    Column("kind", String(32)),
    Column("output", Text),  # JSON of Content.to_value()
    Column("usage", Text),  # JSON of the Usage fields that are known
    Column("error", Text),
    Column("attempts", Integer, nullable=False, default=1),
    *_scope(),
    # JSON of Trajectory.to_value(): the steps an agent target took (schema 7); NULL otherwise
    Column("trajectory", Text),
    # the task's cassette index (core.Cassette.index(), schema 10): its responses are
    # cassette_blobs rows; NULL when none was recorded
    Column("cassette", Text),
    PrimaryKeyConstraint("run", "seq", "trial"),
    sqlite_with_rowid=False,
)
"""What a Run's target produced for each (sample, trial). (Added to version 1 without a bump;
migration 1 creates whichever version-1 table an old store lacks.)"""

cassette_blobs = Table(
    "cassette_blobs",
    metadata,
    Column("sha256", String(64), primary_key=True),  # of body: content-addressed, kept once
    Column("body", LargeBinary, nullable=False),  # one response of a cassette, as JSON
)
"""The responses cassettes name (schema 10): a response repeated across tasks, trials and runs
is one row."""

judge_cache = Table(
    "judge_cache",
    metadata,
    Column("key", String(80), primary_key=True),  # content hash of judge, template, messages
    Column("text", Text, nullable=False),
    Column("usage", JSON),  # the tokens the original call cost
    Column("created_at", Float, nullable=False),
)
"""Judge answers by the content hash of what was asked (``runs/_judges.py``): a re-run of an
unchanged suite makes no judge calls. Content-addressed and shared by every project of a store
(a hit reveals only that the same prompt was asked before); tenant isolation will key it too."""

calibrations = Table(
    "calibrations",
    metadata,
    Column("pk", Integer, primary_key=True, autoincrement=True),
    Column("id", String(64), nullable=False, unique=True),
    Column("created_at", Float, nullable=False),
    # what the calibration is of: content hashes of the judge's identity (without its name
    # and secret reference) and of the evaluator's params (without the judge's name), the
    # evaluator ref and the prompt template's hash (store/_calibrations.py)
    Column("judge_key", String(80), nullable=False),
    Column("evaluator_ref", String(256), nullable=False),
    Column("template_hash", String(80), nullable=False),
    Column("params_hash", String(80), nullable=False),
    Column("metric", String(256), nullable=False),
    Column("run_id", String(64), nullable=False),  # the run holding the judge's scores
    Column("labels_version", String(80)),  # content hash of the human labels
    Column("n", Integer, nullable=False),  # records compared
    Column("summary", JSON, nullable=False),  # the calibration's JSON form (agreement, biases)
    *_scope(),
)
"""Judge calibrations (``evalsi calibrate``): how a judge agreed with human labels. A run whose
gate reads a judge with no calibration under the same key gets a warning in its report."""

reviews = Table(
    "reviews",
    metadata,
    Column("run", Integer, nullable=False),  # runs.pk: a review is scoped through its run
    Column("seq", Integer, nullable=False),
    Column("trial", Integer, nullable=False),
    Column("evaluator", Integer, nullable=False),  # index in the run's evaluator list
    Column("reviewer", String(256), nullable=False),
    Column("record_id", Text, nullable=False),
    Column("approval", String(16), nullable=False),  # approved | rejected
    Column("verdict", Text),  # JSON of the reviewer's own verdict; NULL when none was given
    Column("rationale", Text, nullable=False),
    # sha256 of the evidence and automatic verdict the reviewer saw (evidence/_review.py)
    Column("fingerprint", String(80), nullable=False),
    Column("imported_at", Float, nullable=False),
    PrimaryKeyConstraint("run", "seq", "trial", "evaluator", "reviewer"),
)
"""Human reviews of a run's results (``evalsi review import``, schema 8), one per (result,
reviewer): a re-import replaces that reviewer's review. Kept apart from ``results``, which a
review never changes. Scoped through the run's key, like ``results``."""

shards = Table(
    "shards",
    metadata,
    Column("run", Integer, nullable=False),  # runs.pk
    Column("shard", String(64), nullable=False),  # SESSION-N: unique per run
    Column("tasks", Integer, nullable=False),
    # queued | done | dead (given up after its deliveries) | cancelled (the run was stopped)
    Column("state", String(16), nullable=False),
    Column("worker", String(255)),  # who finished it
    Column("updated_at", Float, nullable=False),
    PrimaryKeyConstraint("run", "shard"),
)
"""A cluster run's shards of tasks (schema 11): queued by the run's owner as it publishes them
to the work queue, finished by the worker that stored their tasks. The owner counts them to
know when every task is in; a worker skips a shard of a cancelled run."""

run_spend = Table(
    "run_spend",
    metadata,
    Column("run", Integer, nullable=False),  # runs.pk
    Column("session", String(64), nullable=False),  # the dispatch session (shard id prefix)
    Column("spender", String(255), nullable=False),  # one worker process, for its life
    Column("tokens", BigInteger, nullable=False),
    Column("usd", Float, nullable=False),
    Column("usd_unknown", Integer, nullable=False),  # calls whose cost could not be known
    Column("calls", Integer, nullable=False),
    Column("updated_at", Float, nullable=False),
    PrimaryKeyConstraint("run", "session", "spender"),
)
"""What each worker process spent on a cluster run's session (schema 12), its running totals:
the run's budget holds against their sum. A process writes its own row only, the whole total
each time, so a write repeated after a lost answer counts once."""

rate_windows = Table(
    "rate_windows",
    metadata,
    Column("key", String(255), nullable=False),  # run, provider, model, key reference
    Column("slot", BigInteger, nullable=False),  # seconds since the epoch // window length
    Column("requests", Float, nullable=False),
    Column("tokens", Float, nullable=False),
    PrimaryKeyConstraint("key", "slot"),
)
"""Requests and tokens taken per window of a shared rate limit (schema 12): every worker of a
cluster run takes from the same windows, so a limit holds across them."""

projects = Table(
    "projects",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("labels", JSON, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("created_by", String(512), nullable=False),
)
"""Projects created through the API (schema 9); evalsi.yaml may declare more, and ``default``
always exists."""

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("name", String(128), nullable=False),
    Column("hash", String(80), nullable=False, unique=True),  # "sha256:<hex>", never the key
    Column("prefix", String(16), nullable=False),  # the first characters, to recognise a key
    Column("project_id", String(64), nullable=False),
    Column("role", String(128), nullable=False),
    Column("labels", JSON, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("created_by", String(512), nullable=False),
    Column("expires_at", Float),
    Column("revoked_at", Float),
)
"""API keys made through the API (schema 9): only the SHA-256 of each key is stored."""

role_bindings = Table(
    "role_bindings",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("project_id", String(64), nullable=False),  # or "*": every project
    Column("role", String(128), nullable=False),
    Column("subject", String(2048), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("created_by", String(512), nullable=False),
)
"""Role bindings made through the API (schema 9), beside those of evalsi.yaml."""

audit_events = Table(
    "audit_events",
    metadata,
    Column("pk", Integer, primary_key=True, autoincrement=True),
    Column("time", Float, nullable=False),
    Column("principal", String(512), nullable=False),
    Column("action", String(64), nullable=False),
    Column("project_id", String(64), nullable=False),
    Column("resource", Text, nullable=False),
    Column("decision", String(8), nullable=False),  # allow | deny
    Column("decided_by", Text, nullable=False),  # the rule, role or default
    Column("request_id", String(64), nullable=False),
    Column("source", String(128), nullable=False),
    Column("detail", JSON, nullable=False),
)
"""The audit log (schema 9): denials, access changes and run starts."""

Index("audit_events_scope", audit_events.c.project_id, audit_events.c.time)

Index("runs_created", runs.c.created_at)
Index("runs_scope", runs.c.tenant_id, runs.c.project_id, runs.c.created_at)
Index("runs_status", runs.c.status)
Index(
    "calibrations_key",
    calibrations.c.judge_key,
    calibrations.c.evaluator_ref,
    calibrations.c.template_hash,
    calibrations.c.params_hash,
)

spans = Table(
    "spans",
    metadata,
    *_scope(),
    Column("trace_id", String(32), nullable=False),  # lower-case hex
    Column("span_id", String(16), nullable=False),
    Column("parent_span_id", String(16), nullable=False),  # "" on a root span
    Column("name", Text, nullable=False),
    Column("kind", Integer, nullable=False),  # OTLP SpanKind
    Column("type", String(16), nullable=False),  # core.SpanType; "generic" when not mapped
    Column("service", String(255), nullable=False),  # the resource's service.name
    Column("start_ns", BigInteger, nullable=False),
    Column("end_ns", BigInteger, nullable=False),
    Column("status", Integer, nullable=False),  # OTLP Status.code
    Column("status_message", Text),
    Column("session_id", Text, nullable=False),
    Column("model", Text, nullable=False),  # SpanView.model
    Column("view_name", Text, nullable=False),  # SpanView.name: the model, tool, agent...
    Column("scope", Text),  # instrumentation scope "name version"
    Column("attributes", Text),  # JSON objects as text (orjson); NULL when empty
    Column("events", Text),
    Column("resource", Text),
    # the SpanView as stored before schema 5 (now NULL: views are rebuilt on read)
    Column("view", Text),
    Column("links", Text),  # JSON [[trace id, span id, attributes], ...]; NULL without links
    PrimaryKeyConstraint("project_id", "trace_id", "span_id"),
)
"""Spans as received, one row per (project, trace, span id); a re-sent span replaces its row
(store/_traces.py). Scoped by their own ``project_id`` (no parent row to scope through)."""

traces = Table(
    "traces",
    metadata,
    *_scope(),
    Column("trace_id", String(32), nullable=False),
    Column("service", String(255), nullable=False),
    Column("root_name", Text, nullable=False),
    Column("start_ns", BigInteger, nullable=False),
    Column("end_ns", BigInteger, nullable=False),
    Column("duration_ms", Float, nullable=False),
    Column("span_count", Integer, nullable=False),
    Column("error", Integer, nullable=False),  # 0/1: some span has status ERROR
    Column("session_id", Text, nullable=False),
    Column("user_id", Text, nullable=False),
    Column("input_preview", Text, nullable=False),
    Column("output_preview", Text, nullable=False),
    Column("record", Text),  # JSON of the assembled Record
    Column("completed_at", Float, nullable=False),
    PrimaryKeyConstraint("project_id", "trace_id"),
)
"""One row per assembled trace, written when the assembler completes it; late spans update
``span_count`` and ``error``."""

trace_feedback = Table(
    "trace_feedback",
    metadata,
    Column("pk", Integer, primary_key=True, autoincrement=True),
    *_scope(),
    Column("trace_id", String(32), nullable=False),  # "" for session feedback
    Column("session_id", Text, nullable=False),
    Column("name", String(256), nullable=False),
    Column("value", Float),
    Column("label", Text, nullable=False),
    Column("comment", Text, nullable=False),
    Column("source", String(32), nullable=False),  # api | span_event
    Column("time_ns", BigInteger, nullable=False),
    Column("received_at", Float, nullable=False),
    # what makes a re-sent signal the same one (a hash of its fields, see store/_traces.py);
    # rows from before schema 5 have "pk:<pk>"
    Column("key", String(64)),
)
"""Late signals (thumbs, labels, scores) joined to a trace or a session."""

span_events = Table(
    "span_events",
    metadata,
    *_scope(),
    Column("trace_id", String(32), nullable=False),
    Column("span_id", String(16), nullable=False),
    Column("time_ns", BigInteger, nullable=False),
    Column("name", Text, nullable=False),
    Column("attributes", Text),  # JSON object as text (orjson); NULL when empty
    # a hash of (trace, span, name, time, attributes): a re-sent event is stored once
    Column("key", String(64), nullable=False),
    # arrival order (nanoseconds at receipt, then the place in the request): events of one
    # time read back in the order they were sent; an event sent with no time (0) shows this
    Column("seq", BigInteger, nullable=False),
    PrimaryKeyConstraint("project_id", "trace_id", "span_id", "key"),
)
"""Events of a span that arrived apart from it, as OTLP log records (GenAI message events
such as ``gen_ai.user.message`` carry the trace and span ids), often before the span itself.
Kept here rather than folded into the span's row, so they wait for a span not yet stored and
survive its re-sending; reads merge them into their span's ``events`` (store/_trace_queries.py).
A rowid table on SQLite, so retention deletes it in batches like ``spans``."""

trace_claims = Table(
    "trace_claims",
    metadata,
    Column("project_id", String(64), nullable=False),
    Column("trace_id", String(32), nullable=False),
    # the store's clock (epoch seconds) when a span of it was last stored, and when its root was
    Column("last_at", Float, nullable=False),
    Column("root_at", Float),
    Column("batches", Integer, nullable=False),  # span batches that stored spans of it
    Column("claimed_by", String(64)),  # the completing process's owner token, while it works
    Column("claimed_at", Float),
    Column("claimed_batches", Integer),  # ``batches`` when claimed: more since, read again
    # completed (its row written, handed to the policies); spans stored later reopen it, and
    # it is completed again as late spans are: its row rebuilt, not graded again
    Column("done_at", Float),
    PrimaryKeyConstraint("project_id", "trace_id"),
)
"""Traces of a ``cluster:`` server (schema 13), upserted with their spans by whichever replica
stored them, completed once by the replica holding the ``watch`` lease (store/_trace_claims.py,
docs/decisions/0019-watch-across-replicas.md)."""

leases = Table(
    "leases",
    metadata,
    Column("name", String(64), nullable=False),
    Column("owner", String(64), nullable=False),  # the holder's owner token
    Column("host", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("heartbeat_at", Float, nullable=False),  # the store's clock
    Column("acquired_at", Float, nullable=False),
    PrimaryKeyConstraint("name"),
)
"""Named leases held by one process of many sharing the store (schema 13): ``watch``, the
replica that completes traces and runs the online policies (store/_leases.py)."""

Index("spans_start", spans.c.project_id, spans.c.start_ns)
Index("traces_start", traces.c.project_id, traces.c.start_ns, traces.c.trace_id)
Index("traces_session", traces.c.project_id, traces.c.session_id, traces.c.start_ns)
Index("trace_feedback_trace", trace_feedback.c.project_id, trace_feedback.c.trace_id)
Index("trace_feedback_session", trace_feedback.c.project_id, trace_feedback.c.session_id)
Index("trace_feedback_received", trace_feedback.c.project_id, trace_feedback.c.received_at)
Index("trace_feedback_key", trace_feedback.c.project_id, trace_feedback.c.key, unique=True)
# Open traces by their two deadlines (the completer's scan) are partial indexes ``WHERE done_at
# IS NULL`` (trace_claims_root, trace_claims_last), created by migration 12 in SQL: declared
# here, their dialect arguments would import SQLAlchemy's PostgreSQL dialect in every process.
Index("trace_claims_done", trace_claims.c.done_at)  # done ones by age (their reaping)
Index("span_events_time", span_events.c.project_id, span_events.c.time_ns)  # retention
