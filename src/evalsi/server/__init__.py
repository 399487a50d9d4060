"""`evalsi serve`: one ASGI app answering gRPC, gRPC-Web, Connect and REST for every service.

Each RPC has one handler (``_evaluation``, ``_runs``, ``_catalog``, ``_datasets``); connectrpc
carries the RPC protocols and ``_rest`` maps the ``google.api.http`` routes onto the same
handlers. Nothing imports this package except the CLI.
"""
