"""Shard payloads through the object store on a real cluster: a nats-server of the test's own
(its default max_payload of 1 MiB refuses any message larger), PostgreSQL, and moto's S3 API
on loopback. A 2 MiB sample travels by reference and is graded as an embedded run grades it;
a payload missing from the bucket, or altered in it, settles its shard's tasks as infrastructure
errors naming the cause, and the run completes."""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalsi.cluster import ClusterConfig, ClusterDispatch, PoolConfig, Worker
from evalsi.core import UserError
from evalsi.runs import execute_run
from evalsi.specs import run_spec_from_dict
from evalsi.store import ObjectRef, ObjectStore, ObjectStoreConfig, SqlStore, shard_counts
from tests.support.nats_server import NatsServer
from tests.support.registry import BUILTINS

BIG = 2 * 1024 * 1024
N = 30  # small samples besides the big one
SEEN: dict[str, str] = {}  # question id -> sha256 of the input the target was called with


def answer(question: str) -> str:
    key = question[:8] if len(question) > 100 else question
    SEEN[key] = hashlib.sha256(question.encode()).hexdigest()
    return "big" if len(question) >= BIG else f"answer-{question.split('-')[1]}"


@pytest.fixture(autouse=True)
def _aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")


@pytest.fixture
def nats(tmp_path: Path) -> Iterator[NatsServer]:
    with NatsServer(tmp_path / "js") as server:
        yield server


@pytest.fixture
def bucket(s3_url: str) -> str:
    import boto3  # type: ignore[import-untyped]

    name = "evalsi-" + uuid.uuid4().hex[:16]
    boto3.client("s3", endpoint_url=s3_url, region_name="us-east-1").create_bucket(Bucket=name)
    return name


def objects(s3_url: str, bucket: str, prefix: str = "evalsi/") -> ObjectStore:
    return ObjectStore(
        ObjectStoreConfig(bucket=bucket, endpoint=s3_url, region="us-east-1", prefix=prefix)
    )


