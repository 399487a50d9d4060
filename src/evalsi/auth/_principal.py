"""Who is calling: the principal every authenticated request carries.

A principal is built from a verified JWT, an API key, or nothing (``anonymous``, reached only in
``optional`` mode; ``local`` when the server runs without authentication on loopback). Its
``id`` (provider and subject) is what runs record as ``created_by``: never the credential.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["user", "service", "apikey", "anonymous", "local"]

Grants = Mapping[str, tuple[str, ...]]
"""Roles by project (``*``: every project)."""


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller.

    ``grants`` are the roles the credential itself carries (an API key's, or those mapped from
    the token's ``roleClaims``); role bindings add more at decision time. ``claims`` are a
    JWT's verified claims (empty for a key), ``labels`` an API key's labels.
    """

    kind: Kind
    provider: str
    subject: str
    name: str = ""
    email: str = ""
    email_verified: bool = False
    groups: tuple[str, ...] = ()
    claims: Mapping[str, Any] = field(default_factory=dict)
    grants: Grants = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    expires_at: float | None = None

    @property
    def id(self) -> str:
        """``provider/subject``, unique together: what ``created_by`` and audit events record."""
        return f"{self.provider}/{self.subject}" if self.provider else self.subject

    @property
    def authenticated(self) -> bool:
        return self.kind not in ("anonymous", "local")

    def to_cel(self, roles: tuple[str, ...] = ()) -> dict[str, Any]:
        """The ``principal`` variable of rules and role conditions."""
        return {
            "kind": self.kind,
            "provider": self.provider,
            "subject": self.subject,
            "id": self.id,
            "name": self.name,
            "email": self.email if self.email_verified else "",
            "groups": list(self.groups),
            "roles": list(roles),
            "labels": dict(self.labels),
        }

    def __repr__(self) -> str:  # claims may hold personal data: keep reprs short
        return f"Principal({self.kind}, {self.id!r})"


ANONYMOUS = Principal("anonymous", "", "anonymous")
"""A request without credentials where the mode lets it through."""

LOCAL = Principal("local", "", "local")
"""Every request of a server that runs without authentication (loopback, or ``--no-auth``)."""
