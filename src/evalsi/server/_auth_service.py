"""AuthService: who-am-i, projects, permissions and roles, a project's API keys and role
bindings, and the audit log, over ``state.access`` (every change checked there against
privilege escalation and audited)."""

from __future__ import annotations

import asyncio
from typing import Any

from connectrpc.code import Code
from connectrpc.errors import ConnectError
from google.protobuf import struct_pb2

from evalsi._proto.evalsi.v1alpha1 import auth_service_pb2 as pb
from evalsi.auth import INSTALL_WIDE, PERMISSIONS, Access, ApiKey, Binding
from evalsi.core import UserError
from evalsi.server._guard import current_principal, readable_projects
from evalsi.server._runs import _page_size
from evalsi.wire import timestamp as _ts


def _key(k: ApiKey, last_used: float | None) -> pb.ApiKey:
    return pb.ApiKey(
        id=k.id, name=k.name, prefix=k.prefix, project_id=k.project, role=k.role,
        labels=dict(k.labels), created_at=_ts(k.created_at or None), created_by=k.created_by,
        expires_at=_ts(k.expires_at), revoked_at=_ts(k.revoked_at),
        last_used_at=_ts(last_used), source=k.source,
    )  # fmt: skip


def _binding(b: Binding) -> pb.RoleBinding:
    return pb.RoleBinding(id=b.id, project_id=b.project, role=b.role, subject=b.subject)


class AuthHandler:
    def __init__(self, access: Access) -> None:
        self.access = access

    async def who_am_i(self, request: pb.WhoAmIRequest, ctx: Any) -> pb.WhoAmIResponse:
        p = current_principal()
        roles = []
        for project in sorted(self.access.authorizer.projects_of(p) | set(p.grants)):
            held = sorted({h.role for h in self.access.authorizer.held(p, project)})
            if held:
                roles.append(pb.ProjectRoles(project=project, roles=held))
        return pb.WhoAmIResponse(
            kind=p.kind, provider=p.provider, subject=p.subject, name=p.name,
            email=p.email if p.email_verified else "", groups=list(p.groups), roles=roles,
            authentication=self.access.enabled, expires_at=_ts(p.expires_at),
        )  # fmt: skip

    async def list_permissions(self, request: Any, ctx: Any) -> pb.ListPermissionsResponse:
        return pb.ListPermissionsResponse(
            permissions=[
                pb.Permission(name=n, description=d, install_wide=n in INSTALL_WIDE)
                for n, d in PERMISSIONS.items()
            ]
        )

    async def list_roles(self, request: Any, ctx: Any) -> pb.ListRolesResponse:
        return pb.ListRolesResponse(
            roles=[
                pb.Role(
                    name=r.name,
                    permissions=list(r.permissions),
                    inherits=list(r.inherits),
                    condition=r.condition,
                    builtin=r.builtin,
                    actions=sorted(r.actions),
                )
                for r in self.access.authorizer.roles.values()
            ]
        )

    async def list_projects(self, request: Any, ctx: Any) -> pb.ListProjectsResponse:
        p = current_principal()
        held = self.access.authorizer.projects_of(p)
        every = not self.access.enabled or "*" in held
        return pb.ListProjectsResponse(
            projects=[
                pb.Project(id=name, labels=labels)
                for name, labels in sorted(self.access.projects.items())
                if every or name in held
            ]
        )

    async def create_project(self, request: pb.CreateProjectRequest, ctx: Any) -> pb.Project:
        if request.id in self.access.projects:
            raise ConnectError(Code.ALREADY_EXISTS, f"project {request.id!r} exists already")
        await asyncio.to_thread(
            self.access.create_project, current_principal(), request.id, dict(request.labels)
        )
        return pb.Project(id=request.id, labels=dict(request.labels))

    async def create_api_key(
        self, request: pb.CreateApiKeyRequest, ctx: Any
    ) -> pb.CreateApiKeyResponse:
        expires = (
            request.expires_at.ToNanoseconds() / 1e9 if request.HasField("expires_at") else None
        )
        plaintext, record = await asyncio.to_thread(
            lambda: self.access.create_key(
                current_principal(),
                name=request.name,
                project=request.project_id,
                role=request.role,
                expires_at=expires,
                labels=dict(request.labels),
            )
        )
        return pb.CreateApiKeyResponse(api_key=_key(record, None), key=plaintext)

    async def list_api_keys(self, request: pb.ListApiKeysRequest, ctx: Any) -> Any:
        keys = await asyncio.to_thread(self.access.list_keys, request.project_id)
        used = self.access.keys.last_used
        return pb.ListApiKeysResponse(api_keys=[_key(k, used.get(k.id)) for k in keys])

    async def revoke_api_key(self, request: pb.RevokeApiKeyRequest, ctx: Any) -> pb.ApiKey:
        await asyncio.to_thread(
            self.access.revoke_key, current_principal(), request.id, request.project_id
        )
        found = [k for k in self.access.list_keys(request.project_id) if k.id == request.id]
        return _key(found[0], None) if found else pb.ApiKey(id=request.id)

    async def create_role_binding(self, request: pb.CreateRoleBindingRequest, ctx: Any) -> Any:
        binding = await asyncio.to_thread(
            self.access.bind, current_principal(), request.project_id, request.role,
            request.subject,
        )  # fmt: skip
        return _binding(binding)

    async def list_role_bindings(self, request: pb.ListRoleBindingsRequest, ctx: Any) -> Any:
        return pb.ListRoleBindingsResponse(
            role_bindings=[_binding(b) for b in self.access.bindings(request.project_id)]
        )

    async def delete_role_binding(self, request: pb.DeleteRoleBindingRequest, ctx: Any) -> Any:
        await asyncio.to_thread(
            self.access.unbind, current_principal(), request.id, request.project_id
        )
        return pb.DeleteRoleBindingResponse()

    async def list_audit_events(self, request: pb.ListAuditEventsRequest, ctx: Any) -> Any:
        from evalsi.store import read_audit

        store = self.access.store
        if store is None:
            return pb.ListAuditEventsResponse()
        projects = [request.project_id] if request.project_id else readable_projects()
        before = None
        if request.page_token:
            if not request.page_token.isdigit():
                raise UserError("page_token: not a token this server gave")
            before = int(request.page_token)
        size = _page_size(request.page_size, 100, 1000)
        self.access.audit.flush()
        rows = await asyncio.to_thread(
            read_audit, store, None if projects is None else sorted(projects), limit=size,
            before=before, decision=request.decision, action=request.action,
        )  # fmt: skip
        events = []
        for r in rows:
            detail = struct_pb2.Struct()
            detail.update(r["detail"] or {})
            events.append(
                pb.AuditEvent(
                    time=_ts(r["time"]),
                    principal=r["principal"],
                    action=r["action"],
                    project_id=r["project_id"],
                    resource=r["resource"],
                    decision=r["decision"],
                    decided_by=r["decided_by"],
                    request_id=r["request_id"],
                    source=r["source"],
                    detail=detail,
                )
            )
        token = str(rows[-1]["pk"]) if len(rows) == size else ""
        return pb.ListAuditEventsResponse(events=events, next_page_token=token)
