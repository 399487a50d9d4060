"""The egress policy on the addresses an agent's MCP servers and connectors reach: their SDKs
connect with HTTP clients of their own, which the connectors' connect-time check does not see."""

from __future__ import annotations

import asyncio

from evalsi.connectors import EgressPolicy
from evalsi.core import UserError


async def check_resolved(policy: EgressPolicy, url: str, where: str) -> None:
    """The egress policy on every address ``url``'s host resolves to. The MCP SDK connects
    with its own HTTP client, which the connectors' connect-time check does not reach; a name
    that re-resolves elsewhere between this check and the connection (DNS rebinding) is not
    caught."""
    import socket
    import urllib.parse

    from evalsi.connectors import literal_address

    policy.check_url(url, where=where)
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if not host or literal_address(host) is not None:
        return
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as e:
        raise UserError(f"{where}: cannot resolve {host}: {e}") from None
    for info in infos:
        address = literal_address(str(info[4][0]))
        if address is not None:
            try:
                policy.check(host, address, port)
            except UserError as e:
                raise UserError(f"{where}: {e.message}", hint=e.hint) from None
