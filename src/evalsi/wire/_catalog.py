"""Catalog entries (packs, connectors) and dataset versions to and from proto.

Evaluator manifests convert in ``_results`` (``manifest_to_proto``), beside the scores they
describe; packs, connectors and dataset versions have no core type: the values a client
returns are here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from evalsi._proto.evalsi.v1alpha1 import catalog_service_pb2
from evalsi._proto.evalsi.v1alpha1 import dataset_service_pb2 as ds_pb
from evalsi.wire._json import _opt_seconds, struct_from_proto


@dataclass(frozen=True)
class PackInfo:
    """A pack: its name, one line about it, its evaluators' names, the pip extra it needs and
    whether the project turns it on."""

    name: str
    description: str
    evaluators: tuple[str, ...]
    extra: str = ""
    enabled: bool = False


@dataclass(frozen=True)
class ConnectorInfo:
    """A connector: the name a spec uses, its roles ("target", "judge") and one line about it."""

    name: str
    roles: tuple[str, ...]
    description: str


@dataclass(frozen=True)
class DatasetInfo:
    """A dataset version a server keeps; ``path`` is what a run spec's dataset.path names."""

    name: str
    version: str
    rows: int
    created_at: float | None
    path: str


@dataclass(frozen=True)
class DatasetPage:
    """A dataset version and a page of its rows."""

    dataset: DatasetInfo
    rows: list[dict[str, Any]]
    next_page_token: str


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


def dataset_from_proto(message: ds_pb.Dataset) -> DatasetInfo:
    d = message
    created = _opt_seconds(d, "create_time")
    return DatasetInfo(str(d.name), str(d.version), int(d.rows), created, str(d.path))


def dataset_page_from_proto(message: ds_pb.GetDatasetResponse) -> DatasetPage:
    return DatasetPage(
        dataset_from_proto(message.dataset),
        [struct_from_proto(r) for r in message.rows],
        str(message.next_page_token),
    )
