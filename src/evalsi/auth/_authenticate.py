"""From a request's headers to a principal: the one authenticator every surface calls.

The credential is read from one header (``Authorization: Bearer <token or key>`` by default).
A value starting ``evk_`` is an API key; anything else is a JWT checked by the provider its
issuer names. What happens without one, or with a bad one, follows the modes: ``strict`` →
401; ``optional`` → anonymous without one, 401 with a bad one; ``permissive`` → a bad one is
ignored (the request is anonymous: unverified claims are never trusted here).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evalsi.auth._errors import Unauthenticated
from evalsi.auth._jwt import JwtVerifier, Verified, claim
from evalsi.auth._keys import KeyRing, looks_like_key
from evalsi.auth._principal import ANONYMOUS, Principal
from evalsi.auth._settings import MAX_TOKEN_BYTES, AuthSettings

_BEARER = "bearer "


def read_credential(headers: Mapping[str, str], header: str = "authorization") -> str | None:
    """The bearer credential in ``headers`` (names lower case), or None; ``Unauthenticated``
    for a header that is present but not ``Bearer <credential>``."""
    raw = headers.get(header)
    if raw is None:
        return None
    if len(raw) > MAX_TOKEN_BYTES + 16:
        raise Unauthenticated(f"the {header} header is larger than {MAX_TOKEN_BYTES} bytes")
    if raw[: len(_BEARER)].lower() != _BEARER or not raw[len(_BEARER) :].strip():
        raise Unauthenticated(f"expected '{header}: Bearer <token or API key>'")
    return raw[len(_BEARER) :].strip()


class Authenticator:
    """``authenticate(headers)`` → the principal, or ``Unauthenticated``."""

    def __init__(self, settings: AuthSettings, keys: KeyRing) -> None:
        self.settings = settings
        self.keys = keys
        self.jwt = JwtVerifier(settings.providers) if settings.providers else None

    async def authenticate(self, headers: Mapping[str, str]) -> Principal:
        s = self.settings
        try:
            credential = read_credential(headers, s.header)
        except Unauthenticated:
            if s.strict:
                raise
            credential = None  # permissive or optional: a malformed header is no credential
        if credential is None:
            if s.strict:
                raise Unauthenticated("this server requires a bearer token or an API key")
            return ANONYMOUS
        if looks_like_key(credential):
            try:
                return self.keys.verify(credential).principal()
            except Unauthenticated:
                if s.key_mode == "permissive":
                    return ANONYMOUS
                raise
        if self.jwt is None:
            raise Unauthenticated("this server accepts API keys only (no OIDC provider)")
        try:
            return principal_of(await self.jwt.verify(credential))
        except Unauthenticated:
            if s.jwt_mode == "permissive":
                return ANONYMOUS
            raise


def principal_of(verified: Verified) -> Principal:
    """The principal a verified token names, with the roles its ``roleClaims`` map to."""
    provider, claims = verified.provider, verified.claims
    names = provider.claims
    subject = claim(claims, names.subject)
    if not isinstance(subject, str) or not subject:
        raise Unauthenticated(f"the token has no {names.subject!r} claim naming its subject")
    groups = claim(claims, names.groups)
    grants: dict[str, tuple[str, ...]] = {}
    if provider.role_claims is not None:
        values = claim(claims, provider.role_claims.claim)
        for value in _strings(values):
            for project, roles in provider.role_claims.map.get(value, {}).items():
                grants[project] = (*grants.get(project, ()), *roles)
    return Principal(
        "user",
        provider.name,
        subject,
        name=_text(claim(claims, names.name)),
        email=_text(claim(claims, names.email)),
        email_verified=claims.get("email_verified") is True,
        groups=tuple(_strings(groups)),
        claims=dict(claims),
        grants=grants,
        expires_at=float(claims["exp"]) if isinstance(claims.get("exp"), int | float) else None,
    )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []
