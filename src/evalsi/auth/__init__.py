"""Identity and access: who is calling (OIDC/JWT, API keys), what they may do (RBAC with CEL
conditions, allow / deny / require rules), and the audit log of both.

The server builds one ``Access`` from ``evalsi.yaml`` and passes every request of every
protocol through it; ``evalsi auth check`` asks the same object offline. Nothing here knows a
wire format: the server maps RPCs to actions and resources (``server/_actions.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalsi.core import lazy_exports

if TYPE_CHECKING:
    from evalsi.auth._access import Access
    from evalsi.auth._audit import AuditEvent
    from evalsi.auth._authenticate import read_credential
    from evalsi.auth._credentials import Tokens
    from evalsi.auth._credentials import delete as forget_login
    from evalsi.auth._credentials import save as keep_login
    from evalsi.auth._decide import Decision, Held
    from evalsi.auth._errors import AuthConfigError, PermissionDenied, Unauthenticated
    from evalsi.auth._keys import ApiKey, key_hash, new_key
    from evalsi.auth._login import access_token as login_token
    from evalsi.auth._login import device_login, pkce_login
    from evalsi.auth._permissions import BUILTIN_ROLES, INSTALL_WIDE, PERMISSIONS
    from evalsi.auth._principal import ANONYMOUS, LOCAL, Principal
    from evalsi.auth._roles import Binding, Role
    from evalsi.auth._settings import (
        ALGORITHMS,
        DEFAULT_ALGORITHMS,
        AuthSettings,
        ClaimNames,
        CliLogin,
        JwksSource,
        Mode,
        Provider,
        RoleClaims,
        Tls,
    )

__all__ = [
    "ALGORITHMS",
    "ANONYMOUS",
    "BUILTIN_ROLES",
    "DEFAULT_ALGORITHMS",
    "INSTALL_WIDE",
    "LOCAL",
    "PERMISSIONS",
    "Access",
    "ApiKey",
    "AuditEvent",
    "AuthConfigError",
    "AuthSettings",
    "Binding",
    "ClaimNames",
    "CliLogin",
    "Decision",
    "Held",
    "JwksSource",
    "Mode",
    "PermissionDenied",
    "Principal",
    "Provider",
    "Role",
    "RoleClaims",
    "Tls",
    "Tokens",
    "Unauthenticated",
    "device_login",
    "forget_login",
    "keep_login",
    "key_hash",
    "login_token",
    "new_key",
    "pkce_login",
    "read_credential",
]

__getattr__ = lazy_exports(__name__, __file__)
