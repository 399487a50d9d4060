"""The ``cluster`` section of evalsi.yaml: the NATS URL, the pools and their bounds, and the
PostgreSQL store a cluster needs; every bad field named."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalsi.cluster import ClusterConfig, PoolConfig
from evalsi.core import SpecError
from evalsi.server._config import load_config

PG = "storage: {postgres: {dsn: 'postgresql://u@127.0.0.1:5432/db'}}\n"


def _load(tmp_path: Path, text: str) -> ClusterConfig | None:
    path = tmp_path / "evalsi.yaml"
    path.write_text(text, encoding="utf-8")
    return load_config(path).cluster


def _refusal(tmp_path: Path, text: str) -> str:
    with pytest.raises(SpecError) as e:
        _load(tmp_path, text)
    return str(e.value)


def test_no_section_no_cluster(tmp_path: Path) -> None:
    assert _load(tmp_path, PG) is None


def test_the_default_pool_when_none_is_named(tmp_path: Path) -> None:
    cluster = _load(tmp_path, PG + "cluster: {nats: 'nats://127.0.0.1:4222'}\n")
    assert cluster == ClusterConfig(nats="nats://127.0.0.1:4222")
    assert cluster.run_pool == PoolConfig()


def test_every_field(tmp_path: Path) -> None:
    cluster = _load(
        tmp_path,
        PG + "cluster:\n  nats: tls://nats.internal:4222\n  shardSize: 25\n  leaseTtl: 20s\n"
        "  pools:\n"
        "    judge: {concurrency: 16, maxPending: 8, ackWait: 2m, maxDeliver: 3}\n"
        "    cpu: {}\n",
    )
    assert cluster is not None
    assert cluster.shard_size == 25
    assert cluster.lease_ttl_s == 20.0
    assert cluster.pools["judge"] == PoolConfig("judge", 16, 8, 120.0, 3)
    assert cluster.pools["cpu"] == PoolConfig("cpu")
    assert cluster.run_pool.name == "judge"  # no `default`: the first pool


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ("{}", "cluster: missing required field 'nats'"),
        ("{nats: 'http://x:4222'}", "cluster.nats: expected nats://HOST:PORT"),
        ("{nats: 'nats://x:4222', shardSize: 0}", "cluster.shardSize"),
        ("{nats: 'nats://x:4222', pools: []}", "cluster.pools: expected a mapping"),
        ("{nats: 'nats://x:4222', pools: {}}", "cluster.pools: expected at least one pool"),
        ("{nats: 'nats://x:4222', pools: {'Bad Name': {}}}", "expected a pool name"),
        ("{nats: 'nats://x:4222', pools: {a: {maxDeliver: 1}}}", "cluster.pools.a.maxDeliver"),
        ("{nats: 'nats://x:4222', pools: {a: {ackWait: 2h}}}", "cluster.pools.a.ackWait"),
        ("{nats: 'nats://x:4222', pools: {a: {speed: 3}}}", "unknown field 'speed'"),
        ("{nats: 'nats://x:4222', queue: x}", "unknown field 'queue'"),
        ("{nats: 'nats://x:4222', leaseTtl: 1s}", "cluster.leaseTtl: expected from 3s to 1h"),
    ],
)
def test_bad_fields_are_named(tmp_path: Path, section: str, expected: str) -> None:
    assert expected in _refusal(tmp_path, PG + f"cluster: {section}\n")


def test_a_cluster_needs_postgres(tmp_path: Path) -> None:
    message = _refusal(tmp_path, "cluster: {nats: 'nats://127.0.0.1:4222'}\n")
    assert "set storage.postgres" in message
