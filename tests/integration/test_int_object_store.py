"""The object store against a real S3 API on loopback (moto in server mode): content-addressed
round trips, a conditional create that never replaces, a tampered object refused by its hash,
the wrong bucket, endpoint or credentials named; two servers sharing a dataset version through
the bucket; evidence bundles archived and fetched back whole."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from google.protobuf import json_format

import evalsi
from evalsi._proto.evalsi.v1alpha1 import dataset_service_pb2 as dpb
from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as rpb
from evalsi.core import NotFoundError, UserError
from evalsi.evidence import (
    archive_bundle,
    archived_bundles,
    fetch_bundle,
    validate_bundle,
    write_bundle,
)
from evalsi.server._cluster_config import open_object_store
from evalsi.server._config import load_config
from evalsi.server._dataset_files import DatasetFiles
from evalsi.server._datasets import DatasetHandler
from evalsi.server._runs import RunHandler
from evalsi.server._state import ServerState
from evalsi.store import ObjectError, ObjectRef, ObjectStore, ObjectStoreConfig, SqlStore
from tests.support.server_state import free_port, server_state

ROWS = [{"id": f"q{i}", "input": f"q{i}", "reference": f"a{i}"} for i in range(5)]


@pytest.fixture(autouse=True)
def _aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto takes any key; boto3 wants one to sign with (the chain used without references)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")


def new_bucket(s3_url: str) -> str:
    import boto3  # type: ignore[import-untyped]

    name = "evalsi-" + uuid.uuid4().hex[:16]
    boto3.client("s3", endpoint_url=s3_url, region_name="us-east-1").create_bucket(Bucket=name)
    return name


@pytest.fixture
def objects(s3_url: str) -> Iterator[ObjectStore]:
    store = ObjectStore(
        ObjectStoreConfig(bucket=new_bucket(s3_url), endpoint=s3_url, region="us-east-1")
    )
    yield store
    store.close()


# -- the store itself --------------------------------------------------------------------------
def test_a_round_trip_is_content_addressed(objects: ObjectStore) -> None:
    data = os.urandom(3 * 1024 * 1024 + 7)  # more than one read chunk
    ref, created = objects.put(data, "payloads/run-1")
    assert created
    assert ref.key == objects.key_of("payloads/run-1", ref.sha256)
    assert ref.key.startswith("evalsi/payloads/run-1/sha256-")
    assert ref.size == len(data)
    assert objects.get(ref) == data
    assert objects.exists(ref.key)
    assert objects.hashes("payloads/run-1") == [ref.sha256]
    objects.delete(ref.key)
    assert not objects.exists(ref.key)
    objects.delete(ref.key)  # gone already: nothing to do


def test_a_conditional_create_twice_writes_once_and_never_replaces(objects: ObjectStore) -> None:
    first, created = objects.put(b"version one", "datasets/default/qa")
    again, created_again = objects.put(b"version one", "datasets/default/qa")
    assert (created, created_again) == (True, False)
    assert again == first
    # a write under the same key with other bytes (If-None-Match: *) is refused by S3 itself
    import botocore.exceptions  # type: ignore[import-untyped]

    with pytest.raises(botocore.exceptions.ClientError, match="PreconditionFailed"):
        objects.client.put_object(
            Bucket=objects.config.bucket, Key=first.key, Body=b"other", IfNoneMatch="*"
        )
    assert objects.get(first) == b"version one"


def test_a_tampered_object_is_refused_by_its_hash(objects: ObjectStore, tmp_path: Path) -> None:
    ref, _ = objects.put(b"the real bytes", "payloads/run-2")
    objects.client.put_object(Bucket=objects.config.bucket, Key=ref.key, Body=b"the fake bytes")
    with pytest.raises(ObjectError) as caught:
        objects.get(ref)
    assert caught.value.kind == "corrupt"
    assert "do not hash to the sha256" in caught.value.message
    target = tmp_path / "copy"
    with pytest.raises(ObjectError, match="do not hash"):
        objects.download("payloads/run-2", ref.sha256, target, max_bytes=1 << 20)
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []  # no partial file left beside it


def test_a_truncated_or_oversized_object_is_refused(objects: ObjectStore) -> None:
    ref, _ = objects.put(b"0123456789", "payloads/run-3")
    objects.client.put_object(Bucket=objects.config.bucket, Key=ref.key, Body=b"01234")
    with pytest.raises(ObjectError, match="5 bytes stored, 10 expected") as caught:
        objects.get(ref)
    assert caught.value.kind == "corrupt"
    with pytest.raises(ObjectError, match="over the limit of 4") as caught:
        objects.get(ref, max_bytes=4)
    assert caught.value.kind == "too_large"


def test_a_missing_object_is_named(objects: ObjectStore) -> None:
    ghost = ObjectRef(objects.key_of("payloads/run-4", "0" * 64), "0" * 64, 3)
    with pytest.raises(ObjectError, match=f"reading {ghost.key}: no such object") as caught:
        objects.get(ghost)
    assert caught.value.kind == "missing"
    assert not objects.exists(ghost.key)


def test_a_missing_bucket_is_named_with_its_setting(s3_url: str) -> None:
    config = ObjectStoreConfig(bucket="no-such-bucket-here", endpoint=s3_url, region="us-east-1")
    with pytest.raises(UserError) as caught:
        open_object_store(config)
    assert caught.value.message == (
        f"objectStore.bucket 'no-such-bucket-here': no such bucket at {s3_url}"
    )
    assert "never creates one" in (caught.value.hint or "")


def test_an_endpoint_that_does_not_answer_is_named() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    config = ObjectStoreConfig(bucket="evalsi", endpoint=url, region="us-east-1")
    with pytest.raises(UserError) as caught:
        open_object_store(config)
    assert caught.value.message.startswith(
        f"objectStore.endpoint {url}: cannot reach the object store"
    )


@pytest.fixture(scope="module")
def s3_with_auth() -> Iterator[str]:
    """A moto server that checks signatures against its own IAM (only the keys it issued)."""
    port = free_port()
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("moto_server")), "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "0"},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _answering(url, proc)
        yield url
    finally:
        proc.kill()
        proc.wait()


def _answering(url: str, proc: subprocess.Popen[bytes]) -> None:
    """Until the server answers at all (with auth on, its answer to GET / is a 403)."""
    import time
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            urllib.request.urlopen(url, timeout=1).close()
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"{url} never answered")


def test_refused_credentials_name_the_key_references(
    s3_with_auth: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("EVALSI_TEST_S3_KEY", "AKIAEVALSINOTAKEY000")
    secret = tmp_path / "s3-secret"
    secret.write_text("not-the-secret\n")
    config = ObjectStoreConfig(
        bucket="evalsi",
        endpoint=s3_with_auth,
        region="us-east-1",
        access_key_ref="env:EVALSI_TEST_S3_KEY",
        secret_key_ref=f"file:{secret}",
    )
    with pytest.raises(UserError) as caught:
        open_object_store(config)
    assert caught.value.message.startswith(
        f"objectStore: s3://evalsi/evalsi/ at {s3_with_auth} refused the credentials ("
    )
    assert "objectStore.accessKeyRef and objectStore.secretKeyRef" in (caught.value.hint or "")
    assert "not-the-secret" not in str(caught.value) + (caught.value.hint or "")


def test_credentials_by_reference_sign_the_requests(
    s3_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("EVALSI_TEST_S3_KEY", "AKIAEXAMPLE")
    (tmp_path / "secret").write_text("example-secret\n")
    bucket = new_bucket_signed(s3_url)
    config = ObjectStoreConfig(
        bucket=bucket,
        endpoint=s3_url,
        region="us-east-1",
        access_key_ref="env:EVALSI_TEST_S3_KEY",
        secret_key_ref=f"file:{tmp_path / 'secret'}",
    )
    store = open_object_store(config)
    assert store is not None
    ref, _ = store.put(b"signed", "payloads/x")
    assert store.get(ref) == b"signed"


def new_bucket_signed(s3_url: str) -> str:
    import boto3

    name = "evalsi-" + uuid.uuid4().hex[:16]
    boto3.client(
        "s3", endpoint_url=s3_url, region_name="us-east-1",
        aws_access_key_id="AKIAEXAMPLE", aws_secret_access_key="example-secret",
    ).create_bucket(Bucket=name)  # fmt: skip
    return name


# -- datasets ----------------------------------------------------------------------------------
def test_a_version_stored_on_one_directory_is_fetched_by_another(
    objects: ObjectStore, tmp_path: Path
) -> None:
    a = DatasetFiles(tmp_path / "a", objects=objects)
    b = DatasetFiles(tmp_path / "b", objects=objects)
    stored = a.create("qa", ROWS)
    with pytest.raises(NotFoundError):
        b.get("qa")  # the latest is per replica: only a named version is looked up
    fetched = b.get("qa", stored.version)
    assert (fetched.version, fetched.rows) == (stored.version, stored.rows)
    assert (tmp_path / "b" / stored.path).read_bytes() == (
        tmp_path / "a" / stored.path
    ).read_bytes()
    assert b.rows(fetched, 0, 10) == ROWS
    assert b.versions("qa") == [fetched]  # kept like one of its own from now on
    # the same rows stored on b too: the conditional create finds them there, nothing clashes
    assert b.create("qa", ROWS).version == stored.version
    # an append on b built on a's version, which b fetched
    appended = b.append("qa", [{"id": "q5", "input": "q5"}], stored.version)
    assert a.get("qa", appended.version).rows == 6
    assert b.fetch_path(stored.path)
    assert not b.fetch_path("qa/sha256-" + "0" * 64 + ".jsonl")  # in neither
    assert not b.fetch_path("../qa/x.jsonl")


def test_a_tampered_dataset_version_is_not_used(objects: ObjectStore, tmp_path: Path) -> None:
    stored = DatasetFiles(tmp_path / "a", objects=objects).create("qa", ROWS)
    key = objects.key_of("datasets/default/qa", stored.version.removeprefix("sha256:"))
    objects.client.put_object(Bucket=objects.config.bucket, Key=key, Body=b'{"id": "forged"}\n')
    b = DatasetFiles(tmp_path / "b", objects=objects)
    with pytest.raises(ObjectError, match="do not hash"):
        b.get("qa", stored.version)
    assert not (tmp_path / "b" / stored.path).exists()


def test_projects_do_not_share_versions(objects: ObjectStore, tmp_path: Path) -> None:
    stored = DatasetFiles(tmp_path / "a", objects=objects, project="team-a").create("qa", ROWS)
    other = DatasetFiles(tmp_path / "b", objects=objects, project="team-b")
    with pytest.raises(NotFoundError, match="nor in the object store"):
        other.get("qa", stored.version)


def _server(tmp: Path, s3_url: str, bucket: str) -> ServerState:
    """A server as `evalsi serve` reads it from an evalsi.yaml of its own."""
    tmp.mkdir()
    (tmp / "evalsi.yaml").write_text(
        f"dataDir: data\nobjectStore: {{endpoint: '{s3_url}', bucket: {bucket}, "
        "region: us-east-1, prefix: shared}\n"
    )
    config = load_config(tmp / "evalsi.yaml")
    return ServerState(config=config, store=SqlStore.open(config.store), registry=evalsi.Registry())


def test_two_servers_share_a_dataset_through_the_bucket(s3_url: str, tmp_path: Path) -> None:
    bucket = new_bucket(s3_url)
    one, two = _server(tmp_path / "one", s3_url, bucket), _server(tmp_path / "two", s3_url, bucket)
    try:
        create = json_format.ParseDict({"name": "qa", "rows": ROWS}, dpb.CreateDatasetRequest())
        stored = asyncio.run(DatasetHandler(one).create_dataset(create, None)).dataset
        # the second server never saw the upload: the version is fetched on first use
        get = dpb.GetDatasetRequest(name="qa", version=stored.version, page_size=10)
        got = asyncio.run(DatasetHandler(two).get_dataset(get, None))
        assert got.dataset.rows == 5
        assert [json_format.MessageToDict(r)["id"] for r in got.rows] == [r["id"] for r in ROWS]
        # and a run spec naming its path on a third replica's view of it
        three = _server(tmp_path / "three", s3_url, bucket)
        try:
            handler = RunHandler.__new__(RunHandler)
            handler.state = three
            path = handler._dataset_path(stored.path, "")
            assert Path(path).read_bytes() == (one.config.datasets_dir / stored.path).read_bytes()
        finally:
            three.store.close()
    finally:
        one.store.close()
        two.store.close()


# -- bundles -----------------------------------------------------------------------------------
def test_a_bundle_is_archived_and_fetched_back_whole(objects: ObjectStore, tmp_path: Path) -> None:
    db = SqlStore.open(str(tmp_path / "runs.db"))
    try:
        rows = [{"id": f"r{i}", "output": "ok", "reference": "ok" if i % 2 else "no"}
                for i in range(6)]  # fmt: skip
        result = evalsi.evaluate(_jsonl(tmp_path, rows), ["exact-match"], store=db)
        written = write_bundle(db, result.run_id, tmp_path / "bundle")
    finally:
        db.close()
    ref = archive_bundle(written.path, result.run_id, objects)
    assert archive_bundle(written.path, result.run_id, objects) == ref  # stored once
    assert archived_bundles(objects, result.run_id) == [ref.sha256]
    count = fetch_bundle(objects, result.run_id, ref.sha256, tmp_path / "fetched")
    assert count == written.files
    for entry in (tmp_path / "bundle").iterdir():
        assert (tmp_path / "fetched" / entry.name).read_bytes() == entry.read_bytes()
    assert validate_bundle(tmp_path / "fetched").valid
    with pytest.raises(UserError, match="not empty"):
        fetch_bundle(objects, result.run_id, ref.sha256, tmp_path / "fetched")


def test_a_bundle_file_altered_in_the_bucket_is_not_fetched(
    objects: ObjectStore, tmp_path: Path
) -> None:
    db = SqlStore.open(str(tmp_path / "runs.db"))
    try:
        result = evalsi.evaluate(_jsonl(tmp_path, [{"id": "r", "output": "a"}]), ["json-valid"],
                                 store=db)  # fmt: skip
        written = write_bundle(db, result.run_id, tmp_path / "bundle")
    finally:
        db.close()
    ref = archive_bundle(written.path, result.run_id, objects)
    scores = tmp_path / "bundle" / "scores.jsonl"
    key = objects.key_of("bundles/files", _sha(scores.read_bytes()))
    objects.client.put_object(Bucket=objects.config.bucket, Key=key, Body=b"{}\n")
    with pytest.raises(ObjectError, match="do not hash"):
        fetch_bundle(objects, result.run_id, ref.sha256, tmp_path / "fetched")
    assert not (tmp_path / "fetched" / "manifest.json").exists()  # never a bundle that looks whole


def test_the_server_archives_the_bundles_it_exports(s3_url: str, tmp_path: Path) -> None:
    bucket = new_bucket(s3_url)
    config = ObjectStoreConfig(bucket=bucket, endpoint=s3_url, region="us-east-1")
    state = server_state(tmp_path, runs=False, object_store=config)
    try:
        data = _jsonl(tmp_path, [{"id": "r", "output": "x"}])
        result = evalsi.evaluate(data, ["json-valid"], store=state.store)
        handler = RunHandler.__new__(RunHandler)
        handler.state = state

        async def export() -> dict[str, bytes]:
            files: dict[str, bytes] = {}
            request = rpb.ExportBundleRequest(id=result.run_id)
            async for part in handler.export_bundle(request, None):  # type: ignore[arg-type]
                files[part.path] = files.get(part.path, b"") + part.data
            return files

        files = asyncio.run(export())
        objects = state.object_store()
        [manifest_sha] = archived_bundles(objects, result.run_id)
        assert manifest_sha == _sha(files["manifest.json"])
        fetch_bundle(objects, result.run_id, manifest_sha, tmp_path / "fetched")
        assert {p.name: p.read_bytes() for p in (tmp_path / "fetched").iterdir()} == files
    finally:
        state.store.close()


def _jsonl(tmp: Path, rows: list[dict[str, str]]) -> str:
    import json

    path = tmp / "data.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _sha(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()
