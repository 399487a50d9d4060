"""How the server speaks, beside connectrpc's gRPC, gRPC-Web and Connect: the REST gateway
(``_rest``) and its OpenAPI document (``_openapi``), the fast proto3 JSON codec
(``_json_codec``), gRPC reflection (``_reflection``) and health (``_health``), and grpcio's
native gRPC port (``_grpc_port``). They carry requests to the handlers; none knows a service.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalsi.core import lazy_exports

if TYPE_CHECKING:
    from evalsi.server.protocol._grpc_port import GrpcPort
    from evalsi.server.protocol._health import HealthHandler
    from evalsi.server.protocol._json_codec import FastJSONCodec, message_to_dict, parse_dict
    from evalsi.server.protocol._openapi import build_openapi, message_schema
    from evalsi.server.protocol._reflection import (
        V1ALPHA_SERVICE,
        ReflectionHandler,
        V1AlphaReflectionASGIApplication,
    )
    from evalsi.server.protocol._rest import handler_attr, read_body, rest_routes, to_json_bytes

__all__ = [
    "V1ALPHA_SERVICE",
    "FastJSONCodec",
    "GrpcPort",
    "HealthHandler",
    "ReflectionHandler",
    "V1AlphaReflectionASGIApplication",
    "build_openapi",
    "handler_attr",
    "message_schema",
    "message_to_dict",
    "parse_dict",
    "read_body",
    "rest_routes",
    "to_json_bytes",
]

# Imported on first use (core/_lazy.py): the server loads only the pieces its config asks for.
__getattr__ = lazy_exports(__name__, __file__)
