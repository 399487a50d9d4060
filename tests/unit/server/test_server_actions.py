"""The action table covers every RPC the server answers: a new RPC without an action fails
here, before it can ship unguarded."""

from __future__ import annotations

from pathlib import Path

from google.protobuf import descriptor_pool

import evalsi._proto.evalsi.v1alpha1
from evalsi.auth import PERMISSIONS
from evalsi.server._actions import ACTIONS, HEALTH

PROTO = Path(evalsi._proto.evalsi.v1alpha1.__file__).parent


def _services() -> list[str]:
    import importlib

    names = []
    for module in sorted(PROTO.glob("*_service_pb2.py")):
        loaded = importlib.import_module(f"evalsi._proto.evalsi.v1alpha1.{module.stem}")
        names += [s.full_name for s in loaded.DESCRIPTOR.services_by_name.values()]
    return [*names, "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"]


def test_every_rpc_has_an_action() -> None:
    import evalsi._proto.grpc.health.v1.health_pb2
    import evalsi._proto.grpc.reflection.v1.reflection_pb2  # noqa: F401

    pool = descriptor_pool.Default()
    missing = [
        f"{service}/{m.name}"
        for service in _services()
        for m in pool.FindServiceByName(service).methods
        if f"{service}/{m.name}" not in ACTIONS
    ]
    assert not missing, f"RPCs with no action in server/_actions.py: {missing}"
    assert len(_services()) >= 11  # every evalsi service, health and reflection


def test_every_action_is_a_permission() -> None:
    unknown = {a.action for a in ACTIONS.values()} - set(PERMISSIONS) - {HEALTH}
    assert not unknown
