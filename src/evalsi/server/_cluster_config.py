"""The scale-out sections of ``evalsi.yaml``: ``cluster:`` (NATS JetStream work queues, a
user-facing contract) and ``objectStore:`` (an S3-compatible bucket the replicas and workers
share).

```yaml
cluster:
  nats: nats://nats:4222
  pools: {default: {concurrency: 4}}
objectStore:
  endpoint: http://minio:9000           # absent: AWS's endpoint for the region
  bucket: evalsi                        # required; created by the operator, never by evalsi
  prefix: evalsi/                       # every key starts with it
  region: us-east-1
  accessKeyRef: env:S3_ACCESS_KEY       # secret references, both or neither (neither:
  secretKeyRef: file:/run/secrets/s3    #   boto3's chain: environment, profile, role)
  payloadThreshold: 524288              # shard messages larger than this go by reference
```

``objectStore:`` is a section of its own, not a key of ``cluster:``: datasets and bundles use
it on a server without workers too (decision 0018). ``open_object_store`` resolves the secret
references and asks the bucket once, so a wrong endpoint, bucket or key stops ``evalsi serve``
and ``evalsi worker`` at start, naming the setting.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

from evalsi.cluster import DEFAULT_POOL, ClusterConfig, PoolConfig
from evalsi.core import UserError
from evalsi.server._config_checks import Problems, as_duration, as_int, as_mapping, as_text, show
from evalsi.store import ObjectStore, ObjectStoreConfig

_POOL = {
    "concurrency": ("concurrency", 1, 1024),
    "maxPending": ("max_pending", 1, 100_000),
    "maxDeliver": ("max_deliver", 2, 100),
}
_NATS_URL = re.compile(r"(nats|tls)://[^\s/]+")
_POOL_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")


def cluster_section(p: Problems, value: Any, store: str) -> ClusterConfig | None:
    """``cluster: {nats, shardSize, pools: {NAME: {concurrency, maxPending, ackWait,
    maxDeliver}}}``: a run's tasks queued on NATS JetStream for ``evalsi worker`` processes,
    which write to the same PostgreSQL store."""
    if value is None:
        return None
    section = as_mapping(p, "cluster", value, ("nats", "shardSize", "pools", "leaseTtl"))
    nats = as_text(p, "cluster.nats", section.get("nats"))
    if nats is None:
        p.bad("cluster", "missing required field 'nats' (nats://HOST:4222)")
    elif not _NATS_URL.fullmatch(nats):
        p.bad("cluster.nats", f"expected nats://HOST:PORT or tls://HOST:PORT, got {show(nats)}")
    if not store.startswith("postgresql"):
        p.bad(
            "cluster",
            "workers on other machines write to the store: set storage.postgres (a cluster "
            "cannot share a SQLite file)",
        )
    shard_size = as_int(p, "cluster", section, "shardSize", 1, 10_000, 100)
    lease = as_duration(p, "cluster.leaseTtl", section.get("leaseTtl"), 90.0)
    if not 3 <= lease <= 3600:
        p.bad("cluster.leaseTtl", "expected from 3s to 1h")
    pools: dict[str, PoolConfig] = {}
    raw = section.get("pools")
    if raw is None:
        raw = {DEFAULT_POOL: {}}
    if not isinstance(raw, dict):
        p.bad("cluster.pools", f"expected a mapping of pool names to settings, got {show(raw)}")
        raw = {}
    elif not raw:
        p.bad("cluster.pools", "expected at least one pool (omit pools: for the default one)")
    for name, settings in raw.items():
        at = f"cluster.pools.{name}"
        if not isinstance(name, str) or not _POOL_NAME.fullmatch(name):
            p.bad("cluster.pools", f"expected a pool name (a-z, 0-9, '-', '_'), got {show(name)}")
            continue
        pool = as_mapping(p, at, settings, (*_POOL, "ackWait"))
        chosen = {
            field: as_int(p, at, pool, key, lo, hi, getattr(PoolConfig(), field))
            for key, (field, lo, hi) in _POOL.items()
        }
        ack_wait = as_duration(p, f"{at}.ackWait", pool.get("ackWait"), PoolConfig().ack_wait_s)
        if not 1 <= ack_wait <= 3600:
            p.bad(f"{at}.ackWait", "expected from 1s to 1h")
        pools[name] = PoolConfig(name=name, ack_wait_s=ack_wait, **chosen)
    if not pools:
        return None
    return ClusterConfig(nats=nats or "", pools=pools, shard_size=shard_size, lease_ttl_s=lease)


_OBJECT_STORE = (
    "endpoint",
    "bucket",
    "prefix",
    "region",
    "accessKeyRef",
    "secretKeyRef",
    "payloadThreshold",
)
# S3's rule for bucket names (3-63 characters: lower-case letters, digits, '.', '-')
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_PREFIX = re.compile(r"[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)*/?")
_REF = re.compile(r"(env:[A-Za-z_][A-Za-z0-9_]*|file:\S.*)")
_DEFAULT = ObjectStoreConfig(bucket="-")  # the defaults of the optional fields
MIN_THRESHOLD = 1024
MAX_THRESHOLD = 1024 * 1024  # NATS's default max_payload: a larger message is refused there


def object_store_section(p: Problems, value: Any) -> ObjectStoreConfig | None:
    """``objectStore: {endpoint, bucket, prefix, region, accessKeyRef, secretKeyRef,
    payloadThreshold}``; None when absent."""
    if value is None:
        return None
    at = "objectStore"
    section = as_mapping(p, at, value, _OBJECT_STORE)
    if not section and isinstance(value, dict):
        p.bad(at, "missing required field 'bucket'")
        return None
    bucket = as_text(p, f"{at}.bucket", section.get("bucket"))
    if bucket is None and "bucket" not in section:
        p.bad(at, "missing required field 'bucket'")
    elif bucket is not None and (not _BUCKET.fullmatch(bucket) or ".." in bucket):
        p.bad(f"{at}.bucket", f"expected an S3 bucket name (3-63 of a-z, 0-9, '.', '-'), got "
                              f"{show(bucket)}")  # fmt: skip
    endpoint = _endpoint(p, f"{at}.endpoint", section.get("endpoint"))
    prefix = as_text(p, f"{at}.prefix", section.get("prefix"))
    if prefix is not None and (not _PREFIX.fullmatch(prefix) or ".." in prefix.split("/")):
        p.bad(f"{at}.prefix", f"expected a key prefix such as evalsi/ (letters, digits, '.', "
                              f"'_', '-', '/'; no leading '/'), got {show(prefix)}")  # fmt: skip
    region = as_text(p, f"{at}.region", section.get("region")) or ""
    refs = {}
    for key in ("accessKeyRef", "secretKeyRef"):
        ref = as_text(p, f"{at}.{key}", section.get(key))
        if ref is not None and not _REF.fullmatch(ref):
            p.bad(f"{at}.{key}", f"expected a secret reference env:NAME or file:PATH, got "
                                 f"{show(ref)}")  # fmt: skip
        refs[key] = ref or ""
    if bool(refs["accessKeyRef"]) != bool(refs["secretKeyRef"]):
        p.bad(at, "set accessKeyRef and secretKeyRef together (or neither, for the AWS "
                  "credentials of the environment)")  # fmt: skip
    threshold = as_int(p, at, section, "payloadThreshold", MIN_THRESHOLD, MAX_THRESHOLD,
                       _DEFAULT.payload_threshold)  # fmt: skip
    if bucket is None:
        return None
    return ObjectStoreConfig(
        bucket=bucket,
        endpoint=endpoint or "",
        prefix=_slashed(prefix) if prefix else _DEFAULT.prefix,
        region=region,
        access_key_ref=refs["accessKeyRef"],
        secret_key_ref=refs["secretKeyRef"],
        payload_threshold=threshold,
    )


def _endpoint(p: Problems, at: str, value: Any) -> str | None:
    """An http(s) URL of the S3 service, without a path (the bucket is its own setting)."""
    text = as_text(p, at, value)
    if text is None:
        return None
    url = urllib.parse.urlsplit(text)
    try:
        url.port  # noqa: B018 (parses it)
    except ValueError:
        p.bad(at, f"expected a port 1-65535, got {show(text)}")
        return None
    if url.scheme not in ("http", "https") or not url.hostname:
        p.bad(at, f"expected an http(s) URL such as http://minio:9000, got {show(text)}")
        return None
    if url.path not in ("", "/") or url.query or url.fragment:
        p.bad(at, f"expected the service's URL without a path (the bucket is objectStore."
                  f"bucket), got {show(text)}")  # fmt: skip
        return None
    return f"{url.scheme}://{url.netloc}"


def _slashed(prefix: str) -> str:
    return prefix if prefix.endswith("/") else prefix + "/"


def open_object_store(
    config: ObjectStoreConfig | None, *, check: bool = True
) -> ObjectStore | None:
    """The configured store with its credentials resolved (``env:``/``file:`` references, the
    same resolver as run specs' secrets); with ``check``, the bucket asked once. A
    ``UserError`` naming the setting when a reference, the endpoint, the bucket or the
    credentials are wrong."""
    if config is None:
        return None
    from evalsi.connectors import resolve_secret

    store = ObjectStore(config, lambda ref: resolve_secret(ref).reveal())
    if check:
        try:
            store.check()
        except UserError:
            store.close()
            raise
    return store


__all__ = ["cluster_section", "object_store_section", "open_object_store"]