def write_data(path: Path) -> Path:
    rows = [{"id": f"q-{i}", "input": f"q-{i}", "reference": f"answer-{i}"} for i in range(N)]
    big = "bigbig-0" + "x" * (BIG - 8)  # its first 8 characters name it in SEEN
    rows.insert(N // 2, {"id": "big", "input": big, "reference": "big"})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def spec_doc(data: Path) -> dict[str, Any]:
    return {
        "apiVersion": "evals.si/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "large-payloads"},
        "spec": {
            "target": {"python": f"{__name__}:answer"},
            "dataset": {"path": str(data)},
            "evaluators": [{"ref": "exact-match"}],
            "maxConcurrency": 4,
        },
    }


def metrics(result: Any) -> list[dict[str, Any]]:
    return [{k: v for k, v in m.to_dict().items() if k != "run_id"} for m in result.metrics]


async def clustered(
    doc: dict[str, Any], cfg: ClusterConfig, db: SqlStore, owner: ObjectStore, worker: ObjectStore
) -> Any:
    stop = asyncio.Event()
    crew = [
        asyncio.create_task(
            Worker(cfg, "default", db, registry=BUILTINS, name=f"w{i}", objects=worker).run(stop)
        )
        for i in range(2)
    ]
    try:
        dispatch = ClusterDispatch(cfg, db, objects=owner)
        return await execute_run(
            run_spec_from_dict(doc), store=db, registry=BUILTINS, dispatch=dispatch
        )
    finally:
        stop.set()
        await asyncio.gather(*crew)


def config(nats: NatsServer) -> ClusterConfig:
    return ClusterConfig(nats=nats.url, pools={"default": PoolConfig(max_deliver=3)}, shard_size=8)


def test_a_2_mib_sample_travels_by_reference_and_scores_as_embedded(
    tmp_path: Path, pg_url: str, nats: NatsServer, s3_url: str, bucket: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    doc = spec_doc(write_data(tmp_path / "qa.jsonl"))
    SEEN.clear()
    embedded = asyncio.run(
        execute_run(run_spec_from_dict(doc), store=tmp_path / "e.db", registry=BUILTINS)
    )
    expected_inputs = dict(SEEN)
    store = objects(s3_url, bucket)
    stored: list[ObjectRef] = []
    put = store.put

    def recording_put(data: bytes, space: str) -> tuple[ObjectRef, bool]:
        ref, created = put(data, space)
        stored.append(ref)
        return ref, created

    monkeypatch.setattr(store, "put", recording_put)
    SEEN.clear()
    db = SqlStore.open(pg_url)
    try:
        result = asyncio.run(clustered(doc, config(nats), db, store, store))
        assert result.status == embedded.status == "done"
        assert result.tasks == embedded.tasks == {"ok": N + 1}
        assert metrics(result) == metrics(embedded)
        assert expected_inputs == SEEN  # the big input reached the target whole
        # only the shard holding the big sample went through the store (the others, under the
        # threshold, inline), and it was removed once done
        assert len(stored) == 1
        assert stored[0].size > BIG
        assert stored[0].key.startswith(f"evalsi/payloads/{result.run_id}/sha256-")
        assert store.hashes(f"payloads/{result.run_id}") == []
        # 15 samples in shards of 8 and 7, the big one alone (over a shard's 512 KiB), 8 and 7
        assert shard_counts(db, result.run_id) == {"done": (5, N + 1)}
    finally:
        db.close()
        store.close()


def test_a_missing_payload_settles_its_tasks_as_infra_errors(
    tmp_path: Path, pg_url: str, nats: NatsServer, s3_url: str, bucket: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The object is gone from the bucket before a worker reads it (a lifecycle rule, an
    operator): no delivery can fix that, so the shard is settled at once, not retried."""
    doc = spec_doc(write_data(tmp_path / "qa.jsonl"))
    store = objects(s3_url, bucket)
    put = store.put

    def put_then_lose(data: bytes, space: str) -> tuple[ObjectRef, bool]:
        ref, created = put(data, space)
        store.delete(ref.key)
        return ref, created

    monkeypatch.setattr(store, "put", put_then_lose)
    db = SqlStore.open(pg_url)
    try:
        result = asyncio.run(clustered(doc, config(nats), db, store, store))
        assert result.status == "done"
        assert result.tasks == {"ok": N, "infra_error": 1}
        [lost] = [o for o in db.iter_outputs(result.run_id) if o.status == "infra_error"]
        assert (lost.record_id, lost.kind) == ("big", "payload")
        assert "no such object" in (lost.error or "")
        counts = shard_counts(db, result.run_id)
        assert counts["dead"] == (1, 1)
    finally:
        db.close()
        store.close()


def test_an_altered_payload_is_refused_by_its_hash(
    tmp_path: Path, pg_url: str, nats: NatsServer, s3_url: str, bucket: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    doc = spec_doc(write_data(tmp_path / "qa.jsonl"))
    store = objects(s3_url, bucket)
    put = store.put

    def put_then_alter(data: bytes, space: str) -> tuple[ObjectRef, bool]:
        """Stored, then overwritten in the bucket with the same length (a forger's edit)."""
        ref, created = put(data, space)
        forged = data.replace(b"xxxx", b"yyyy", 1)
        store.client.put_object(Bucket=bucket, Key=ref.key, Body=forged)
        return ref, created

    monkeypatch.setattr(store, "put", put_then_alter)
    db = SqlStore.open(pg_url)
    try:
        result = asyncio.run(clustered(doc, config(nats), db, store, store))
        assert result.status == "done"
        assert result.tasks == {"ok": N, "infra_error": 1}
        [lost] = [o for o in db.iter_outputs(result.run_id) if o.status == "infra_error"]
        assert lost.kind == "payload"
        assert "do not hash to the sha256" in (lost.error or "")
    finally:
        db.close()
        store.close()


def test_without_an_object_store_the_large_sample_is_refused_naming_the_setting(
    tmp_path: Path, pg_url: str, nats: NatsServer
) -> None:
    doc = spec_doc(write_data(tmp_path / "qa.jsonl"))
    db = SqlStore.open(pg_url)
    try:
        dispatch = ClusterDispatch(config(nats), db)
        spec = run_spec_from_dict(doc)
        with pytest.raises(UserError) as caught:
            asyncio.run(execute_run(spec, store=db, registry=BUILTINS, dispatch=dispatch))
        assert caught.value.message.startswith("sample big is 2,097,")
        assert "without an object store" in caught.value.message
        assert "objectStore:" in (caught.value.hint or "")
    finally:
        db.close()
