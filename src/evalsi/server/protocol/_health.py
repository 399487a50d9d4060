"""``grpc.health.v1.Health``: what load balancers and ``grpc_health_probe`` ask.

Every mounted service (and "" for the server as a whole) is SERVING until shutdown starts;
then NOT_SERVING, so a balancer drains the server before it stops answering. ``Watch`` sends
the current status, then each change, and ends at shutdown.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from typing import Any

from connectrpc.code import Code
from connectrpc.errors import ConnectError

from evalsi._proto.grpc.health.v1.health_pb2 import (
    HealthCheckRequest,
    HealthCheckResponse,
    HealthListRequest,
    HealthListResponse,
)

SERVING = HealthCheckResponse.SERVING
NOT_SERVING = HealthCheckResponse.NOT_SERVING
SERVICE_UNKNOWN = HealthCheckResponse.SERVICE_UNKNOWN


class HealthHandler:
    """Implements the generated ``Health`` protocol."""

    def __init__(self, services: Iterable[str]) -> None:
        self._services = frozenset(["", *services])
        self._serving = True
        self._changed = asyncio.Event()

    def shutting_down(self) -> None:
        """Report NOT_SERVING from now on and end open watches."""
        self._serving = False
        self._changed.set()

    def status(self, service: str) -> HealthCheckResponse.ServingStatus:
        if service not in self._services:
            return SERVICE_UNKNOWN
        return SERVING if self._serving else NOT_SERVING

    async def check(self, request: HealthCheckRequest, ctx: Any, /) -> HealthCheckResponse:
        status = self.status(request.service)
        if status == SERVICE_UNKNOWN:
            # What the gRPC health protocol specifies for Check of an unknown service.
            raise ConnectError(Code.NOT_FOUND, f"unknown service {request.service!r}")
        return HealthCheckResponse(status=status)

    async def list(self, request: HealthListRequest, ctx: Any, /) -> HealthListResponse:
        response = HealthListResponse()
        for name in sorted(self._services - {""}):
            response.statuses[name].status = self.status(name)
        return response

    async def watch(
        self, request: HealthCheckRequest, ctx: Any, /
    ) -> AsyncIterator[HealthCheckResponse]:
        yield HealthCheckResponse(status=self.status(request.service))
        if not self._serving:
            return
        await self._changed.wait()
        yield HealthCheckResponse(status=self.status(request.service))
