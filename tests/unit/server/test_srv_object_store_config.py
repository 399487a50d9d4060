"""The ``objectStore`` section of evalsi.yaml: the bucket, endpoint, prefix, credentials by
reference and the payload threshold; every bad field named with what was expected. Opening it
resolves the references and names the setting a missing secret belongs to."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalsi.core import SpecError, UserError
from evalsi.server._cluster_config import open_object_store
from evalsi.server._config import load_config
from evalsi.store import ObjectStoreConfig


def _load(tmp_path: Path, text: str) -> ObjectStoreConfig | None:
    path = tmp_path / "evalsi.yaml"
    path.write_text(text, encoding="utf-8")
    return load_config(path).object_store


def _refusal(tmp_path: Path, text: str) -> str:
    with pytest.raises(SpecError) as e:
        _load(tmp_path, text)
    return str(e.value)


def test_no_section_no_object_store(tmp_path: Path) -> None:
    assert _load(tmp_path, "dataDir: data\n") is None


def test_a_bucket_alone_takes_the_defaults(tmp_path: Path) -> None:
    assert _load(tmp_path, "objectStore: {bucket: evalsi-data}\n") == ObjectStoreConfig(
        bucket="evalsi-data", prefix="evalsi/", payload_threshold=512 * 1024
    )


def test_every_field(tmp_path: Path) -> None:
    found = _load(
        tmp_path,
        "objectStore:\n  endpoint: http://127.0.0.1:9000/\n  bucket: team.evals\n"
        "  prefix: prod/evalsi\n  region: eu-west-1\n  accessKeyRef: env:S3_KEY\n"
        "  secretKeyRef: file:/run/secrets/s3\n  payloadThreshold: 65536\n",
    )
    assert found == ObjectStoreConfig(
        bucket="team.evals",
        endpoint="http://127.0.0.1:9000",
        prefix="prod/evalsi/",
        region="eu-west-1",
        access_key_ref="env:S3_KEY",
        secret_key_ref="file:/run/secrets/s3",
        payload_threshold=65536,
    )


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ("{}", "objectStore: missing required field 'bucket'"),
        ("{endpoint: 'http://x:9000'}", "objectStore: missing required field 'bucket'"),
        ("evalsi", 'objectStore: expected a mapping, got "evalsi"'),
        ("{bucket: Evalsi_Data}", "objectStore.bucket: expected an S3 bucket name"),
        ("{bucket: ab}", "objectStore.bucket: expected an S3 bucket name"),
        ("{bucket: 7}", "objectStore.bucket: expected a non-empty string, got 7"),
        ("{bucket: b1b, endpoint: 'minio:9000'}", "objectStore.endpoint: expected an http(s) URL"),
        ("{bucket: b1b, endpoint: 'ftp://minio:9000'}", "objectStore.endpoint: expected an http"),
        ("{bucket: b1b, endpoint: 'http://minio:99999'}", "objectStore.endpoint: expected a port"),
        (
            "{bucket: b1b, endpoint: 'http://minio:9000/b1b'}",
            "objectStore.endpoint: expected the service's URL without a path",
        ),
        ("{bucket: b1b, prefix: /abs}", "objectStore.prefix: expected a key prefix"),
        ("{bucket: b1b, prefix: 'a/../b'}", "objectStore.prefix: expected a key prefix"),
        (
            "{bucket: b1b, accessKeyRef: 'AKIA123', secretKeyRef: 'env:S'}",
            "objectStore.accessKeyRef: expected a secret reference env:NAME or file:PATH",
        ),
        ("{bucket: b1b, accessKeyRef: 'env:K'}", "objectStore: set accessKeyRef and secretKeyRef"),
        ("{bucket: b1b, payloadThreshold: 10}", "objectStore.payloadThreshold: expected an int"),
        ("{bucket: b1b, payloadThreshold: 4194304}", "objectStore.payloadThreshold: expected"),
        ("{bucket: b1b, endpiont: 'http://x:9000'}", "objectStore.endpiont: unknown field"),
    ],
)
def test_a_bad_field_is_named(tmp_path: Path, section: str, expected: str) -> None:
    assert expected in _refusal(tmp_path, f"objectStore: {section}\n")


def test_the_cluster_section_keeps_its_keys(tmp_path: Path) -> None:
    """Moving the section's parsing beside objectStore changed nothing of what it reads."""
    path = tmp_path / "evalsi.yaml"
    path.write_text(
        "storage: {postgres: {dsn: 'postgresql://u@127.0.0.1:5432/db'}}\n"
        "cluster: {nats: 'nats://127.0.0.1:4222', shardSize: 7}\n"
        "objectStore: {bucket: shared-bucket}\n",
        encoding="utf-8",
    )
    config = load_config(path)
    assert config.cluster is not None
    assert config.cluster.shard_size == 7
    assert config.object_store is not None
    assert config.object_store.bucket == "shared-bucket"


def test_a_missing_secret_names_its_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVALSI_TEST_S3_SECRET", raising=False)
    monkeypatch.setenv("EVALSI_TEST_S3_KEY", "AKIA")
    config = ObjectStoreConfig(
        bucket="b1b",
        endpoint="http://127.0.0.1:1",
        access_key_ref="env:EVALSI_TEST_S3_KEY",
        secret_key_ref="env:EVALSI_TEST_S3_SECRET",
    )
    with pytest.raises(UserError) as caught:
        open_object_store(config, check=False)
    assert caught.value.message == (
        "objectStore.secretKeyRef: secret 'env:EVALSI_TEST_S3_SECRET': environment variable "
        "EVALSI_TEST_S3_SECRET is not set"
    )


def test_none_configured_opens_nothing() -> None:
    assert open_object_store(None) is None
