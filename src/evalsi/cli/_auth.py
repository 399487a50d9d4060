"""``evalsi auth keys | check | audit``: a server's API keys, dry runs of its access decisions,
and its audit log (``evalsi login`` is in ``_login``)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from evalsi.cli._login import need_server
from evalsi.cli._output import note, print_json, print_table
from evalsi.cli._remote import add_server_flag, connect, project_of, server_of
from evalsi.core import UserError

KEYS = """\
A project's API keys: for CI jobs and services that cannot sign in. A key is shown once, when
it is created; the server keeps only its hash. Each key is scoped to one project and one role.

  evalsi auth keys create --name ci --project checkout --role runner --expires 90d --server URL
  evalsi auth keys list --project checkout --server URL
  evalsi auth keys revoke KEY_ID --project checkout --server URL

Before the first start (no one can call the server yet), create the first key in the server's
own store with --config evalsi.yaml instead of --server. For keys written in evalsi.yaml
(auth.apiKeys.keys), `evalsi auth keys hash --generate` makes a key and the hash to write.
"""

CHECK = """\
Dry-run an access decision with a server's configuration, offline: which rule or role allows
or denies ACTION on PROJECT, and every step on the way (deny rules, require rules, roles,
allow rules, default deny).

  evalsi auth check --config evalsi.yaml --action runs.create --project checkout \\
      --principal '{"provider": "github", "subject": "repo:acme/shop:ref:refs/heads/main"}'
  echo "$EVALSI_TOKEN" | evalsi auth check --config evalsi.yaml --credential-stdin \\
      --action runs.create --project checkout --resource '{"model": "gpt-4o"}'

