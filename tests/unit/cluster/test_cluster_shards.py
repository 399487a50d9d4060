"""How a run's tasks are cut into shards: by count and by bytes, a sample too large for any
shard refused naming it, and every shard message decoded back to the same tasks."""

from __future__ import annotations

from typing import Any

import pytest

from evalsi.cluster import ClusterConfig, ClusterDispatch
from evalsi.cluster._queue import decode, encode_rows
from evalsi.core import Content, Record, UserError


def _tasks(n: int, text: str = "q") -> list[tuple[int, int, Record]]:
    return [(i, 0, Record(id=f"r{i}", input=Content.of_text(text))) for i in range(n)]


def _cut(tasks: list[Any], **config: Any) -> list[list[bytes]]:
    dispatch = ClusterDispatch(ClusterConfig(nats="nats://127.0.0.1:1", **config), None)  # type: ignore[arg-type]
    return list(dispatch._cut(iter(tasks)))


@pytest.mark.parametrize(("n", "sizes"), [(0, []), (1, [1]), (4, [4]), (5, [4, 1]), (8, [4, 4])])
def test_shards_hold_at_most_shard_size_tasks(n: int, sizes: list[int]) -> None:
    assert [len(s) for s in _cut(_tasks(n), shard_size=4)] == sizes


def test_a_shard_is_cut_before_it_passes_its_byte_limit() -> None:
    shards = _cut(_tasks(10, "x" * 1000), shard_size=100, max_shard_bytes=3500)
    assert [len(s) for s in shards] == [3, 3, 3, 1]
    assert all(sum(len(row) for row in s) <= 3500 for s in shards)


def test_a_sample_larger_than_a_shard_is_refused_by_name() -> None:
    """Without an object store; the message points to the setting that lets it through."""
    with pytest.raises(UserError, match=r"sample r0 is .* bytes as a task; a shard message holds "
                       r"at most 4,096 without an object store") as caught:  # fmt: skip
        _cut(_tasks(1, "x" * 5000), max_shard_bytes=4096)
    assert "objectStore:" in (caught.value.hint or "")


def test_with_an_object_store_a_large_sample_gets_a_shard_of_its_own() -> None:
    tasks = _tasks(2, "x" * 100) + _tasks(1, "y" * 5000) + _tasks(2, "z" * 100)
    dispatch = ClusterDispatch(
        ClusterConfig(nats="nats://127.0.0.1:1", max_shard_bytes=4096),
        None,  # type: ignore[arg-type]
        objects=object(),  # type: ignore[arg-type]  # only whether one is configured is read
    )
    assert [len(s) for s in dispatch._cut(iter(tasks))] == [2, 1, 2]


def test_a_shard_sent_by_reference_decodes_to_its_keys() -> None:
    from evalsi.cluster._queue import encode_ref
    from evalsi.store import ObjectRef

    [rows] = _cut(_tasks(3))
    ref = ObjectRef("evalsi/payloads/run-1/sha256-" + "a" * 64, "a" * 64, 1234)
    shard = decode(encode_ref("run-1", "s-0", ref, rows))
    assert (shard.ref, shard.tasks) == (ref, [])
    assert shard.keys == [(0, 0, "r0"), (1, 0, "r1"), (2, 0, "r2")]


@pytest.mark.parametrize(
    "ref",
    [{}, {"key": "k", "sha256": "xyz", "size": 1}, {"key": "k", "sha256": "a" * 64, "size": -1}],
)
def test_a_bad_reference_is_not_a_shard(ref: dict[str, Any]) -> None:
    import orjson

    data = orjson.dumps({"run": "r", "shard": "s", "ref": ref, "index": []})
    with pytest.raises(UserError, match="not a shard message"):
        decode(data)


def test_a_shard_message_decodes_to_the_same_tasks() -> None:
    tasks = _tasks(3, 'quote " and é')
    [rows] = _cut(tasks)
    shard = decode(encode_rows("run-1", "s-0", rows))
    assert (shard.run_id, shard.shard_id) == ("run-1", "s-0")
    assert [(s, t, r.id, r.input.text) for s, t, r in shard.tasks] == [
        (s, t, r.id, r.input.text) for s, t, r in tasks
    ]


@pytest.mark.parametrize("data", [b"", b"{}", b"[1]", b'{"run": "r", "shard": "s", "tasks": 5}'])
def test_what_is_not_a_shard_is_a_clear_error(data: bytes) -> None:
    with pytest.raises(UserError, match="not a shard message"):
        decode(data)


def test_a_worker_without_an_object_store_refuses_a_shard_sent_by_reference() -> None:
    """Released (raised), not settled: a worker of the pool that has the store may take it."""
    import asyncio

    from evalsi.cluster import Worker
    from evalsi.cluster._queue import encode_ref
    from evalsi.evaluators import Registry
    from evalsi.store import ObjectRef

    [rows] = _cut(_tasks(2))
    ref = ObjectRef("evalsi/payloads/run-1/sha256-" + "b" * 64, "b" * 64, 99)
    shard = decode(encode_ref("run-1", "s-0", ref, rows))
    worker = Worker(ClusterConfig(nats="nats://127.0.0.1:1"), "default", None, registry=Registry())  # type: ignore[arg-type]
    with pytest.raises(UserError, match="no objectStore: section") as caught:
        asyncio.run(worker._fetch(shard, ref))
    assert "--config" in (caught.value.hint or "")
