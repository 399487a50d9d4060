"""The work queues on NATS JetStream (``nats-py``): one work-queue stream, a subject and a
durable pull consumer per pool, and the shard message both sides read.

A shard is JSON: ``{"run", "shard", "tasks": [[seq, trial, record row], ...]}`` published to
``work.<pool>`` with ``Nats-Msg-Id: <run>.<shard>``, so a publish retried after a lost ack is
stored once. The stream's work-queue retention deletes a shard when a worker acknowledges it;
one not acknowledged (nor reported in progress) within the pool's ``ackWait`` is delivered again;
its ``maxDeliver``-th delivery is dead-lettered by the worker that gets it.

A shard whose message would pass the object store's ``payloadThreshold`` travels by reference:
the message is ``{"run", "shard", "ref": {"key", "sha256", "size"}, "index": [[seq, trial,
record id], ...]}`` and the object holds the full message above. The index lets a worker settle
the shard's tasks (as infrastructure errors) when the object is missing or altered.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import orjson

from evalsi.cluster._config import ClusterConfig, PoolConfig
from evalsi.core import Record, UserError
from evalsi.store import ObjectRef

log = logging.getLogger("evalsi.cluster")

STREAM = "EVALSI_WORK"
DEAD_STREAM = "EVALSI_DEAD"  # dead-lettered shards, kept for a look (limits retention)
DUPLICATE_WINDOW_S = 120.0
WORKERS_BUCKET = "evalsi_workers"  # each worker's last report; gone WORKER_TTL_S after it stops
WORKER_TTL_S = 30.0
MAX_PAYLOAD_BYTES = 256 * 1024 * 1024
"""The largest task sent through the object store (a worker holds its shard in memory)."""


def subject(pool: str) -> str:
    return f"work.{pool}"


def consumer(pool: str) -> str:
    return f"pool-{pool}"


@dataclass(frozen=True, slots=True)
class Shard:
    """Some tasks of one run: (seq, trial, record); a shard sent by reference has no tasks
    until its payload is fetched (``ref``), only their keys (``index``)."""

    run_id: str
    shard_id: str
    tasks: list[tuple[int, int, Record]]
    ref: ObjectRef | None = None
    index: tuple[tuple[int, int, str], ...] = ()

    @property
    def msg_id(self) -> str:
        return f"{self.run_id}.{self.shard_id}"

    @property
    def keys(self) -> list[tuple[int, int, str]]:
        """(seq, trial, record id) of every task, fetched or not."""
        if self.ref is not None and not self.tasks:
            return list(self.index)
        return [(seq, trial, record.id) for seq, trial, record in self.tasks]


def encode_rows(run_id: str, shard_id: str, rows: list[bytes]) -> bytes:
    """A shard message from its tasks already encoded (``task_row``: the dispatcher measures
    each as it cuts shards, so no task is encoded twice)."""
    head = orjson.dumps({"run": run_id, "shard": shard_id})[:-1]
    return head + b',"tasks":[' + b",".join(rows) + b"]}"


def encode_ref(run_id: str, shard_id: str, ref: ObjectRef, rows: list[bytes]) -> bytes:
    """The message of a shard whose full message (``encode_rows``) is the object ``ref``."""
    index = []
    for row in rows:
        seq, trial, doc = orjson.loads(row)
        index.append([seq, trial, str(doc.get("id", ""))])
    return orjson.dumps({"run": run_id, "shard": shard_id, "ref": ref.to_dict(), "index": index})


def task_row(seq: int, trial: int, record: Record) -> bytes:
    """One task of a shard, encoded: ``[seq, trial, record row]``."""
    from evalsi.datasets import record_to_row

    return orjson.dumps([seq, trial, record_to_row(record)])


def decode(data: bytes) -> Shard:
    """The shard a message holds; ``UserError`` when it is not one (a stray publish)."""
    from evalsi.datasets import FieldMap, record_from_dict

    try:
        doc = orjson.loads(data)
        run_id, shard_id = str(doc["run"]), str(doc["shard"])
        if "ref" in doc:
            index = tuple((int(seq), int(trial), str(rid)) for seq, trial, rid in doc["index"])
            return Shard(run_id, shard_id, [], ObjectRef.from_dict(doc["ref"]), index)
        tasks = [
            (int(seq), int(trial), record_from_dict(row, FieldMap(), line=0, path="shard"))
            for seq, trial, row in doc["tasks"]
        ]
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise UserError(f"not a shard message: {type(e).__name__}: {e}") from None
    return Shard(run_id, shard_id, tasks)


FIRST_TRIES = 10
"""Attempts of a first connection (``reconnect_time_wait`` apart, about 5 s) before a wrong
URL or a NATS that is down is reported; once connected, reconnects never stop."""


async def connect(url: str, name: str) -> Any:
    """A NATS connection that reconnects for ever (a restarted server is found again); a
    ``UserError`` when the first connection cannot be made."""
    import nats

    held: list[Any] = []  # the client, once connected
    failed: list[Exception] = []  # the first connection's failed attempts

    async def error(e: Exception) -> None:
        if held:
            log.warning("NATS %s: %s", url, e)
        else:  # the UserError tells it once, not each attempt
            failed.append(e)

    async def disconnected() -> None:
        if held and not held[0].is_closed:  # not our own close()
            log.warning("NATS %s: disconnected; reconnecting", url)

    async def reconnected() -> None:
        log.info("NATS %s: reconnected", url)

    try:
        nc = await nats.connect(
            servers=[url],
            name=name,
            max_reconnect_attempts=FIRST_TRIES,  # -1 would retry a first connection for ever
            reconnect_time_wait=0.5,
            connect_timeout=5,
            allow_reconnect=True,
            error_cb=error,
            disconnected_cb=disconnected,
            reconnected_cb=reconnected,
        )
    except Exception as e:  # noqa: BLE001 - every way a first connection fails
        why = failed[-1] if failed else e  # what the attempts met, not "no servers left"
        raise UserError(
            f"cluster.nats {url}: cannot connect ({type(why).__name__}: {why})",
            hint="is nats-server running with JetStream (-js)?",
        ) from None
    nc.options["max_reconnect_attempts"] = -1  # read at each reconnect: from now on, for ever
    held.append(nc)
    return nc


async def workers_bucket(js: Any) -> Any:
    """The key-value bucket where workers report themselves (``evalsi cluster status``)."""
    from nats.js.errors import BucketNotFoundError

    try:
        return await js.key_value(WORKERS_BUCKET)
    except BucketNotFoundError:
        return await js.create_key_value(bucket=WORKERS_BUCKET, ttl=WORKER_TTL_S, history=1)


async def ensure_queues(js: Any, config: ClusterConfig) -> None:
    """The work stream, the dead-letter stream and every pool's consumer, created when missing
    and brought to the configuration when they exist (both sides call this: whoever comes
    first)."""
    from nats.js import api
    from nats.js.errors import BadRequestError

    work = api.StreamConfig(
        name=STREAM,
        subjects=["work.*"],
        retention=api.RetentionPolicy.WORK_QUEUE,
        storage=api.StorageType.FILE,
        duplicate_window=DUPLICATE_WINDOW_S,
        max_msgs=config.max_queued,
        discard=api.DiscardPolicy.NEW,  # a full queue refuses: the dispatcher waits, nothing lost
    )
    dead = api.StreamConfig(
        name=DEAD_STREAM,
        subjects=["dead.*"],
        storage=api.StorageType.FILE,
        max_msgs=10_000,
    )
    for stream in (work, dead):
        try:
            await js.add_stream(stream)
        except BadRequestError:  # exists with another configuration
            await js.update_stream(stream)
    for pool in config.pools.values():
        try:
            await js.add_consumer(STREAM, _consumer_config(pool))
        except BadRequestError as e:  # an older server that cannot change a consumer in place
            log.warning("pool %s: its consumer keeps its earlier settings (%s)", pool.name, e)


def _consumer_config(pool: PoolConfig) -> Any:
    from nats.js import api

    return api.ConsumerConfig(
        durable_name=consumer(pool.name),
        filter_subject=subject(pool.name),
        ack_policy=api.AckPolicy.EXPLICIT,
        ack_wait=pool.ack_wait_s,
        # unbounded here: the worker decides by the delivery count (the pool's maxDeliver-th
        # is dead-lettered), so a worker killed while dead-lettering leaves it delivered again
        max_deliver=-1,
        max_ack_pending=-1,
    )


__all__ = [
    "DEAD_STREAM",
    "MAX_PAYLOAD_BYTES",
    "STREAM",
    "WORKERS_BUCKET",
    "Shard",
    "connect",
    "consumer",
    "decode",
    "encode_ref",
    "encode_rows",
    "ensure_queues",
    "subject",
    "task_row",
    "workers_bucket",
]
