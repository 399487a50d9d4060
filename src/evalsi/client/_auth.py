"""AuthService calls for ``AsyncClient`` (a mixin, as ``_policies`` is for the PolicyService):
who am I, projects, a project's API keys and role bindings, and the audit log.

Answers are plain dicts in the REST API's JSON shape with snake_case names (what ``--json``
prints), so a script reads the same fields from the CLI, Python and ``curl``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from google.protobuf import json_format
from pyqwest import Client as HTTPClient
from pyqwest import HTTPTransport

from evalsi._proto.evalsi.v1alpha1 import auth_service_pb2 as pb
from evalsi._proto.evalsi.v1alpha1.auth_service_connect import AuthServiceClient
from evalsi.client._common import Settings
from evalsi.wire import timestamp as _ts


def as_dict(message: Any) -> dict[str, Any]:
    """A message as the REST API's JSON, snake_case, defaults included (``revoked_at``...)."""
    out: dict[str, Any] = json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    return out


class AsyncAuthMixin:
    """``whoami``, ``list_projects``, ``create_project``, ``create_api_key``,
    ``list_api_keys``, ``revoke_api_key``, ``create_role_binding``, ``list_role_bindings``,
    ``delete_role_binding``, ``list_audit_events``."""

    url: str
    settings: Settings
    _transport: HTTPTransport
    _call: Callable[..., Any]
    _auth_client: AuthServiceClient | None = None

    @property
    def _auth(self) -> AuthServiceClient:
        if self._auth_client is None:
            self._auth_client = AuthServiceClient(
                self.url,
                protocol=self.settings.protocol_type,
                http_client=HTTPClient(self._transport),
                send_compression=None,
            )
        return self._auth_client

    async def whoami(self) -> dict[str, Any]:
        """Who the server takes this client's credential for, and its roles per project
        (``authentication`` is false when the server runs without it)."""
        return as_dict(await self._call(self._auth.who_am_i, pb.WhoAmIRequest()))

    async def list_projects(self) -> list[dict[str, Any]]:
        """The projects this credential may read."""
        answer = await self._call(self._auth.list_projects, pb.ListProjectsRequest())
        return [as_dict(p) for p in answer.projects]

    async def create_project(
        self, project_id: str, *, labels: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        request = pb.CreateProjectRequest(id=project_id, labels=dict(labels or {}))
        return as_dict(await self._call(self._auth.create_project, request))

    async def create_api_key(
        self,
        project_id: str,
        *,
        name: str,
        role: str,
        expires_at: float | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> tuple[str, dict[str, Any]]:
        """A new key of ``project_id`` with ``role``: ``(key, its record)``. The key itself is
        in this answer only; the server keeps its hash."""
        request = pb.CreateApiKeyRequest(
            project_id=project_id,
            name=name,
            role=role,
            expires_at=_ts(expires_at),
            labels=dict(labels or {}),
        )
        answer = await self._call(self._auth.create_api_key, request)
        return answer.key, as_dict(answer.api_key)

    async def list_api_keys(self, project_id: str) -> list[dict[str, Any]]:
        """The keys of ``project_id`` (their prefixes, never the keys)."""
        request = pb.ListApiKeysRequest(project_id=project_id)
        answer = await self._call(self._auth.list_api_keys, request)
        return [as_dict(k) for k in answer.api_keys]

    async def revoke_api_key(self, project_id: str, key_id: str) -> dict[str, Any]:
        request = pb.RevokeApiKeyRequest(project_id=project_id, id=key_id)
        return as_dict(await self._call(self._auth.revoke_api_key, request))

    async def create_role_binding(
        self, project_id: str, *, role: str, subject: str
    ) -> dict[str, Any]:
        """Bind ``role`` in ``project_id`` to ``subject`` (``user:ISSUER_NAME/SUB``,
        ``email:…``, ``group:…``, ``key:…`` or ``cel:EXPR``)."""
        request = pb.CreateRoleBindingRequest(project_id=project_id, role=role, subject=subject)
        return as_dict(await self._call(self._auth.create_role_binding, request))

    async def list_role_bindings(self, project_id: str) -> list[dict[str, Any]]:
        request = pb.ListRoleBindingsRequest(project_id=project_id)
        answer = await self._call(self._auth.list_role_bindings, request)
        return [as_dict(b) for b in answer.role_bindings]

    async def delete_role_binding(self, project_id: str, binding_id: str) -> None:
        request = pb.DeleteRoleBindingRequest(project_id=project_id, id=binding_id)
        await self._call(self._auth.delete_role_binding, request)

    async def list_audit_events(
        self,
        project_id: str = "",
        *,
        decision: str = "",
        action: str = "",
        page_size: int = 100,
    ) -> AsyncIterator[dict[str, Any]]:
        """Audit events, newest first (every page, read as they are iterated)."""
        token = ""
        while True:
            request = pb.ListAuditEventsRequest(
                project_id=project_id,
                decision=decision,
                action=action,
                page_size=page_size,
                page_token=token,
            )
            answer = await self._call(self._auth.list_audit_events, request)
            for event in answer.events:
                yield as_dict(event)
            token = answer.next_page_token
            if not token:
                return