--principal is a JSON object: kind (user, service, apikey), provider, subject, email, groups,
claims (a token's claims, as rules see them in `jwt`), grants ({project: [roles]}), labels.
--credential-stdin authenticates a token or key read from stdin as the server would (the JWKS
is fetched). Exit codes: 0 allowed, 1 denied, 2 bad input.
"""


def register(commands: Any) -> None:
    raw = argparse.RawDescriptionHelpFormatter
    auth = commands.add_parser(
        "auth",
        help="API keys, access dry runs and the audit log",
        description=KEYS,
        formatter_class=raw,
    )
    sub = auth.add_subparsers(dest="auth_command", metavar="SUBCOMMAND", required=True)
    keys = sub.add_parser(
        "keys", help="create, list and revoke API keys", description=KEYS, formatter_class=raw
    )
    ksub = keys.add_subparsers(dest="keys_command", metavar="ACTION", required=True)
    create = ksub.add_parser("create", help="a new API key, shown once")
    create.add_argument("--name", required=True, help="a name unique among live keys")
    create.add_argument("--role", required=True, help="the key's role in its project")
    create.add_argument(
        "--expires",
        metavar="WHEN",
        help="a duration (90d, 12h) or a date (2027-06-30); default: never",
    )
    create.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="K=V",
        help="a label rules and conditions can read (repeatable)",
    )
    _target_flags(create)
    create.set_defaults(handler=keys_create)
    listing = ksub.add_parser("list", help="a project's keys (prefixes, never the keys)")
    _target_flags(listing)
    listing.set_defaults(handler=keys_list)
    revoke = ksub.add_parser("revoke", help="revoke a key: it stops working at once")
    revoke.add_argument("key_id", metavar="KEY_ID", help="the key's id (key_...), from list")
    _target_flags(revoke)
    revoke.set_defaults(handler=keys_revoke)
    hashing = ksub.add_parser(
        "hash", help="the sha256: hash of a key (read from stdin), for evalsi.yaml"
    )
    hashing.add_argument(
        "--generate", action="store_true", help="make a new key and print it with its hash"
    )
    hashing.add_argument("--format", choices=("table", "json"), default="table")
    hashing.set_defaults(handler=keys_hash)

    check = sub.add_parser(
        "check",
        help="dry-run an access decision and print its path",
        description=CHECK,
        formatter_class=raw,
    )
    check.add_argument("--config", required=True, type=Path, help="the server's evalsi.yaml")
    check.add_argument("--action", required=True, help="a permission, e.g. runs.create")
    check.add_argument("--project", default="default")
    who = check.add_mutually_exclusive_group(required=True)
    who.add_argument("--principal", metavar="JSON", help="who asks (see above)")
    who.add_argument(
        "--credential-stdin",
        action="store_true",
        help="authenticate a token or API key read from stdin",
    )
    check.add_argument(
        "--resource",
        metavar="JSON",
        default="{}",
        help="the resource's fields conditions read (labels, model...)",
    )
    check.add_argument(
        "--request",
        metavar="JSON",
        default="{}",
        help="the request's fields rules read (request.*)",
    )
    check.add_argument("--format", choices=("table", "json"), default="table")
    check.set_defaults(handler=check_command)

    audit = sub.add_parser("audit", help="the audit log: denials, key and binding changes, runs")
    audit.add_argument("--project", default="", help="one project (default: all you may read)")
    audit.add_argument("--decision", choices=("allow", "deny"), help="only these decisions")
    audit.add_argument("--action", default="", help="only this action")
    audit.add_argument("--limit", type=int, default=50, help="at most N events (default: 50)")
    audit.add_argument("--format", choices=("table", "json"), default="table")
    add_server_flag(audit, project=False)
    audit.set_defaults(handler=audit_command)


def _target_flags(parser: argparse.ArgumentParser) -> None:
    add_server_flag(parser)
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="instead of --server: the server's evalsi.yaml, to work on its "
        "store directly (the first key, before anyone can call it)",
    )
    parser.add_argument("--format", choices=("table", "json"), default="table")


# -- API keys ---------------------------------------------------------------------------------
def keys_create(args: argparse.Namespace) -> int:
    project = project_of(args) or "default"
    expires = _when(args.expires)
    labels = _labels(args.label)
    if args.config is not None:
        access, by = _offline(args)
        try:
            key, record = access.create_key(
                by,
                name=args.name,
                project=project,
                role=args.role,
                expires_at=expires,
                labels=labels,
            )
        finally:
            access.close()
        shown: dict[str, Any] = {
            "id": record.id,
            "name": record.name,
            "project_id": record.project,
            "role": record.role,
            "prefix": record.prefix,
        }
    else:
        with connect(need_server(args, "auth keys create")) as client:
            key, shown = client.create_api_key(
                project, name=args.name, role=args.role, expires_at=expires, labels=labels
            )
    if args.format == "json":
        print_json({"key": key, "api_key": shown})
    else:
        print(key)
    note(
        f"API key {shown['id']} ({shown['role']} in {shown['project_id']}): shown this once; "
        "keep it in your secret store now"
    )
    return 0


def keys_list(args: argparse.Namespace) -> int:
    project = project_of(args) or "default"
    if args.config is not None:
        access, _ = _offline(args)
        try:
            rows = [_key_dict(k) for k in access.list_keys(project)]
        finally:
            access.close()
    else:
        with connect(need_server(args, "auth keys list")) as client:
            rows = client.list_api_keys(project)
    if args.format == "json":
        print_json(rows)
        return 0
    table = [
        (
            k["id"],
            k["name"],
            k["prefix"] + "…",
            k["role"],
            _date(k.get("expires_at")),
            "revoked " + _date(k["revoked_at"]) if k.get("revoked_at") else "live",
        )
        for k in rows
    ]
    print_table(
        ("id", "name", "prefix", "role", "expires", "state"),
        table,
        title=f"API keys of {project}",
    )
    return 0


def keys_revoke(args: argparse.Namespace) -> int:
    project = project_of(args) or "default"
    if args.config is not None:
        access, by = _offline(args)
        try:
            access.revoke_key(by, args.key_id, project)
        finally:
            access.close()
    else:
        with connect(need_server(args, "auth keys revoke")) as client:
            client.revoke_api_key(project, args.key_id)
    if args.format == "json":
        print_json({"id": args.key_id, "revoked": True})
    note(f"revoked {args.key_id} in {project}")
    return 0


def keys_hash(args: argparse.Namespace) -> int:
    from evalsi.auth import key_hash, new_key

    if args.generate:
        key = new_key()
    else:
        if sys.stdin.isatty():
            note("paste the key, then Enter")
        key = sys.stdin.readline().strip()
        if not key:
            raise UserError("no key on stdin", hint='echo "$KEY" | evalsi auth keys hash')
    digest = key_hash(key)
    if args.format == "json":
        print_json({"key": key, "hash": digest} if args.generate else {"hash": digest})
    elif args.generate:
        print(f"key:  {key}\nhash: {digest}")
        note("write the hash in auth.apiKeys.keys; give the key to its user (shown this once)")
    else:
        print(digest)
    return 0


def _offline(args: argparse.Namespace) -> tuple[Any, Any]:
    """The server's ``Access`` over its own store, and the operator acting (owner of every
    project: whoever can write the store's file or database can do anything anyway)."""
    import getpass

    from evalsi.auth import Access, Principal
    from evalsi.server import load_config
    from evalsi.store import SqlStore

    if server_of(args) is not None and getattr(args, "server", None):
        raise UserError("--config and --server cannot be combined: pick one")
    config = load_config(args.config)
    if not config.auth.enabled:
        note(f"{args.config} has authentication off: keys work once auth.mode is on")
    access = Access(config.auth, SqlStore.open(config.store))
    operator = Principal("local", "cli", getpass.getuser(), grants={"*": ("owner",)})
    return access, operator


def _key_dict(k: Any) -> dict[str, Any]:
    def iso(t: float | None) -> str | None:
        return None if t is None else datetime.fromtimestamp(t).astimezone().isoformat()

    return {
        "id": k.id,
        "name": k.name,
        "prefix": k.prefix,
        "project_id": k.project,
        "role": k.role,
        "labels": dict(k.labels),
        "created_by": k.created_by,
        "expires_at": iso(k.expires_at),
        "revoked_at": iso(k.revoked_at),
        "source": k.source,
    }


def _when(text: str | None) -> float | None:
    if text is None:
        return None
    from evalsi.specs import parse_duration

    seconds = parse_duration(text)
    if seconds is not None:
        return time.time() + seconds
    try:
        return datetime.fromisoformat(text).astimezone().timestamp()
    except ValueError:
        raise UserError(
            f"--expires {text!r}: expected a duration (90d, 12h) or a date (2027-06-30)"
        ) from None


def _labels(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UserError(f"--label {pair!r}: expected KEY=VALUE")
        out[key] = value
    return out


def _date(value: Any) -> str:
    return str(value)[:10] if value else "never"


# -- check, audit -----------------------------------------------------------------------------
def check_command(args: argparse.Namespace) -> int:
    from evalsi.auth import Access, Unauthenticated
    from evalsi.server import load_config

    resource = {**_object(args.resource, "--resource"), "project": args.project}
    request = _object(args.request, "--request")
    config = load_config(args.config)
    if not config.auth.enabled:
        raise UserError(f"{args.config} has authentication off: every call is allowed")
    store = None
    if Path(config.store).exists() or config.store.startswith("postgresql"):
        from evalsi.store import SqlStore

        store = SqlStore.open(config.store)  # keys and bindings made through the API
    access = Access(config.auth, store)
    try:
        if args.credential_stdin:
            credential = sys.stdin.readline().strip()
            try:
                principal = asyncio.run(
                    access.authenticate({"authorization": f"Bearer {credential}"})
                )
            except Unauthenticated as e:
                raise UserError(f"the server would refuse this credential: {e}") from None
        else:
            principal = _principal(_object(args.principal, "--principal"))
        decision = access.decide(principal, args.action, resource, request, explain=True)
    finally:
        access.close()
    if args.format == "json":
        print_json(
            {
                "allowed": decision.allowed,
                "principal": principal.id,
                "action": args.action,
                "project": args.project,
                "decided_by": decision.by,
                "path": list(decision.path),
            }
        )
    else:
        print(f"{principal.id} -> {args.action} in {args.project}")
        for step in decision.path:
            print(f"  {step}")
    return 0 if decision.allowed else 1


def _object(text: str, flag: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as e:
        raise UserError(f"{flag}: not JSON ({e})") from None
    if not isinstance(value, dict):
        raise UserError(f"{flag}: expected a JSON object")
    return value


_PRINCIPAL_KEYS = {
    "kind",
    "provider",
    "subject",
    "name",
    "email",
    "groups",
    "claims",
    "grants",
    "labels",
}


def _principal(spec: dict[str, Any]) -> Any:
    from evalsi.auth import Principal

    unknown = sorted(set(spec) - _PRINCIPAL_KEYS)
    if unknown:
        raise UserError(
            f"--principal: unknown keys {', '.join(unknown)}; "
            f"expected {', '.join(sorted(_PRINCIPAL_KEYS))}"
        )
    kind = spec.get("kind", "user")
    if kind not in ("user", "service", "apikey"):
        raise UserError(f"--principal: kind {kind!r}: expected user, service or apikey")
    grants = spec.get("grants", {})
    if not isinstance(grants, dict) or not all(
        isinstance(v, list) and all(isinstance(r, str) for r in v) for v in grants.values()
    ):
        raise UserError('--principal: grants: expected {"PROJECT": ["ROLE", ...]}')
    if not isinstance(spec.get("subject", ""), str) or not spec.get("subject"):
        raise UserError("--principal: subject: expected a non-empty string")
    return Principal(
        kind,
        str(spec.get("provider", "")),
        spec["subject"],
        name=str(spec.get("name", "")),
        email=str(spec.get("email", "")),
        email_verified=bool(spec.get("email")),
        groups=tuple(map(str, spec.get("groups", ()))),
        claims=dict(spec.get("claims", {})),
        grants={p: tuple(r) for p, r in grants.items()},
        labels=dict(spec.get("labels", {})),
    )


def audit_command(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise UserError(f"--limit {args.limit}: expected 1 or more")
    with connect(need_server(args, "auth audit")) as client:
        events = []
        for event in client.list_audit_events(
            args.project, decision=args.decision or "", action=args.action
        ):
            events.append(event)
            if len(events) >= args.limit:
                break
    if args.format == "json":
        print_json(events)
        return 0
    rows = [
        (
            e.get("time", "")[:19],
            e["principal"],
            e["action"],
            e["project_id"],
            e["resource"],
            e["decision"],
            e["decided_by"],
        )
        for e in events
    ]
    print_table(("time", "principal", "action", "project", "resource", "decision", "by"), rows)
    return 0
