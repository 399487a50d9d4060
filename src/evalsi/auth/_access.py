"""``Access``: identity and access for one server, in one object.

It holds what the configuration and the store say (providers, keys, roles, bindings, rules,
projects), answers the two questions every surface asks (who is this? may they?), keeps the
audit log, and makes the changes ``AuthService`` asks for, each checked against privilege
escalation: a principal grants only what it holds itself in that project.
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from evalsi.auth._audit import AuditEvent, AuditLog
from evalsi.auth._authenticate import Authenticator
from evalsi.auth._decide import Authorizer, Decision
from evalsi.auth._errors import AuthConfigError, PermissionDenied
from evalsi.auth._keys import SHOWN, ApiKey, KeyRing, key_hash, new_key
from evalsi.auth._principal import LOCAL, Principal
from evalsi.auth._roles import Binding, Role, check_subject, resolve_roles
from evalsi.auth._rules import compile_rules
from evalsi.auth._settings import AuthSettings
from evalsi.auth._vocabulary import VOCABULARY
from evalsi.core import ConditionError, NotFoundError, UserError, compile_condition

if TYPE_CHECKING:
    from evalsi.store import SqlStore

DEFAULT_PROJECT = "default"
_HASH = re.compile(r"sha256:[0-9a-f]{64}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
ALLOWED = Decision(True, "", "", "authentication is off")
HEADER_LOGGERS = ("hpack",)
"""Loggers that write request headers' values at DEBUG: hpack logs every HTTP/2 header it
decodes (``Decoded (b'authorization', b'Bearer evk_…')``), so a server that takes credentials
keeps them at INFO whatever level the root logger has."""


class Access:
    """Identity and access over ``settings`` and (for what the API changes) ``store``.

    Raises:
        AuthConfigError: every problem in the sections, each naming its place.
    """

    def __init__(
        self,
        settings: AuthSettings,
        store: SqlStore | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.enabled = settings.enabled
        self.store = store
        self.clock = clock
        problems: list[str] = []
        if self.enabled:
            _quiet_header_loggers()
        roles = self._roles(settings, problems)
        rules, wrong = compile_rules(settings.rules, "authorization.rules")
        problems += wrong
        self.projects: dict[str, dict[str, str]] = {DEFAULT_PROJECT: {}}
        self.projects.update({k: dict(v) for k, v in settings.projects.items()})
        self._config_bindings = self._bindings(settings, roles, problems)
        keys = self._config_keys(settings, roles, problems)
        if problems:
            raise AuthConfigError("\n".join(problems))
        db = _load(store) if store is not None and self.enabled else {}
        for row in db.get("projects", ()):
            self.projects.setdefault(row["id"], dict(row["labels"] or {}))
        keys += [_key_of(row) for row in db.get("keys", ())]
        self._api_bindings = [
            Binding(r["role"], r["subject"], r["project_id"], r["id"], _cel(r["subject"]))
            for r in db.get("bindings", ())
        ]
        self.keys = KeyRing(keys)
        self.authenticator = Authenticator(settings, self.keys)
        self.authorizer = Authorizer(roles, [*self._config_bindings, *self._api_bindings], rules)
        # auth.auditRetention: applied by the audit thread, started now (not at the first
        # event), so a server that records nothing still deletes what the retention ends.
        keeps = store is not None and self.enabled and settings.audit_retention_s is not None
        self.audit = AuditLog(self._write_audit, expire=self._expire_audit if keeps else None)
        if keeps:
            self.audit.start()

    # -- the two questions ----------------------------------------------------------------------
    async def authenticate(self, headers: Mapping[str, str]) -> Principal:
        """Who sent ``headers`` (``Unauthenticated`` when they may not come in)."""
        if not self.enabled:
            return LOCAL
        return await self.authenticator.authenticate(headers)

    def decide(
        self,
        principal: Principal,
        action: str,
        resource: Mapping[str, Any],
        request: Mapping[str, Any] | None = None,
        source: str = "",
        *,
        explain: bool = False,
    ) -> Decision:
        if not self.enabled:
            return replace(ALLOWED, action=action, project=str(resource.get("project", "")))
        project_labels = self.projects.get(str(resource.get("project", "")))
        if project_labels:  # conditions see the project's labels under the resource's own
            labels = {**project_labels, **(resource.get("labels") or {})}
            resource = {**resource, "labels": labels}
        return self.authorizer.decide(principal, action, resource, request, source, explain=explain)

    def readable(self, principal: Principal, action: str) -> frozenset[str] | None:
        """The projects where ``principal`` may take ``action`` (for list calls over every
        project); None when that is every project (authentication off)."""
        if not self.enabled:
            return None
        candidates = set(self.projects) | (self.authorizer.projects_of(principal) - {"*"})
        return frozenset(
            p
            for p in candidates
            if self.authorizer.decide(principal, action, {"project": p, "labels": {}}).allowed
        )

    def check_project(self, project: str) -> None:
        """``NotFoundError`` for a project nobody declared or created (authentication on)."""
        if self.enabled and project not in self.projects:
            raise NotFoundError(f"no project {project!r}")

    # -- changes (AuthService) ------------------------------------------------------------------
    def create_project(self, by: Principal, name: str, labels: Mapping[str, str]) -> None:
        if not _NAME.fullmatch(name) or len(name) > 64:
            raise UserError(f"project {name!r}: expected 1-64 letters, digits, '.', '_', '-'")
        store = self._need_store()
        row = {"id": name, "labels": dict(labels), "created_at": self.clock(),
               "created_by": by.id}  # fmt: skip
        from evalsi.store import insert_project

        if name in self.projects or not insert_project(store, row):
            raise UserError(f"project {name!r} exists already")
        self.projects[name] = dict(labels)
        self._audit(by, "projects.manage", name, f"project {name}", "created")

    def create_key(
        self,
        by: Principal,
        *,
        name: str,
        project: str,
        role: str,
        expires_at: float | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> tuple[str, ApiKey]:
        """A new key (its plaintext, shown once, and its record)."""
        self.check_project(project)
        if not _NAME.fullmatch(name):
            raise UserError(f"key name {name!r}: expected letters, digits, '.', '_', '-'")
        if name in self.keys.names():
            raise UserError(f"a live API key is named {name!r} already")
        self._may_grant(by, project, role)
        if expires_at is not None and expires_at <= self.clock():
            raise UserError("expires_at: the key would have expired already")
        plaintext = new_key()
        record = ApiKey(
            "key_" + secrets.token_hex(8), name, key_hash(plaintext), project, role,
            plaintext[:SHOWN], dict(labels or {}), self.clock(), by.id, expires_at,
        )  # fmt: skip
        from evalsi.store import insert_key

        insert_key(self._need_store(), _key_row(record))
        self.keys.add(record)
        self._audit(by, "access.manage", project, f"key {record.id}", "key created",
                    {"name": name, "role": role})  # fmt: skip
        return plaintext, record

    def list_keys(self, project: str) -> list[ApiKey]:
        from evalsi.store import list_keys

        self.check_project(project)
        return [_key_of(row) for row in list_keys(self._need_store(), project)]

    def revoke_key(self, by: Principal, key_id: str, project: str) -> None:
        from evalsi.store import revoke_key

        if not revoke_key(self._need_store(), key_id, project, self.clock()):
            raise NotFoundError(f"no live API key {key_id!r} in project {project!r}")
        self.keys.remove(key_id)
        self._audit(by, "access.manage", project, f"key {key_id}", "key revoked")

    def bindings(self, project: str | None = None) -> list[Binding]:
        every = [*self._config_bindings, *self._api_bindings]
        return [b for b in every if project is None or b.project in (project, "*")]

    def bind(self, by: Principal, project: str, role: str, subject: str) -> Binding:
        if project != "*":
            self.check_project(project)
        wrong = check_subject(subject)
        if wrong:
            raise UserError(f"subject {subject!r}: {wrong}")
        self._may_grant(by, project, role)
        binding = Binding(role, subject, project, "rb_" + secrets.token_hex(8), _cel(subject))
        from evalsi.store import insert_binding

        insert_binding(self._need_store(), {
            "id": binding.id, "project_id": project, "role": role, "subject": subject,
            "created_at": self.clock(), "created_by": by.id,
        })  # fmt: skip
        self._api_bindings.append(binding)
        self._rebuild()
        self._audit(by, "access.manage", project, f"binding {binding.id}", "binding created",
                    {"role": role, "subject": subject})  # fmt: skip
        return binding

    def unbind(self, by: Principal, binding_id: str, project: str) -> None:
        from evalsi.store import delete_binding

        if not delete_binding(self._need_store(), binding_id, project):
            raise NotFoundError(f"no role binding {binding_id!r} in project {project!r}")
        self._api_bindings = [b for b in self._api_bindings if b.id != binding_id]
        self._rebuild()
        self._audit(by, "access.manage", project, f"binding {binding_id}", "binding deleted")

    def record(self, event: AuditEvent) -> None:
        if self.enabled:
            self.audit.record(event)

    def close(self) -> None:
        self.audit.close()

    # -- inside ---------------------------------------------------------------------------------
    def _may_grant(self, by: Principal, project: str, role: str) -> None:
        why = self.authorizer.can_grant(by, project, role)
        if why is not None:
            self._audit(by, "access.manage", project, f"role {role}", "grant refused",
                        {"why": why}, decision="deny")  # fmt: skip
            raise PermissionDenied(why)

    def _audit(
        self,
        by: Principal,
        action: str,
        project: str,
        resource: str,
        what: str,
        detail: Mapping[str, Any] | None = None,
        *,
        decision: str = "allow",
    ) -> None:
        self.record(AuditEvent(by.id, action, project, resource, decision, what,
                               detail=dict(detail or {})))  # fmt: skip

    def _write_audit(self, rows: Any) -> None:
        if self.store is not None:
            from evalsi.store import write_audit

            write_audit(self.store, rows)

    def _expire_audit(self) -> int:
        retention = self.settings.audit_retention_s
        if self.store is None or retention is None:
            return 0
        from evalsi.store import expire_audit

        return expire_audit(self.store, self.clock() - retention)

    def _need_store(self) -> SqlStore:
        if self.store is None:
            raise UserError("this needs the server's store")
        return self.store

    def _rebuild(self) -> None:
        a = self.authorizer
        self.authorizer = Authorizer(
            a.roles, [*self._config_bindings, *self._api_bindings], a.rules
        )

    @staticmethod
    def _roles(settings: AuthSettings, problems: list[str]) -> dict[str, Role]:
        roles, wrong = resolve_roles(settings.roles)
        problems += wrong
        for name, role in list(roles.items()):
            if role.condition:
                try:
                    program = compile_condition(role.condition, VOCABULARY)
                except ConditionError as e:
                    problems.append(f"rbac.roles ({name}).condition: {e}")
                    continue
                roles[name] = replace(role, program=program)
        return roles

    def _bindings(
        self, settings: AuthSettings, roles: Mapping[str, Role], problems: list[str]
    ) -> list[Binding]:
        out = []
        for i, (role, subject, project) in enumerate(settings.bindings):
            at = f"rbac.bindings[{i}]"
            if role not in roles:
                problems.append(f"{at}: no role named {role!r}")
            if project != "*" and project not in self.projects:
                problems.append(f"{at}: no project {project!r} (declare it under projects:)")
            wrong = check_subject(subject)
            if wrong:
                problems.append(f"{at}: subject {subject!r}: {wrong}")
                continue
            try:
                program = _cel(subject)
            except ConditionError as e:
                problems.append(f"{at}: subject {subject!r}: {e}")
                continue
            if project != "*" and roles.get(role, None) is not None and roles[role].name == "owner":
                problems.append(f"{at}: owner is install-wide: bind it in project '*'")
            out.append(Binding(role, subject, project, program=program))
        return out

    def _config_keys(
        self, settings: AuthSettings, roles: Mapping[str, Role], problems: list[str]
    ) -> list[ApiKey]:
        out = []
        names: set[str] = set()
        for i, item in enumerate(settings.keys):
            at = f"auth.apiKeys.keys[{i}]"
            name, digest = str(item.get("name", "")), str(item.get("key", ""))
            project, role = str(item.get("project", "")), str(item.get("role", ""))
            if not _NAME.fullmatch(name) or name in names:
                problems.append(f"{at}.name: expected a unique name, got {name!r}")
            names.add(name)
            if not _HASH.fullmatch(digest):
                problems.append(
                    f"{at}.key: expected sha256:<64 hex digits> (the key's hash, never the key; "
                    "`evalsi auth keys hash` prints it)"
                )
            if role not in roles:
                problems.append(f"{at}.role: no role named {role!r}")
            if project != "*" and project not in self.projects:
                problems.append(f"{at}.project: no project {project!r}")
            labels = item.get("labels") or {}
            expires = item.get("expires_at")
            out.append(
                ApiKey(
                    f"config-{i}",
                    name,
                    digest,
                    project,
                    role,
                    digest[7:15],
                    dict(labels) if isinstance(labels, Mapping) else {},
                    expires_at=float(expires) if isinstance(expires, int | float) else None,
                    source="config",
                )
            )
        return out


def _quiet_header_loggers() -> None:
    for name in HEADER_LOGGERS:
        logger = logging.getLogger(name)
        if logger.getEffectiveLevel() < logging.INFO:
            logger.setLevel(logging.INFO)


def _cel(subject: str) -> Any:
    if not subject.startswith("cel:"):
        return None
    return compile_condition(subject[4:], VOCABULARY)


def _load(store: SqlStore) -> dict[str, list[dict[str, Any]]]:
    from evalsi.store import load_access

    return load_access(store)


def _key_of(row: Mapping[str, Any]) -> ApiKey:
    return ApiKey(
        row["id"], row["name"], row["hash"], row["project_id"], row["role"], row["prefix"],
        dict(row["labels"] or {}), row["created_at"], row["created_by"], row["expires_at"],
        row["revoked_at"],
    )  # fmt: skip


def _key_row(k: ApiKey) -> dict[str, Any]:
    return {
        "id": k.id, "name": k.name, "hash": k.hash, "prefix": k.prefix, "project_id": k.project,
        "role": k.role, "labels": dict(k.labels), "created_at": k.created_at,
        "created_by": k.created_by, "expires_at": k.expires_at, "revoked_at": None,
    }  # fmt: skip
