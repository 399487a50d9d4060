"""One provider's signing keys: fetched from its JWKS, cached, refetched on rotation.

The key set is the only place a verification key comes from (never from the token), so what
this module lets in is the trust boundary. Hence: https only (http only when the provider says
``allow_insecure_jwks``), no redirects, a 1 MiB / 100-key cap and a 5 s timeout per document,
only asymmetric keys of the type and curve the algorithm needs (``oct`` keys are dropped), RSA
keys of at least 2048 bits. A token whose ``kid`` is unknown may trigger one refetch, at most
one per ``refresh_min_interval_s``, so a flood of random kids costs the issuer one request per
interval; concurrent callers share a single in-flight fetch; a failed fetch keeps the keys it
had.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from cryptography.exceptions import UnsupportedAlgorithm
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, JWKRegistry, Key, OKPKey, RSAKey
from joserfc.util import base64_to_int

from evalsi.auth._errors import Unauthenticated
from evalsi.auth._settings import Provider

log = logging.getLogger("evalsi.auth")

MAX_JWKS_BYTES = 1024 * 1024
"""Largest JWKS (or discovery) document read; real ones are a few KiB."""
MAX_KEYS = 100
"""Most entries a JWKS may list; a bigger set is refused whole."""
FETCH_TIMEOUT_S = 5.0
MIN_RSA_BITS = 2048

_IDENTITY = {"Accept-Encoding": "identity", "Accept": "application/json"}
_EC_CURVES = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}
_OKP_CURVES = frozenset({"Ed25519", "Ed448"})


class JwksError(Exception):
    """A key set that could not be fetched or read; the message names no secret."""


def fits(key: Key, alg: str) -> bool:
    """Whether ``key`` is of the type (and curve) algorithm ``alg`` needs, and does not say it
    is for another algorithm or for encryption."""
    if key.get("alg") not in (None, alg) or key.get("use") not in (None, "sig"):
        return False
    if alg[:2] in ("RS", "PS"):
        return isinstance(key, RSAKey)
    if alg in _EC_CURVES:
        return isinstance(key, ECKey) and key.curve_name == _EC_CURVES[alg]
    if alg == "EdDSA":
        return isinstance(key, OKPKey) and key.curve_name in _OKP_CURVES
    return False


def parse_jwks(data: bytes | str) -> list[Key]:
    """The usable public signature keys of a JWKS document (``oct``, unknown and malformed
    entries dropped); raises ``JwksError`` when the document itself is not a key set."""
    if len(data) > MAX_JWKS_BYTES:
        raise JwksError(f"the key set is larger than {MAX_JWKS_BYTES} bytes")
    try:
        doc = json.loads(data)
    except ValueError as e:
        raise JwksError("the key set is not JSON") from e
    entries = doc.get("keys") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise JwksError("the key set has no 'keys' list")
    if len(entries) > MAX_KEYS:
        raise JwksError(f"the key set lists more than {MAX_KEYS} keys")
    keys: list[Key] = []
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("kty") not in ("RSA", "EC", "OKP"):
            continue  # never a symmetric (oct) key: it would turn a signature into a shared secret
        try:
            if entry["kty"] == "RSA" and base64_to_int(entry["n"]).bit_length() < MIN_RSA_BITS:
                continue  # checked before import, which would warn about it
            keys.append(JWKRegistry.import_key(entry))
        except (JoseError, ValueError, TypeError, KeyError, UnsupportedAlgorithm):
            continue
    return keys


def check_url(url: object, provider: Provider, what: str) -> str:
    """``url`` if it is https (or http when the provider allows it), else ``JwksError``."""
    if not isinstance(url, str):
        raise JwksError(f"the {what} is not a string")
    parts = urlsplit(url)
    schemes = ("https", "http") if provider.allow_insecure_jwks else ("https",)
    if parts.scheme not in schemes or not parts.hostname:
        raise JwksError(f"the {what} {url!r} is not an https URL")
    return url


class JwksCache:
    """The keys of one provider, as its JWKS last published them.

    Args:
        provider: whose keys (its ``jwks`` source, TTL and refetch interval).
        clock: seconds, for the TTL and the refetch rate limit (tests pass a fake).
        ssl_context: trust for the JWKS host (e.g. a private CA); the system's by default.

    Example:
        >>> from evalsi.auth._settings import JwksSource, Provider
        >>> p = Provider("dev", "https://id.example", ("api",), JwksSource(inline='{"keys":[]}'))
        >>> JwksCache(p).generation
        0
    """

    def __init__(
        self,
        provider: Provider,
        *,
        clock: Callable[[], float] = time.time,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.provider = provider
        self._clock = clock
        self._ssl: ssl.SSLContext | bool = ssl_context if ssl_context is not None else True
        self._keys: list[Key] | None = None
        self._fetched_at = 0.0
        self._attempted_at: float | None = None
        self._inflight: asyncio.Task[None] | None = None
        self.generation = 0
        """Bumped by every successful fetch: a verification cached under an older generation
        is checked again (its key may have been withdrawn)."""
        self.last_error: str | None = None

    def stale(self) -> bool:
        """Whether the keys are older than the provider's ``cache_ttl_s`` (or missing)."""
        return self._keys is None or self._clock() - self._fetched_at >= self.provider.cache_ttl_s

    async def key_for(self, kid: str | None, alg: str) -> Key:
        """The published key that verifies ``alg`` signatures under ``kid``.

        Refetches when the keys are stale, or once per ``refresh_min_interval_s`` when no key
        matches. Raises ``Unauthenticated`` when there is still none.
        """
        if self.stale():
            await self._refresh_if_allowed()
        key = self._find(kid, alg)
        if key is None and self._keys is not None:
            await self._refresh_if_allowed()
            key = self._find(kid, alg)
        if key is not None:
            return key
        if self._keys is None:
            raise Unauthenticated(f"the keys of provider {self.provider.name!r} are unavailable")
        if kid is None:
            raise Unauthenticated(
                f"the token has no kid and provider {self.provider.name!r} "
                f"does not publish exactly one {alg} key"
            )
        raise Unauthenticated(
            f"no {alg} key of provider {self.provider.name!r} has the token's kid"
        )

    def _find(self, kid: str | None, alg: str) -> Key | None:
        candidates = [k for k in self._keys or () if fits(k, alg)]
        if kid is None:
            return candidates[0] if len(candidates) == 1 else None
        return next((k for k in candidates if k.kid == kid), None)

    async def _refresh_if_allowed(self) -> None:
        if not self._joinable():
            since = None if self._attempted_at is None else self._clock() - self._attempted_at
            if since is not None and since < self.provider.refresh_min_interval_s:
                return
        await self.refresh()

    async def refresh(self) -> None:
        """Fetch the key set now (joining a fetch already under way). On failure the previous
        keys stay and ``last_error`` says why."""
        task = self._inflight
        if task is None or not self._joinable():
            self._attempted_at = self._clock()
            task = self._inflight = asyncio.create_task(self._fetch())
            task.add_done_callback(self._done)
        await asyncio.shield(task)  # a caller that is cancelled leaves the fetch to the others

    def _joinable(self) -> bool:
        """Whether a fetch is under way on this event loop (a verifier may outlive a loop)."""
        task = self._inflight
        return task is not None and task.get_loop() is asyncio.get_running_loop()

    def _done(self, task: asyncio.Task[None]) -> None:
        if self._inflight is task:
            self._inflight = None

    async def _fetch(self) -> None:
        try:
            keys = parse_jwks(await self._document())
        except JwksError as e:
            self.last_error = str(e)
            log.warning("JWKS of provider %r not refreshed: %s", self.provider.name, e)
            return
        self._keys = keys
        self._fetched_at = self._clock()
        self.generation += 1
        self.last_error = None

    async def _document(self) -> bytes:
        source = self.provider.jwks
        if source.inline is not None:
            return source.inline.encode()
        if source.file is not None:
            return await asyncio.to_thread(_read_file, Path(source.file))
        if source.url is not None:
            return await self._get(check_url(source.url, self.provider, "JWKS URL"))
        if source.discovery:
            return await self._get(await self._jwks_uri())
        raise JwksError(f"provider {self.provider.name!r} names no JWKS source")

    async def _jwks_uri(self) -> str:
        issuer = self.provider.issuer
        url = check_url(
            issuer.rstrip("/") + "/.well-known/openid-configuration", self.provider, "discovery URL"
        )
        try:
            doc: Any = json.loads(await self._get(url))
        except ValueError as e:
            raise JwksError("the discovery document is not JSON") from e
        if not isinstance(doc, dict) or doc.get("issuer") != issuer:
            raise JwksError(f"the discovery document at {url!r} is not for issuer {issuer!r}")
        return check_url(doc.get("jwks_uri"), self.provider, "discovery document's jwks_uri")

    async def _get(self, url: str) -> bytes:
        timeout = aiohttp.ClientTimeout(total=FETCH_TIMEOUT_S)
        try:
            async with (
                # identity: the size cap counts the bytes we parse (no decompression bomb)
                aiohttp.ClientSession(
                    timeout=timeout, trust_env=False, auto_decompress=False
                ) as session,
                session.get(
                    url, allow_redirects=False, ssl=self._ssl, headers=_IDENTITY
                ) as response,
            ):
                if response.status != 200:
                    raise JwksError(f"GET {url} answered HTTP {response.status}")
                if (response.content_length or 0) > MAX_JWKS_BYTES:
                    raise JwksError(f"GET {url} is larger than {MAX_JWKS_BYTES} bytes")
                body = bytearray()
                async for chunk in response.content.iter_chunked(64 * 1024):
                    body += chunk
                    if len(body) > MAX_JWKS_BYTES:
                        raise JwksError(f"GET {url} is larger than {MAX_JWKS_BYTES} bytes")
        except (aiohttp.ClientError, TimeoutError) as e:
            raise JwksError(f"GET {url} failed: {type(e).__name__}") from e
        return bytes(body)


def _read_file(path: Path) -> bytes:
    try:
        with path.open("rb") as f:
            data = f.read(MAX_JWKS_BYTES + 1)
    except OSError as e:
        raise JwksError(f"cannot read the key set file {str(path)!r}: {e.strerror}") from e
    if len(data) > MAX_JWKS_BYTES:
        raise JwksError(f"the key set file {str(path)!r} is larger than {MAX_JWKS_BYTES} bytes")
    return data
