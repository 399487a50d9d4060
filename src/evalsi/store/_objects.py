"""An S3-compatible object store (``objectStore:`` in ``evalsi.yaml``; boto3, the ``s3`` extra)
for what a cluster's processes share besides the database: shard payloads too large for a
queue message, dataset versions, evidence bundles.

Every object is content-addressed: its key is ``PREFIX SPACE/sha256-HEX``, the hash of its
bytes. A write is a conditional create (``If-None-Match: *``): two replicas storing the same
bytes both succeed and the object is written once; an object is never replaced. A read checks
the hash and a size bound, so a tampered, truncated or oversized object is refused by name, not
used. The bucket is the operator's: it is never created here, and a missing one, refused
credentials or an endpoint that does not answer are errors naming the setting to fix.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalsi.core import RunError, UserError, require_extra

DEFAULT_PREFIX = "evalsi/"
DEFAULT_PAYLOAD_THRESHOLD = 512 * 1024
CHUNK = 1 << 20  # bytes read at a time
HASHED = re.compile(r"[0-9a-f]{64}")
SPACE = re.compile(r"[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)*")
# botocore's codes for refused credentials (AWS, MinIO and moto use these)
_REFUSED = frozenset(
    {
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "AccessDenied",
        "InvalidToken",
        "ExpiredToken",
        "403",
        "Forbidden",
    }
)


@dataclass(frozen=True, slots=True)
class ObjectStoreConfig:
    """The ``objectStore:`` section: where the bucket is and how to sign in.

    ``access_key_ref`` and ``secret_key_ref`` are secret references (``env:NAME``,
    ``file:PATH``), both or neither; neither: boto3's own chain (environment, profile, role).
    ``payload_threshold``: a shard message larger than this travels through the store.
    """

    bucket: str
    endpoint: str = ""  # empty: AWS's own endpoint for the region
    prefix: str = DEFAULT_PREFIX
    region: str = ""
    access_key_ref: str = ""
    secret_key_ref: str = ""
    payload_threshold: int = DEFAULT_PAYLOAD_THRESHOLD
    where: str = "objectStore"  # the configuration place messages name

    @property
    def target(self) -> str:
        at = f" at {self.endpoint}" if self.endpoint else ""
        return f"s3://{self.bucket}/{self.prefix}{at}"


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """A stored object: its key, the sha256 of its bytes (hex) and their length."""

    key: str
    sha256: str
    size: int

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "sha256": self.sha256, "size": self.size}

    @classmethod
    def from_dict(cls, doc: Any) -> ObjectRef:
        """From ``to_dict``'s shape; ``ValueError`` for anything else."""
        if not isinstance(doc, dict):
            raise ValueError("an object reference is a mapping")
        key, digest, size = doc.get("key"), doc.get("sha256"), doc.get("size")
        if not isinstance(key, str) or not key or not isinstance(digest, str):
            raise ValueError("an object reference needs key and sha256")
        if not HASHED.fullmatch(digest) or not isinstance(size, int) or size < 0:
            raise ValueError("an object reference needs a hex sha256 and a size")
        return cls(key, digest, size)


class ObjectError(RunError):
    """An object the work needs is missing, altered, too large, or the store did not answer.

    ``kind`` is ``missing``, ``corrupt`` (hash or size differ from its reference),
    ``too_large``, ``refused`` (credentials, policy, another refusal of the service) or
    ``unavailable`` (a connection failure: the same call may succeed later)."""

    def __init__(self, message: str, *, kind: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.kind = kind


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class ObjectStore:
    """A bucket (and prefix) of an S3-compatible service. Thread-safe (one boto3 client); every
    call blocks, so async callers run it in a thread.

    Example:
        >>> config = ObjectStoreConfig(bucket="evalsi", endpoint="http://127.0.0.1:9000")
        >>> store = ObjectStore(config)  # doctest: +SKIP
        >>> ref, created = store.put(b"rows", "datasets/default/qa")  # doctest: +SKIP
        >>> store.get(ref)  # doctest: +SKIP
        b'rows'
    """

    def __init__(
        self, config: ObjectStoreConfig, secret: Callable[[str], str] | None = None
    ) -> None:
        require_extra("the object store", "s3", "boto3")
        import boto3  # type: ignore[import-untyped]
        from botocore.config import Config

        self.config = config
        keys: dict[str, str] = {}
        if config.access_key_ref and config.secret_key_ref:
            if secret is None:
                raise UserError(f"{config.where}: its key references need a secret resolver")
            for name, field, ref in (
                ("aws_access_key_id", "accessKeyRef", config.access_key_ref),
                ("aws_secret_access_key", "secretKeyRef", config.secret_key_ref),
            ):
                try:
                    keys[name] = secret(ref)
                except UserError as e:
                    raise UserError(f"{config.where}.{field}: {e.message}", hint=e.hint) from None
        self.client: Any = boto3.client(
            "s3",
            endpoint_url=config.endpoint or None,
            region_name=config.region or None,
            config=Config(
                connect_timeout=5,
                read_timeout=60,
                retries={"max_attempts": 3, "mode": "standard"},
                s3={"addressing_style": "path"} if config.endpoint else None,
            ),
            **keys,
        )

    # -- keys -----------------------------------------------------------------------------------
    def key_of(self, space: str, sha256: str) -> str:
        """Where bytes hashing to ``sha256`` live in ``space`` (``payloads/RUN``,
        ``datasets/PROJECT/NAME``, ``bundles``)."""
        if not SPACE.fullmatch(space) or ".." in space.split("/"):
            raise ValueError(f"not an object space: {space!r}")
        if not HASHED.fullmatch(sha256):
            raise ValueError(f"not a sha256: {sha256!r}")
        return f"{self.config.prefix}{space}/sha256-{sha256}"

    # -- calls ----------------------------------------------------------------------------------
    def check(self) -> None:
        """The bucket answers with these credentials (``evalsi serve`` and ``evalsi worker``
        ask at start); a ``UserError`` naming the setting otherwise."""
        try:
            self.client.head_bucket(Bucket=self.config.bucket)
        except Exception as e:  # noqa: BLE001 - botocore's errors, mapped by _failure
            failure = self._failure(e, "reaching the bucket")
            raise UserError(failure.message, hint=failure.hint) from None

    def put(self, data: bytes, space: str) -> tuple[ObjectRef, bool]:
        """Store ``data`` under its hash in ``space``; whether this call created it (False:
        the same bytes were there already, written by this or another process)."""
        digest = sha256_hex(data)
        ref = ObjectRef(self.key_of(space, digest), digest, len(data))
        for _ in range(3):
            try:
                self.client.put_object(
                    Bucket=self.config.bucket,
                    Key=ref.key,
                    Body=data,
                    IfNoneMatch="*",
                    ChecksumSHA256=_b64(digest),
                )
                return ref, True
            except Exception as e:  # noqa: BLE001 - botocore's errors, mapped below
                code = _code(e)
                if code == "PreconditionFailed":  # content-addressed: the same bytes are there
                    return ref, False
                if code != "ConditionalRequestConflict":  # another create of it in flight
                    raise self._failure(e, f"storing {ref.key}") from None
        return ref, not self.exists(ref.key)

    def upload(self, path: Path, space: str) -> tuple[ObjectRef, bool]:
        """``put`` of a file's bytes, streamed from disk (hashed first, then sent)."""
        digest = hashlib.sha256()
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(CHUNK), b""):
                digest.update(chunk)
            size = f.tell()
            ref = ObjectRef(self.key_of(space, digest.hexdigest()), digest.hexdigest(), size)
            f.seek(0)
            try:
                self.client.put_object(
                    Bucket=self.config.bucket, Key=ref.key, Body=f, IfNoneMatch="*",
                    ContentLength=size,
                )  # fmt: skip
            except Exception as e:  # noqa: BLE001 - botocore's errors, mapped below
                if _code(e) in ("PreconditionFailed", "ConditionalRequestConflict"):
                    return ref, False
                raise self._failure(e, f"storing {ref.key}") from None
        return ref, True

    def hashes(self, space: str) -> list[str]:
        """The sha256 of every object stored in ``space``."""
        start = self.key_of(space, "0" * 64).removesuffix("0" * 64)
        found: list[str] = []
        try:
            pages = self.client.get_paginator("list_objects_v2")
            for page in pages.paginate(Bucket=self.config.bucket, Prefix=start):
                for item in page.get("Contents", []):
                    rest = str(item["Key"])[len(start) :]
                    if HASHED.fullmatch(rest):
                        found.append(rest)
        except Exception as e:  # noqa: BLE001 - botocore's errors, mapped below
            raise self._failure(e, f"listing {start}") from None
        return found

    def get(self, ref: ObjectRef, *, max_bytes: int | None = None) -> bytes:
        """The bytes ``ref`` names, checked against its size, ``max_bytes`` and hash."""
        limit = ref.size if max_bytes is None else min(ref.size, max_bytes)
        if ref.size > limit:
            raise ObjectError(
                f"object {ref.key}: {ref.size:,} bytes is over the limit of {limit:,}",
                kind="too_large",
            )
        chunks: list[bytes] = []
        self._read(ref.key, ref.sha256, ref.size, limit, chunks.append)
        return b"".join(chunks)

    def download(self, space: str, sha256: str, target: Path, *, max_bytes: int) -> float:
        """The object of ``space`` whose bytes hash to ``sha256`` into the file ``target``
        (written beside it and renamed once checked, so no reader sees a partial or altered
        file); when it was stored (epoch seconds)."""
        key = self.key_of(space, sha256)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                stored = self._read(key, sha256, None, max_bytes, f.write)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return stored

    def _read(
        self, key: str, sha256: str, size: int | None, limit: int, sink: Callable[[bytes], Any]
    ) -> float:
        """Stream ``key`` into ``sink`` in chunks, refusing it past ``limit`` bytes, at another
        ``size`` than expected, or when its bytes do not hash to ``sha256``."""
        digest, seen = hashlib.sha256(), 0
        try:
            answer = self.client.get_object(Bucket=self.config.bucket, Key=key)
            body = answer["Body"]
            try:
                length = int(answer.get("ContentLength", -1))
                if size is not None and length != size:
                    raise ObjectError(
                        f"object {key}: {length:,} bytes stored, {size:,} expected "
                        "(altered or truncated); not used",
                        kind="corrupt",
                    )
                if length > limit:
                    raise ObjectError(
                        f"object {key}: {length:,} bytes is over the limit of {limit:,}",
                        kind="too_large",
                    )
                for chunk in body.iter_chunks(CHUNK):
                    seen += len(chunk)
                    if seen > limit:
                        raise ObjectError(
                            f"object {key}: over the limit of {limit:,} bytes", kind="too_large"
                        )
                    digest.update(chunk)
                    sink(chunk)
            finally:
                body.close()
            modified = answer.get("LastModified")
        except ObjectError:
            raise
        except Exception as e:  # noqa: BLE001 - botocore's errors, mapped below
            raise self._failure(e, f"reading {key}") from None
        if digest.hexdigest() != sha256 or (size is not None and seen != size):
            raise ObjectError(
                f"object {key}: its bytes do not hash to the sha256 it was stored under "
                "(altered or truncated); not used",
                kind="corrupt",
            )
        return modified.timestamp() if modified is not None else time.time()

    def size(self, key: str) -> int:
        """The length of the object ``key`` (``ObjectError`` ``missing`` when there is none)."""
        try:
            head = self.client.head_object(Bucket=self.config.bucket, Key=key)
        except Exception as e:  # noqa: BLE001 - botocore's errors, mapped below
            raise self._failure(e, f"reading {key}") from None
        return int(head.get("ContentLength", 0))

    def exists(self, key: str) -> bool:
        try:
            self.client.head_object(Bucket=self.config.bucket, Key=key)
        except Exception as e:  # noqa: BLE001 - botocore's errors, mapped below
            if _code(e) in ("404", "NoSuchKey", "NotFound"):
                return False
            raise self._failure(e, f"looking for {key}") from None
        return True

    def delete(self, key: str) -> None:
        """Remove an object (absent already: nothing to do)."""
        try:
            self.client.delete_object(Bucket=self.config.bucket, Key=key)
        except Exception as e:  # noqa: BLE001 - botocore's errors, mapped below
            raise self._failure(e, f"deleting {key}") from None

    def close(self) -> None:
        self.client.close()

    # -- errors ---------------------------------------------------------------------------------
    def _failure(self, e: Exception, doing: str) -> ObjectError:
        """A botocore failure as an ``ObjectError`` naming the setting that decides it."""
        c, code = self.config, _code(e)
        at = c.where
        if code in ("NoSuchBucket", "404") and "bucket" in doing:
            return ObjectError(
                f"{at}.bucket {c.bucket!r}: no such bucket at {c.endpoint or 'AWS'}",
                kind="missing",
                hint=f"create the bucket (the object store never creates one), or fix {at}.bucket",
            )
        if code == "NoSuchBucket":
            return ObjectError(
                f"{at}.bucket {c.bucket!r}: no such bucket ({doing})", kind="missing"
            )
        if code in ("NoSuchKey", "404", "NotFound"):
            return ObjectError(f"{doing}: no such object in {c.target}", kind="missing")
        if code in _REFUSED:
            return ObjectError(
                f"{at}: {c.target} refused the credentials ({code}) {doing}",
                kind="refused",
                hint=f"check {at}.accessKeyRef and {at}.secretKeyRef (or the AWS credentials "
                "of the environment when they are not set) and the bucket's policy",
            )
        if code:
            return ObjectError(f"{at}: {c.target}: {code} {doing}: {e}", kind="refused")
        return ObjectError(
            f"{at}.endpoint {c.endpoint or '(AWS)'}: cannot reach the object store "
            f"{doing} ({type(e).__name__}: {e})",
            kind="unavailable",
            hint=f"is the S3 service up at {at}.endpoint?",
        )


def _code(e: Exception) -> str:
    response = getattr(e, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", "")) or str(
            response.get("ResponseMetadata", {}).get("HTTPStatusCode", "")
        )
    return ""


def _b64(hex_digest: str) -> str:
    import base64

    return base64.b64encode(bytes.fromhex(hex_digest)).decode()


__all__ = [
    "DEFAULT_PAYLOAD_THRESHOLD",
    "DEFAULT_PREFIX",
    "ObjectError",
    "ObjectRef",
    "ObjectStore",
    "ObjectStoreConfig",
    "sha256_hex",
]
