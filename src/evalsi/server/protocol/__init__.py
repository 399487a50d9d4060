"""How the server speaks, beside connectrpc's gRPC, gRPC-Web and Connect: the REST gateway
(``_rest``) and its OpenAPI document (``_openapi``), the fast proto3 JSON codec
(``_json_codec``), gRPC reflection (``_reflection``) and health (``_health``), and grpcio's
native gRPC port (``_grpc_port``). They carry requests to the handlers; none knows a service.
"""
