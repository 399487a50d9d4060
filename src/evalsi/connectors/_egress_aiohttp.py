"""The egress policy applied inside aiohttp's connector, where every connection is made.

Two hooks, because aiohttp takes two paths to a socket:

- a host name goes through the resolver: ``EgressResolver`` wraps aiohttp's default one and
  judges each resolved address together with the name (so ``localhost``, an ``/etc/hosts``
  entry or a DNS answer that points inward is judged by where it points); denied addresses
  are dropped, and when none is left the first refusal is raised;
- an IP literal never reaches the resolver (``TCPConnector._resolve_host`` returns it as is),
  so ``EgressConnector.connect`` judges it first. ``connect`` is called for every request,
  including each hop of a redirect and a request that would reuse a pooled connection.

The DNS cache of the connector keeps only addresses the resolver allowed. Imported only when a
server builds a session with a policy; the embedded paths never load it.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from evalsi.connectors._egress import EgressDenied, EgressPolicy, literal_address

if TYPE_CHECKING:
    from aiohttp.client_reqrep import ClientRequest, ConnectionKey  # noqa: F401
    from aiohttp.connector import Connection
    from aiohttp.tracing import Trace


class EgressResolver(AbstractResolver):
    """Resolves with ``inner`` (default: aiohttp's), keeps the addresses ``policy`` allows."""

    def __init__(self, policy: EgressPolicy, inner: AbstractResolver | None = None) -> None:
        self.policy = policy
        self._inner = inner if inner is not None else DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.policy.check_name(host, port)  # a denied name is not even looked up
        found = await self._inner.resolve(host, port, family=family)
        kept: list[ResolveResult] = []
        first: EgressDenied | None = None
        for result in found:
            address = ipaddress.ip_address(result["host"])
            denied = self.policy.decide(host, address, port)
            if denied is None:
                kept.append(result)
            elif first is None:
                first = denied
        if not kept and first is not None:
            raise first
        return kept

    async def close(self) -> None:
        await self._inner.close()


class EgressConnector(aiohttp.TCPConnector):
    """A ``TCPConnector`` that connects only where ``policy`` allows."""

    def __init__(self, policy: EgressPolicy, **kwargs: Any) -> None:
        super().__init__(resolver=EgressResolver(policy), **kwargs)
        self.policy = policy

    async def connect(
        self, req: ClientRequest, traces: list[Trace], timeout: aiohttp.ClientTimeout
    ) -> Connection:
        host = req.url.raw_host or ""
        port = req.port or 0
        address = literal_address(host)
        if address is not None:
            self.policy.check(host, address, port)
        return await super().connect(req, traces, timeout)


def egress_connector(policy: EgressPolicy, *, limit: int) -> aiohttp.TCPConnector:
    """The connector of a session whose calls ``policy`` governs (same pool settings as the
    unguarded shared session)."""
    return EgressConnector(policy, limit=limit, limit_per_host=0, ttl_dns_cache=300)
