"""Catalog entries (packs, connectors) to and from proto.

Evaluator manifests convert in ``_results`` (``manifest_to_proto``), beside the scores they
describe; packs and connectors have no core type, so they travel as plain values.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from evalsi._proto.evalsi.v1alpha1 import catalog_service_pb2


class PackInfo(NamedTuple):
    """A pack: its name, one line about it, its evaluators' names, the pip extra it needs and
    whether the project turns it on."""

    name: str
    description: str
    evaluators: tuple[str, ...]
    extra: str = ""
    enabled: bool = False


class ConnectorInfo(NamedTuple):
    """A connector: the name a spec uses, its roles ("target", "judge") and one line about it."""

    name: str
    roles: tuple[str, ...]
    description: str


def pack_to_proto(pack: PackInfo) -> catalog_service_pb2.Pack:
    return catalog_service_pb2.Pack(
        name=pack.name,
        description=pack.description,
        evaluators=sorted(pack.evaluators),
        extra=pack.extra,
        enabled=pack.enabled,
    )


def pack_from_proto(message: catalog_service_pb2.Pack) -> PackInfo:
    return PackInfo(
        str(message.name),
        str(message.description),
        tuple(message.evaluators),
        str(message.extra),
        bool(message.enabled),
    )


def connector_to_proto(connector: ConnectorInfo) -> catalog_service_pb2.Connector:
    return catalog_service_pb2.Connector(
        name=connector.name, roles=",".join(connector.roles), description=connector.description
    )


def connector_from_proto(message: catalog_service_pb2.Connector) -> ConnectorInfo:
    roles: Iterable[str] = (r.strip() for r in str(message.roles).split(","))
    return ConnectorInfo(str(message.name), tuple(r for r in roles if r), str(message.description))
