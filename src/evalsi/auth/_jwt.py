"""Bearer tokens (JWT, as OIDC providers issue them) checked against the providers we trust.

The order is the defence: cheap, strict structure checks first (size, three strict base64url
segments, JSON objects without duplicate keys, so no two parsers can read one token two ways);
then the unverified ``iss`` picks the provider, and only that provider's allow-listed
asymmetric algorithms and published keys are used (``none``, HMAC, and any key the token
carries or points at, ``jwk``/``jku``/``x5u``/``x5c``, are refused outright); then joserfc checks
the signature; then the claims (issuer, audience, exp/nbf/iat with leeway, required claims).

A verified token is remembered (by its SHA-256) until it expires, so a client that sends the
same token with every request pays for one signature check. A remembered token is checked
again when its provider is replaced or removed, or its provider's keys were refetched (the key
that signed it may have been withdrawn).

Every reason given is safe to log and return: it never holds the token or part of it.
"""

from __future__ import annotations

import binascii
import copy
import hashlib
import json
import re
import ssl
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from joserfc import jwt
from joserfc.errors import (
    BadSignatureError,
    ClaimError,
    ExpiredTokenError,
    InvalidClaimError,
    JoseError,
    MissingClaimError,
)
from joserfc.jwa import JWSAlgModel
from joserfc.jws import JWSRegistry
from joserfc.util import urlsafe_b64decode

from evalsi.auth._errors import AuthConfigError, Unauthenticated
from evalsi.auth._jwks import JwksCache
from evalsi.auth._settings import ALGORITHMS, MAX_TOKEN_BYTES, Provider

MAX_KID_CHARS = 256
CACHE_ENTRIES = 10_000
"""Verified tokens remembered at once (least recently used dropped first): ~10k principals
each sending one token, a few MB."""
CACHE_MAX_S = 3600.0
"""Longest a verification is remembered, however far off the token's exp."""

_SEGMENT = re.compile(r"[A-Za-z0-9_-]+")
_OWN_KEY = "; keys come only from the provider's JWKS"
_REFUSED_HEADERS = {
    "jku": "the token names a key set URL (jku)" + _OWN_KEY,
    "x5u": "the token names a certificate URL (x5u)" + _OWN_KEY,
    "jwk": "the token carries its own key (jwk)" + _OWN_KEY,
    "x5c": "the token carries its own certificate chain (x5c)" + _OWN_KEY,
    "crit": "the token has critical header extensions (crit), which are not supported",
    "b64": "the token has an unencoded payload (b64), which is not supported",
    "enc": "the token is encrypted (enc); only signed JWTs are accepted",
    "zip": "the token is compressed (zip), which is not supported",
}


def _quiet_algorithms() -> dict[str, JWSAlgModel]:
    algorithms = dict(JWSRegistry.algorithms)
    algorithms["EdDSA"] = copy.copy(algorithms["EdDSA"])
    algorithms["EdDSA"].security_warning = None
    return algorithms


class _Registry(JWSRegistry):
    """joserfc's JWS algorithms without the RFC 9864 warning on ``EdDSA``: providers publish
    that name today, and a warning per request would be noise (or an error under pytest)."""

    algorithms = _quiet_algorithms()


_REGISTRIES = {a: _Registry(algorithms=[a], strict_check_header=False) for a in ALGORITHMS}


@dataclass(frozen=True)
class Verified:
    """A token that verified: the provider that issued it and its claims (shared with the
    verification cache: read them, do not change them)."""

    provider: Provider
    claims: dict[str, Any]


@dataclass(slots=True)
class _Entry:
    verified: Verified
    until: float  # exp + leeway
    jwks: JwksCache
    generation: int


