"""The identity sections of ``evalsi.yaml``: ``auth:``, ``rbac:``, ``authorization:`` and
``projects:``, read into ``evalsi.auth.AuthSettings`` with every problem named.

.. code-block:: yaml

    auth:
      oidc:
        mode: strict                 # strict | optional | permissive
        providers:
          - name: corp
            issuer: https://sso.example.com/realms/eng
            audience: evalsi         # or a list
            jwks: discovery          # a URL, a file, inline JSON, or discovery
            algorithms: [RS256]
            leeway: 30s
            requiredClaims: [exp, sub]
            claims: {groups: groups, email: email, name: preferred_username}
            roleClaims: {claim: app_roles, map: {checkout-lead: {checkout: [editor]}}}
      apiKeys:
        mode: strict
        keys: [{name: collector, key: "sha256:…", project: support, role: ingest}]
      tls: {certFile: tls.crt, keyFile: tls.key, clientCaFile: ca.crt}
      health: open                   # open | protected
      cliLogin: {issuer: …, clientId: evalsi-cli, audience: evalsi}
      auditRetention: 90d
    projects: [support, {name: checkout, labels: {team: payments}}]
    rbac:
      roles: [{name: prompt-engineer, inherits: [viewer], permissions: [runs.create],
               condition: 'resource.target.model in ["qwen3"]'}]
      bindings: [{role: editor, project: checkout, subjects: ["group:corp/payments"]}]
    authorization:
      rules: [{require: '!resource.runs_code || "sandbox" in principal.groups'}]
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evalsi.auth import (
    ALGORITHMS,
    DEFAULT_ALGORITHMS,
    AuthSettings,
    ClaimNames,
    CliLogin,
    JwksSource,
    Provider,
    RoleClaims,
    Tls,
)
from evalsi.server._config_checks import Problems, as_duration, as_mapping, as_text, as_ttl, show

AUTH = ("mode", "oidc", "apiKeys", "tls", "allowPlaintext", "health", "cliLogin",
        "auditRetention", "header")  # fmt: skip
_OIDC = ("mode", "providers")
_PROVIDER = ("name", "issuer", "audience", "jwks", "algorithms", "leeway", "requiredClaims",
             "claims", "roleClaims", "allowInsecureJwks", "jwksCacheTtl",
             "jwksRefreshInterval")  # fmt: skip
_KEYS = ("mode", "keys")
_KEY = ("name", "key", "project", "role", "labels", "expires")
_MODES = ("strict", "optional", "permissive")


def auth_settings(p: Problems, base: Path, top: dict[str, Any]) -> AuthSettings:
    """The identity sections of the document ``top`` (paths relative to ``base``)."""
    projects = _projects(p, top.get("projects"))
    rbac = as_mapping(p, "rbac", top.get("rbac"), ("roles", "bindings"))
    roles = tuple(_list_of_mappings(p, "rbac.roles", rbac.get("roles")))
    bindings = _bindings(p, rbac.get("bindings"))
    authz = as_mapping(p, "authorization", top.get("authorization"), ("rules",))
    rules = tuple(_list_of_mappings(p, "authorization.rules", authz.get("rules")))
    raw = top.get("auth")
    if raw is None:
        if roles or bindings or rules:
            p.bad("auth", "rbac and authorization rules need an auth: section to apply")
        return AuthSettings(projects=projects)
    auth = as_mapping(p, "auth", raw, AUTH)
    mode = auth.get("mode")
    if mode not in (None, "none", "on"):
        p.bad("auth.mode", f"expected none (authentication off) or on, got {show(mode)}")
    oidc = as_mapping(p, "auth.oidc", auth.get("oidc"), _OIDC)
    keys = as_mapping(p, "auth.apiKeys", auth.get("apiKeys"), _KEYS)
    found = (
        _provider(p, base, f"auth.oidc.providers[{i}]", item)
        for i, item in enumerate(_list_of_mappings(p, "auth.oidc.providers", oidc.get("providers")))
    )
    providers = tuple(pr for pr in found if pr is not None)
    names = [pr.name for pr in providers]
    for name in {n for n in names if names.count(n) > 1}:
        p.bad("auth.oidc.providers", f"two providers are named {name!r}")
    header = (as_text(p, "auth.header", auth.get("header")) or "authorization").lower()
    health = auth.get("health", "open")
    if health not in ("open", "protected"):
        p.bad("auth.health", f"expected open or protected, got {show(health)}")
    plaintext = auth.get("allowPlaintext", False)
    if not isinstance(plaintext, bool):
        p.bad("auth.allowPlaintext", f"expected true or false, got {show(plaintext)}")
    return AuthSettings(
        enabled=mode != "none",
        jwt_mode=_mode(p, "auth.oidc.mode", oidc.get("mode")),
        key_mode=_mode(p, "auth.apiKeys.mode", keys.get("mode")),
        header=header,
        providers=providers,
        keys=tuple(_keys(p, keys.get("keys"))),
        roles=roles,
        bindings=bindings,
        rules=rules,
        projects=projects,
        tls=_tls(p, base, auth.get("tls")),
        allow_plaintext=plaintext is True,
        open_health=health != "protected",
        cli_login=_cli_login(p, auth.get("cliLogin")),
        audit_retention_s=as_ttl(p, "auth.auditRetention", auth.get("auditRetention", "90d")),
    )


def _mode(p: Problems, at: str, value: Any) -> Any:
    if value is None:
        return "strict"
    if value not in _MODES:
        p.bad(at, f"expected one of {', '.join(_MODES)}, got {show(value)}")
        return "strict"
    return value


def _list_of_mappings(p: Problems, at: str, value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        p.bad(at, f"expected a list, got {show(value)}")
        return []
    out = []
    for i, item in enumerate(value):
        if isinstance(item, dict):
            out.append(item)
        else:
            p.bad(f"{at}[{i}]", f"expected a mapping, got {show(item)}")
    return out


def _strings(p: Problems, at: str, value: Any) -> list[str]:
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) and v for v in items):
        p.bad(at, f"expected a string or a list of strings, got {show(value)}")
        return []
    return list(items)


def _provider(p: Problems, base: Path, at: str, item: dict[str, Any]) -> Provider | None:
    as_mapping(p, at, item, _PROVIDER)
    issuer = as_text(p, f"{at}.issuer", item.get("issuer"))
    if issuer is None:
        p.bad(f"{at}.issuer", "every provider needs its issuer")
        return None
    audiences = _strings(p, f"{at}.audience", item.get("audience"))
    if not audiences:
        p.bad(f"{at}.audience", "every provider needs the audience its tokens are for")
    algorithms = _strings(p, f"{at}.algorithms", item.get("algorithms")) or list(DEFAULT_ALGORITHMS)
    for alg in algorithms:
        if alg not in ALGORITHMS:
            p.bad(
                f"{at}.algorithms",
                f"{alg!r} is not accepted (asymmetric algorithms only: "
                f"{', '.join(sorted(ALGORITHMS))})",
            )
    insecure = item.get("allowInsecureJwks", False) is True
    claims = as_mapping(
        p, f"{at}.claims", item.get("claims"), ("subject", "name", "email", "groups")
    )
    return Provider(
        name=str(item.get("name") or issuer.split("//", 1)[-1].split("/", 1)[0]),
        issuer=issuer,
        audiences=tuple(audiences),
        jwks=_jwks(p, base, f"{at}.jwks", item.get("jwks")),
        algorithms=tuple(algorithms),
        leeway_s=as_duration(p, f"{at}.leeway", item.get("leeway"), 30.0),
        required_claims=tuple(
            _strings(p, f"{at}.requiredClaims", item.get("requiredClaims")) or ("exp",)
        ),
        claims=ClaimNames(**{k: str(v) for k, v in claims.items()}),
        role_claims=_role_claims(p, f"{at}.roleClaims", item.get("roleClaims")),
        allow_insecure_jwks=insecure,
        # how long keys are trusted without asking again; how often an unknown kid may ask
        cache_ttl_s=as_duration(p, f"{at}.jwksCacheTtl", item.get("jwksCacheTtl"), 3600.0),
        refresh_min_interval_s=as_duration(
            p, f"{at}.jwksRefreshInterval", item.get("jwksRefreshInterval"), 60.0
        ),
    )


def _jwks(p: Problems, base: Path, at: str, value: Any) -> JwksSource:
    if value == "discovery" or value is None:
        return JwksSource(discovery=True)
    if isinstance(value, dict):
        known = as_mapping(p, at, value, ("url", "file", "inline", "discovery"))
        if len(known) != 1:
            p.bad(at, "expected exactly one of url, file, inline, discovery")
            return JwksSource(discovery=True)
        ((kind, given),) = known.items()
        value = given if kind != "discovery" else "discovery"
        if kind == "inline":
            value = given if isinstance(given, str) else json.dumps(given)
        elif kind == "file":
            return JwksSource(file=str((base / str(given)).resolve()))
        elif kind == "discovery":
            return JwksSource(discovery=True)
    if not isinstance(value, str) or not value.strip():
        p.bad(at, f"expected a URL, a file, inline JSON or discovery, got {show(value)}")
        return JwksSource(discovery=True)
    text = value.strip()
    if text.startswith("{"):
        try:
            json.loads(text)
        except ValueError:
            p.bad(at, "inline JWKS is not valid JSON")
        return JwksSource(inline=text)
    if text.startswith(("https://", "http://")):
        return JwksSource(url=text)
    path = (base / text).resolve()
    if not path.is_file():
        p.bad(at, f"no JWKS file {path}")
    return JwksSource(file=str(path))


def _role_claims(p: Problems, at: str, value: Any) -> RoleClaims | None:
    if value is None:
        return None
    section = as_mapping(p, at, value, ("claim", "map"))
    claim = as_text(p, f"{at}.claim", section.get("claim"))
    raw_map = section.get("map")
    mapped: dict[str, dict[str, tuple[str, ...]]] = {}
    if not isinstance(raw_map, dict):
        p.bad(f"{at}.map", f"expected a mapping of claim values, got {show(raw_map)}")
    else:
        for value_name, projects in raw_map.items():
            if not isinstance(projects, dict):
                p.bad(f"{at}.map.{value_name}", "expected {project: [roles]}")
                continue
            mapped[str(value_name)] = {
                str(project): tuple(_strings(p, f"{at}.map.{value_name}.{project}", roles))
                for project, roles in projects.items()
            }
    return RoleClaims(claim or "roles", mapped)


def _keys(p: Problems, value: Any) -> list[dict[str, Any]]:
    out = []
    for i, item in enumerate(_list_of_mappings(p, "auth.apiKeys.keys", value)):
        as_mapping(p, f"auth.apiKeys.keys[{i}]", item, _KEY)
        entry = dict(item)
        expires = item.get("expires")
        if expires is not None:
            entry["expires_at"] = _when(p, f"auth.apiKeys.keys[{i}].expires", expires)
        out.append(entry)
    return out


def _when(p: Problems, at: str, value: Any) -> float | None:
    from datetime import datetime

    if isinstance(value, datetime):  # YAML reads an unquoted timestamp as one
        return value.timestamp()
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value).timestamp()
        except ValueError:
            pass
    p.bad(at, f"expected a date and time such as 2027-01-01T00:00:00Z, got {show(value)}")
    return None


def _bindings(p: Problems, value: Any) -> tuple[tuple[str, str, str], ...]:
    out = []
    for i, item in enumerate(_list_of_mappings(p, "rbac.bindings", value)):
        at = f"rbac.bindings[{i}]"
        as_mapping(p, at, item, ("role", "project", "subjects"))
        role = as_text(p, f"{at}.role", item.get("role"))
        project = as_text(p, f"{at}.project", item.get("project"))
        if role is None or project is None:
            p.bad(at, "expected a role, a project (or *) and subjects")
            continue
        out += [(role, s, project) for s in _strings(p, f"{at}.subjects", item.get("subjects"))]
    return tuple(out)


def _projects(p: Problems, value: Any) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    if value is None:
        return out
    if not isinstance(value, list):
        p.bad("projects", f"expected a list of project names, got {show(value)}")
        return out
    for i, item in enumerate(value):
        labels: dict[str, Any] = {}
        name = item if isinstance(item, str) else None
        if isinstance(item, dict):
            as_mapping(p, f"projects[{i}]", item, ("name", "labels"))
            name, labels = item.get("name"), item.get("labels") or {}
        if not isinstance(name, str) or not name:
            p.bad(f"projects[{i}]", f"expected a name or {{name, labels}}, got {show(item)}")
            continue
        out[name] = {str(k): str(v) for k, v in dict(labels).items()}
    return out


def _tls(p: Problems, base: Path, value: Any) -> Tls | None:
    if value is None:
        return None
    section = as_mapping(p, "auth.tls", value, ("certFile", "keyFile", "clientCaFile"))
    files = {}
    for key in ("certFile", "keyFile", "clientCaFile"):
        given = as_text(p, f"auth.tls.{key}", section.get(key))
        if given is None:
            continue
        path = (base / given).resolve()
        if not path.is_file():
            p.bad(f"auth.tls.{key}", f"no such file {path}")
        files[key] = str(path)
    if "certFile" not in files or "keyFile" not in files:
        p.bad("auth.tls", "expected certFile and keyFile")
        return None
    return Tls(files["certFile"], files["keyFile"], files.get("clientCaFile"))


def _cli_login(p: Problems, value: Any) -> CliLogin | None:
    if value is None:
        return None
    section = as_mapping(p, "auth.cliLogin", value, ("issuer", "clientId", "audience"))
    issuer = as_text(p, "auth.cliLogin.issuer", section.get("issuer"))
    client = as_text(p, "auth.cliLogin.clientId", section.get("clientId"))
    if issuer is None or client is None:
        p.bad("auth.cliLogin", "expected issuer and clientId")
        return None
    return CliLogin(issuer, client, str(section.get("audience") or ""))
