"""PolicyService calls for ``AsyncClient`` (a mixin).

``AsyncPolicyMixin`` needs what ``AsyncClient`` has: ``url``, ``settings``, ``_transport`` and
``_call``; it builds its ``PolicyServiceClient`` on first use.

A policy file is sent as text (``ApplyPolicyRequest.yaml``), so the server's errors name its
lines; ``apply_policy`` puts the file's name back in front of them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from pyqwest import Client as HTTPClient
from pyqwest import HTTPTransport

from evalsi._proto.evalsi.v1alpha1 import policy_pb2
from evalsi._proto.evalsi.v1alpha1 import policy_service_pb2 as pb
from evalsi._proto.evalsi.v1alpha1.policy_service_connect import PolicyServiceClient
from evalsi.client._common import Settings
from evalsi.core import UserError
from evalsi.policies import PolicyStats
from evalsi.specs import read_spec_text
from evalsi.wire import summary_from_proto

SERVER_SOURCE = "policy"
"""How the server names a policy sent as text in its error messages."""


@dataclass(frozen=True, slots=True)
class PolicyInfo:
    """A policy as a server applied it."""

    name: str
    project_id: str
    run_id: str
    spec_hash: str
    applied_at: float
    spec: dict[str, Any] = field(default_factory=dict)
    changed: bool = True

    def to_dict(self) -> dict[str, Any]:
        """Every field but the spec."""
        return {k: v for k, v in asdict(self).items() if k != "spec"}


def policy_info(message: pb.Policy, changed: bool = True) -> PolicyInfo:
    return PolicyInfo(
        name=message.name,
        project_id=message.project_id,
        run_id=message.run_id,
        spec_hash=message.spec_hash,
        applied_at=message.apply_time.ToNanoseconds() / 1e9,
        spec=json_format.MessageToDict(message.spec),
        changed=changed,
    )


def stats_from_proto(message: pb.PolicyStats) -> PolicyStats:
    return PolicyStats(
        name=message.name,
        project=message.project_id,
        selected=message.selected,
        sampled=message.sampled,
        evaluated=message.evaluated,
        skipped=dict(message.skipped),
        errors=message.errors,
        alerts_fired=message.alerts_fired,
        alert_failures=message.alert_failures,
        promoted=message.promoted,
        window=[summary_from_proto(m) for m in message.window],
        window_seconds=message.window_seconds,
        firing=list(message.firing),
        outcomes=dict(message.outcomes),
        forced_by_feedback=message.forced_by_feedback,
        sink_sent=message.sink_sent,
        sink_failures=message.sink_failures,
    )


def _named(error: UserError, shown: str) -> UserError:
    """The server's ``policy:12: ...`` lines as ``<file>:12: ...``."""
    lines = [
        shown + line[len(SERVER_SOURCE) :] if line.startswith(SERVER_SOURCE + ":") else line
        for line in error.message.splitlines()
    ]
    return UserError("\n".join(lines), hint=error.hint)


class AsyncPolicyMixin:
    """``apply_policy``, ``list_policies``, ``get_policy``, ``delete_policy``, ``policy_stats``."""

    url: str
    settings: Settings
    _transport: HTTPTransport
    _call: Callable[..., Any]
    _policies_client: PolicyServiceClient | None = None

    @property
    def _policies(self) -> PolicyServiceClient:
        if self._policies_client is None:
            self._policies_client = PolicyServiceClient(
                self.url,
                protocol=self.settings.protocol_type,
                http_client=HTTPClient(self._transport),
                send_compression=None,
            )
        return self._policies_client

    async def apply_policy(
        self,
        policy: str | os.PathLike[str] | Mapping[str, Any],
        *,
        project_id: str = "",
    ) -> PolicyInfo:
        """Apply a policy: a YAML file's path, YAML text, or the document as a mapping."""
        request = pb.ApplyPolicyRequest(project_id=project_id)
        shown = ""
        if isinstance(policy, Mapping):
            message = policy_pb2.OnlineEvalPolicy()
            try:
                json_format.ParseDict(dict(policy), message)
            except json_format.ParseError as e:
                raise UserError(f"the policy does not fit the OnlineEvalPolicy message: {e}") from e
            request.policy.CopyFrom(message)
        elif isinstance(policy, os.PathLike) or not ("\n" in policy or policy.lstrip()[:1] == "{"):
            shown = str(policy)
            # As ``--check`` reads it: a missing, unreadable, binary or huge file is a SpecError.
            request.yaml = read_spec_text(Path(policy), shown, "policy")
        else:
            request.yaml = policy
        try:
            response = await self._call(self._policies.apply_policy, request)
        except UserError as e:
            raise _named(e, shown) if shown else e from None
        return policy_info(response.policy, response.changed)

    async def list_policies(self, *, project_id: str = "") -> list[PolicyInfo]:
        request = pb.ListPoliciesRequest(project_id=project_id)
        response = await self._call(self._policies.list_policies, request)
        return [policy_info(p) for p in response.policies]

    async def get_policy(self, name: str, *, project_id: str = "") -> PolicyInfo:
        request = pb.GetPolicyRequest(name=name, project_id=project_id)
        return policy_info((await self._call(self._policies.get_policy, request)).policy)

    async def delete_policy(self, name: str, *, project_id: str = "") -> None:
        request = pb.DeletePolicyRequest(name=name, project_id=project_id)
        await self._call(self._policies.delete_policy, request)

    async def policy_stats(self, name: str, *, project_id: str = "") -> PolicyStats:
        request = pb.GetPolicyStatsRequest(name=name, project_id=project_id)
        response = await self._call(self._policies.get_policy_stats, request)
        return stats_from_proto(response.stats)