class JwtVerifier:
    """Verifies bearer tokens from any of ``providers``.

    Args:
        providers: the issuers trusted (each issuer once).
        clock: seconds since the epoch, for exp/nbf/iat and the key cache (tests pass a fake).
        ssl_context: trust for JWKS and discovery hosts (e.g. a private CA).

    Example:
        >>> from evalsi.auth._settings import JwksSource, Provider
        >>> p = Provider("dev", "https://id.example", ("api",), JwksSource(inline='{"keys":[]}'))
        >>> import asyncio
        >>> asyncio.run(JwtVerifier([p]).verify("not a token"))
        Traceback (most recent call last):
        evalsi.auth._errors.Unauthenticated: the token is not a signed JWT (1 segments, not 3)
    """

    def __init__(
        self,
        providers: Sequence[Provider],
        *,
        clock: Callable[[], float] = time.time,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._clock = clock
        self._ssl = ssl_context
        self._jwks: dict[str, JwksCache] = {}
        self._cache: OrderedDict[bytes, _Entry] = OrderedDict()
        self.replace_providers(providers)

    @property
    def providers(self) -> tuple[Provider, ...]:
        return tuple(j.provider for j in self._jwks.values())

    def replace_providers(self, providers: Sequence[Provider]) -> None:
        """Trust ``providers`` from now on (a config reload). An unchanged provider keeps its
        keys; tokens verified by a removed or changed one are verified again."""
        jwks: dict[str, JwksCache] = {}
        for p in providers:
            if p.issuer in jwks:
                raise AuthConfigError(f"two providers trust issuer {p.issuer!r}")
            if not p.audiences:
                raise AuthConfigError(f"provider {p.name!r} lists no audiences")
            if not p.algorithms or not set(p.algorithms) <= ALGORITHMS:
                raise AuthConfigError(
                    f"provider {p.name!r}: algorithms must be among {sorted(ALGORITHMS)}"
                )
            old = self._jwks.get(p.issuer)
            keep = old is not None and old.provider == p
            jwks[p.issuer] = (
                old if old and keep else JwksCache(p, clock=self._clock, ssl_context=self._ssl)
            )
        self._jwks = jwks
        for digest, entry in list(self._cache.items()):
            if jwks.get(entry.verified.provider.issuer) is not entry.jwks:
                del self._cache[digest]

    async def verify(self, token: str) -> Verified:
        """The provider and claims of ``token``; raises ``Unauthenticated(reason)``."""
        if not isinstance(token, str) or len(token) > MAX_TOKEN_BYTES:
            raise Unauthenticated(f"the token is not a string of at most {MAX_TOKEN_BYTES} bytes")
        if not token.isascii():
            raise Unauthenticated("the token holds characters outside base64url")
        digest = hashlib.sha256(token.encode()).digest()
        hit = self._cached(digest)
        if hit is not None:
            return hit
        header, payload = _parse(token)
        alg, kid = _check_header(header)
        iss = payload.get("iss")
        if not isinstance(iss, str):
            raise Unauthenticated("the token has no issuer (iss)")
        jwks = self._jwks.get(iss)
        if jwks is None:
            raise Unauthenticated(f"no provider trusts issuer {_shown(iss)}")
        provider = jwks.provider
        if alg not in provider.algorithms:
            raise Unauthenticated(f"provider {provider.name!r} does not sign with {_shown(alg)}")
        key = await jwks.key_for(kid, alg)
        if self._jwks.get(iss) is not jwks:
            raise Unauthenticated(f"provider {provider.name!r} was removed meanwhile")
        try:
            claims = jwt.decode(token, key, algorithms=[alg], registry=_REGISTRIES[alg]).claims
        except BadSignatureError:
            raise Unauthenticated("the token's signature does not verify") from None
        except JoseError as e:
            raise Unauthenticated(f"the token does not verify ({type(e).__name__})") from None
        now = self._clock()
        _check_claims(claims, provider, now)
        verified = Verified(provider, claims)
        exp = claims.get("exp")
        if isinstance(exp, int | float):  # min(): an exp of 10**400 is an int, not a float
            until = min(exp, now + CACHE_MAX_S) + provider.leeway_s
            self._remember(digest, _Entry(verified, until, jwks, jwks.generation))
        return verified

    def _cached(self, digest: bytes) -> Verified | None:
        entry = self._cache.get(digest)
        if entry is None:
            return None
        if (
            self._clock() >= entry.until
            or self._jwks.get(entry.verified.provider.issuer) is not entry.jwks
            or entry.jwks.generation != entry.generation
            or entry.jwks.stale()
        ):
            del self._cache[digest]
            return None
        self._cache.move_to_end(digest)
        return entry.verified

    def _remember(self, digest: bytes, entry: _Entry) -> None:
        self._cache[digest] = entry
        self._cache.move_to_end(digest)
        while len(self._cache) > CACHE_ENTRIES:
            self._cache.popitem(last=False)


def claim(claims: Mapping[str, Any], path: str) -> Any:
    """The claim at dotted ``path`` (``realm_access.roles``), or None when absent. A claim
    whose own name holds dots (``https://example.com/roles``) is found under that name first.

    Example:
        >>> claim({"realm_access": {"roles": ["admin"]}}, "realm_access.roles")
        ['admin']
    """
    if path in claims:
        return claims[path]
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


class _Duplicate(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _Duplicate(k)
        out[k] = v
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parse(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Header and payload of a compact JWS, read strictly (signature not yet checked)."""
    segments = token.split(".")
    if len(segments) == 5:
        raise Unauthenticated("the token is encrypted (JWE); only signed JWTs are accepted")
    if len(segments) != 3:
        raise Unauthenticated(f"the token is not a signed JWT ({len(segments)} segments, not 3)")
    if not segments[2]:
        raise Unauthenticated("the token has no signature")
    if not all(_SEGMENT.fullmatch(s) for s in segments):
        raise Unauthenticated("the token is not three base64url segments")
    out: list[dict[str, Any]] = []
    for segment, what in zip(segments[:2], ("header", "payload"), strict=True):
        try:
            value = json.loads(
                urlsafe_b64decode(segment.encode()),
                object_pairs_hook=_no_duplicates,
                parse_constant=_no_constant,
            )
        except _Duplicate:
            raise Unauthenticated(f"the token's {what} repeats a member") from None
        except (binascii.Error, ValueError, RecursionError):
            raise Unauthenticated(f"the token's {what} is not base64url JSON") from None
        if not isinstance(value, dict):
            raise Unauthenticated(f"the token's {what} is not a JSON object")
        out.append(value)
    try:
        urlsafe_b64decode(segments[2].encode())
    except binascii.Error:
        raise Unauthenticated("the token's signature is not base64url") from None
    return out[0], out[1]


def _check_header(header: Mapping[str, Any]) -> tuple[str, str | None]:
    """``alg`` and ``kid`` of a header that names no key source of its own."""
    for name, reason in _REFUSED_HEADERS.items():
        if name in header:
            raise Unauthenticated(reason)
    alg = header.get("alg")
    if not isinstance(alg, str):
        raise Unauthenticated("the token's header has no algorithm (alg)")
    if alg not in ALGORITHMS:
        raise Unauthenticated(f"algorithm {_shown(alg)} is never accepted")
    kid = header.get("kid")
    if kid is not None and (not isinstance(kid, str) or not 0 < len(kid) <= MAX_KID_CHARS):
        raise Unauthenticated(f"the token's kid is not a string of 1 to {MAX_KID_CHARS} chars")
    return alg, kid


def _check_claims(claims: dict[str, Any], provider: Provider, now: float) -> None:
    options: dict[str, jwt.ClaimsOption] = {
        c: {"essential": True} for c in provider.required_claims
    }
    options["iss"] = {"essential": True, "value": provider.issuer}
    registry = jwt.JWTClaimsRegistry(now=int(now), leeway=int(provider.leeway_s), **options)
    try:
        registry.validate(claims)
    except ExpiredTokenError:
        raise Unauthenticated("the token has expired") from None
    except MissingClaimError as e:
        raise Unauthenticated(f"the token lacks the required claim(s) {e.claim}") from None
    except InvalidClaimError as e:
        reason = {"nbf": "the token is not valid yet", "iat": "the token was issued in the future"}
        raise Unauthenticated(
            reason.get(e.claim, f"the token's {e.claim} claim is invalid")
        ) from None
    except ClaimError as e:
        raise Unauthenticated(f"the token's {e.claim} claim is invalid") from None
    aud = claims.get("aud")
    audiences = [aud] if isinstance(aud, str) else aud
    if not isinstance(audiences, list) or not audiences:
        raise Unauthenticated("the token has no audience (aud)")
    if not any(isinstance(a, str) and a in provider.audiences for a in audiences):
        raise Unauthenticated(f"the token is not for an audience of provider {provider.name!r}")


def _shown(value: str) -> str:
    """A value from the token, made safe to print: ASCII-escaped, at most 100 chars."""
    return ascii(value[:100]) + ("..." if len(value) > 100 else "")
