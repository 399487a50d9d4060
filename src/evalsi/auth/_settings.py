"""The values the ``auth:`` section of ``evalsi.yaml`` turns into (read by ``_config``).

Kept apart from the code that acts on them, so the JWT verifier, the key store and the
authorizer each take only the part they need.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

Mode = Literal["strict", "optional", "permissive"]
"""How a method treats credentials: ``strict`` needs a valid one; ``optional`` checks one if
sent and lets anonymous requests reach authorization; ``permissive`` reads claims for policy but
does not reject an invalid token (for migrations only)."""

DEFAULT_ALGORITHMS = ("RS256", "ES256", "EdDSA")
"""Signature algorithms a provider accepts unless it lists its own; ``none`` never is."""

ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
"""Every algorithm a provider may list: asymmetric only, so no shared secret sits in config and
an RSA public key can never be used as an HMAC secret (key confusion)."""


@dataclass(frozen=True, slots=True)
class JwksSource:
    """Where a provider's keys come from: exactly one of the four."""

    url: str | None = None
    file: str | None = None
    inline: str | None = None  # the JWKS document as JSON text
    discovery: bool = False  # ``{issuer}/.well-known/openid-configuration`` names ``jwks_uri``


@dataclass(frozen=True, slots=True)
class ClaimNames:
    """Which claims carry the principal's subject, name, email and groups (dotted paths for
    nested claims, e.g. ``realm_access.roles``)."""

    subject: str = "sub"
    name: str = "name"
    email: str = "email"
    groups: str = "groups"


@dataclass(frozen=True, slots=True)
class RoleClaims:
    """``roleClaims``: the values of one claim mapped to roles per project (``*``: every
    project), e.g. ``{checkout-lead: {checkout: [editor]}}``."""

    claim: str
    map: Mapping[str, Mapping[str, tuple[str, ...]]]


@dataclass(frozen=True, slots=True)
class Provider:
    """One OIDC / JWT issuer the server trusts."""

    name: str
    issuer: str
    audiences: tuple[str, ...]
    jwks: JwksSource
    algorithms: tuple[str, ...] = DEFAULT_ALGORITHMS
    leeway_s: float = 30.0  # clock skew allowed on exp, nbf and iat
    required_claims: tuple[str, ...] = ("exp",)
    claims: ClaimNames = field(default_factory=ClaimNames)
    role_claims: RoleClaims | None = None
    allow_insecure_jwks: bool = False  # an http:// JWKS or discovery URL (local development)
    refresh_min_interval_s: float = 60.0  # at most one JWKS refetch per interval on unknown kid
    cache_ttl_s: float = 3600.0  # keys are refetched after this long even with no unknown kid


MAX_TOKEN_BYTES = 16 * 1024
"""Longest credential read from a request: a bigger one is refused unparsed."""


@dataclass(frozen=True, slots=True)
class Tls:
    cert_file: str
    key_file: str
    client_ca_file: str | None = None  # client certificates required when set


@dataclass(frozen=True, slots=True)
class CliLogin:
    """What ``evalsi login`` is told at ``/.well-known/evalsi-auth``."""

    issuer: str
    client_id: str
    audience: str = ""


@dataclass(frozen=True, slots=True)
class AuthSettings:
    """Everything the ``auth:``, ``rbac:``, ``authorization:`` and ``projects:`` sections say.

    ``enabled`` is False when there is no ``auth:`` section (or ``mode: none``): the server
    then answers every request as the ``local`` principal and listens on loopback only.
    """

    enabled: bool = False
    jwt_mode: Mode = "strict"
    key_mode: Mode = "strict"
    header: str = "authorization"  # where the credential is read: ``<header>: Bearer <it>``
    providers: tuple[Provider, ...] = ()
    keys: tuple[Mapping[str, object], ...] = ()  # auth.apiKeys.keys, checked (see _config)
    roles: tuple[Mapping[str, object], ...] = ()  # rbac.roles as written
    bindings: tuple[tuple[str, str, str], ...] = ()  # (role, subject, project)
    rules: tuple[Mapping[str, object], ...] = ()  # authorization.rules as written
    projects: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # name -> labels
    tls: Tls | None = None
    allow_plaintext: bool = False
    open_health: bool = True
    cli_login: CliLogin | None = None
    audit_retention_s: float | None = 90 * 86400.0

    @property
    def strict(self) -> bool:
        """Whether a request with no credential is refused (401): when any method is strict."""
        return (bool(self.providers) and self.jwt_mode == "strict") or self.key_mode == "strict"
