"""API keys: made with a recognisable prefix, shown once, kept only as a SHA-256 hash.

A key is ``evk_`` followed by 43 base-62 characters (256 bits from ``secrets``), so secret
scanners can find a leaked one and no slow hash is needed: the store holds
``sha256:<hex>`` and a presented key is hashed, looked up by its hash and compared in constant
time. Each key is scoped to one project and one role, and may expire or be revoked.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import string
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from evalsi.auth._errors import Unauthenticated
from evalsi.auth._principal import Principal

PREFIX = "evk_"
_ALPHABET = string.ascii_letters + string.digits
_LENGTH = 43  # 62**43 > 2**256
SHOWN = 12  # characters of a key kept to recognise it ("evk_AbCdEfGh")


def new_key() -> str:
    """A fresh API key (the only time its plaintext exists)."""
    return PREFIX + "".join(secrets.choice(_ALPHABET) for _ in range(_LENGTH))


def key_hash(key: str) -> str:
    """``sha256:<hex>`` of a key: what config and the store hold."""
    return "sha256:" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def looks_like_key(credential: str) -> bool:
    return credential.startswith(PREFIX)


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A key's record: everything but the key."""

    id: str
    name: str
    hash: str
    project: str
    role: str
    prefix: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    created_at: float = 0.0
    created_by: str = ""
    expires_at: float | None = None
    revoked_at: float | None = None
    source: str = "api"  # api | config

    def principal(self) -> Principal:
        return Principal(
            "apikey",
            "apikey",
            self.name,
            grants={self.project: (self.role,)},
            labels=dict(self.labels),
            expires_at=self.expires_at,
        )


class KeyRing:
    """The live keys by hash, in memory: a presented key costs one hash and one lookup.

    Thread-safe; ``last_used`` is kept here (a write per request would cost more than the
    check itself)."""

    def __init__(self, keys: Iterable[ApiKey] = ()) -> None:
        self._lock = threading.Lock()
        self._by_hash: dict[str, ApiKey] = {}
        self.last_used: dict[str, float] = {}
        for k in keys:
            self.add(k)

    def add(self, key: ApiKey) -> None:
        with self._lock:
            if key.revoked_at is None:
                self._by_hash[key.hash] = key

    def remove(self, key_id: str) -> ApiKey | None:
        with self._lock:
            for h, k in list(self._by_hash.items()):
                if k.id == key_id:
                    del self._by_hash[h]
                    return k
        return None

    def names(self) -> set[str]:
        return {k.name for k in self._by_hash.values()}

    def __len__(self) -> int:
        return len(self._by_hash)

    def verify(self, presented: str, now: float | None = None) -> ApiKey:
        """The key ``presented`` names; ``Unauthenticated`` when unknown, revoked or expired."""
        digest = key_hash(presented)
        found = self._by_hash.get(digest)
        if found is None or not hmac.compare_digest(found.hash, digest):
            raise Unauthenticated("unknown or revoked API key")
        at = time.time() if now is None else now
        if found.expires_at is not None and at >= found.expires_at:
            raise Unauthenticated(f"the API key {found.name!r} has expired")
        self.last_used[found.id] = at
        return found


def config_key(
    index: int, name: str, digest: str, project: str, role: str, **more: object
) -> ApiKey:
    """A key declared in ``auth.apiKeys.keys`` (its id is ``config-<index>``)."""
    base = ApiKey(f"config-{index}", name, digest, project, role, source="config")
    return replace(base, **more)  # type: ignore[arg-type]
