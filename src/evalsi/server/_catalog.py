"""CatalogService: the evaluators, packs and connectors this server can run.

The same listing as ``evalsi catalog list``: evaluators come from the server's registry (the
built-in packs plus installed plugins), connectors from the tables the run engine checks specs
against, so the catalog cannot offer something a run would refuse.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

from evalsi._proto.evalsi.v1alpha1 import catalog_service_pb2 as pb
from evalsi.agents import AgentTarget
from evalsi.connectors import (
    Anthropic,
    AzureOpenAI,
    Bedrock,
    Gemini,
    HttpTarget,
    OpenAICompatible,
    PythonTarget,
)
from evalsi.core import NotFoundError, UserError, parse_ref
from evalsi.evaluators import PackOptIn, pack_of
from evalsi.packs import BUILTIN_PACKS
from evalsi.runs import JUDGE_CONNECTORS, MODEL_CONNECTORS, TARGET_KINDS
from evalsi.server._state import ServerState
from evalsi.wire import (
    ConnectorInfo,
    PackInfo,
    connector_to_proto,
    manifest_to_proto,
    pack_to_proto,
)

# Where each connector's one-line description is read from (its module docstring). The names
# themselves come from the run engine's tables above.
_CONNECTOR_CODE: dict[str, type] = {
    "openai-compatible": OpenAICompatible,
    "anthropic": Anthropic,
    "azure-openai": AzureOpenAI,
    "gemini": Gemini,
    "bedrock": Bedrock,
    "python": PythonTarget,
    "http": HttpTarget,
    "agent": AgentTarget,
}


class CatalogHandler:
    """Implements the generated ``CatalogService`` protocol over ``ServerState``."""

    def __init__(self, state: ServerState) -> None:
        self._state = state

    async def list_evaluators(
        self, request: pb.ListEvaluatorsRequest, ctx: Any, /
    ) -> pb.ListEvaluatorsResponse:
        items = [
            ev for ev in self._state.registry if not request.pack or pack_of(ev) == request.pack
        ]
        return pb.ListEvaluatorsResponse(
            evaluators=[manifest_to_proto(ev.manifest) for ev in items]
        )

    async def get_evaluator(
        self, request: pb.GetEvaluatorRequest, ctx: Any, /
    ) -> pb.GetEvaluatorResponse:
        if not request.ref.strip():
            raise UserError("ref: empty; give a name such as exact-match")
        parse_ref(request.ref)  # a malformed ref is bad input (400), not a missing one
        try:
            ev = self._state.registry.resolve(request.ref)
        except UserError as e:
            raise NotFoundError(f"ref: {e.message}", hint=e.hint) from None
        return pb.GetEvaluatorResponse(evaluator=manifest_to_proto(ev.manifest))

    async def list_packs(self, request: pb.ListPacksRequest, ctx: Any, /) -> pb.ListPacksResponse:
        members: dict[str, list[str]] = {name: [] for name in BUILTIN_PACKS}
        for ev in self._state.registry:
            members.setdefault(pack_of(ev), []).append(ev.manifest.ref.name)
        opt_in = PackOptIn(self._state.config.packs)
        packs = []
        for name, evs in members.items():
            builtin = BUILTIN_PACKS.get(name)
            description, extra = (builtin.description, builtin.extra) if builtin else ("", "")
            packs.append(PackInfo(name, description, tuple(evs), extra, opt_in.enabled(name)))
        return pb.ListPacksResponse(packs=[pack_to_proto(p) for p in packs])

    async def list_connectors(
        self, request: pb.ListConnectorsRequest, ctx: Any, /
    ) -> pb.ListConnectorsResponse:
        return pb.ListConnectorsResponse(
            connectors=[connector_to_proto(c) for c in connectors(self._state)]
        )


def connectors(state: ServerState) -> list[ConnectorInfo]:
    """Model connectors (targets and judges), then the other target kinds."""
    out: list[ConnectorInfo] = []
    for name in dict.fromkeys((*MODEL_CONNECTORS, *JUDGE_CONNECTORS)):
        roles = tuple(
            role
            for role, names in (("target", MODEL_CONNECTORS), ("judge", JUDGE_CONNECTORS))
            if name in names
        )
        out.append(ConnectorInfo(name, roles, _describe(name)))
    for kind in TARGET_KINDS:
        if kind == "model":  # a model target names one of the connectors above
            continue
        description = _describe(kind)
        if kind == "python" and not state.config.allow_python_targets:
            description += " (disabled on this server: allow_python_targets is off)"
        if kind == "agent" and not state.config.allow_python_targets:
            description += (
                " (function tools, started MCP servers, harnesses and python checkers are "
                "disabled on this server: allow_python_targets is off; MCP servers over HTTP, "
                "sandbox tools and exitCode / jsonFile checkers work)"
            )
        out.append(ConnectorInfo(kind, ("target",), description))
    return out


def _describe(name: str) -> str:
    code = _CONNECTOR_CODE.get(name)
    if code is None:
        return ""
    module = sys.modules.get(code.__module__)
    doc = (module.__doc__ if module else None) or inspect.getdoc(code) or ""
    return doc.strip().split("\n\n", 1)[0].replace("\n", " ")  # its first paragraph


__all__ = ["CatalogHandler", "connectors"]
