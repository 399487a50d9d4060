"""The two ways a request fails identity and access.

Neither message ever holds a credential: the reason says what was wrong with the token or key
(expired, unknown issuer, bad signature, ...) in words safe to log, to audit and to send back.
"""

from __future__ import annotations

from evalsi.core import EvalsiError


class Unauthenticated(EvalsiError):
    """No credential where one is required, or one that does not verify (401, UNAUTHENTICATED)."""


class PermissionDenied(EvalsiError):
    """A verified principal that may not do this here (403, PERMISSION_DENIED)."""


class AuthConfigError(EvalsiError):
    """The ``auth:``, ``rbac:`` or ``authorization:`` sections are wrong: no server starts."""
