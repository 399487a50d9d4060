"""What both sides of the evaluator plugin protocol share: the service's methods and their
messages (``proto/evalsi/plugin/v1alpha1/plugin.proto``), the socket variable, and the message
size both sides accept."""

from __future__ import annotations

from typing import Any

from evalsi._proto.evalsi.plugin.v1alpha1 import plugin_pb2 as pb

SERVICE = "evalsi.plugin.v1alpha1.EvaluatorPluginService"
SOCKET_ENV = "EVALSI_PLUGIN_SOCKET"
"""The unix socket a started plugin listens on (``unix:$EVALSI_PLUGIN_SOCKET``)."""
ENTRY_POINT_GROUP = "evalsi.plugins"
"""A plugin package names its evaluators under this entry-point group (``name = module:attr``,
the attribute a sequence of evaluators); ``python -m evalsi.plugins`` serves them."""
MAX_MESSAGE = 64 * 1024 * 1024
OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE),
    ("grpc.max_send_message_length", MAX_MESSAGE),
]

METHODS: dict[str, tuple[Any, Any]] = {
    "Describe": (pb.DescribeRequest, pb.DescribeResponse),
    "Evaluate": (pb.EvaluateRequest, pb.EvaluateResponse),
    "Reduce": (pb.ReduceRequest, pb.ReduceResponse),
}
