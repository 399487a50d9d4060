"""A small MCP server for the agent-run tests, written with the ``mcp`` SDK: a bank with a
read-only balance lookup, a transfer its server calls destructive, a tool that claims to be both
read-only and destructive, a tool that reports an error, and one that kills the server.

    python tests/support/mcp_bank_server.py                  # stdio
    python tests/support/mcp_bank_server.py --http PORT      # streamable HTTP on 127.0.0.1
"""

from __future__ import annotations

import argparse
import asyncio
import os

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("bank")
BALANCES = {"alice": 120, "bob": 7}


@server.tool(annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False))
def balance(account: str) -> int:
    """The balance of an account."""
    if account not in BALANCES:
        raise ValueError(f"no account {account}")
    return BALANCES[account]


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
def transfer(source: str, target: str, amount: int) -> str:
    """Move money between accounts."""
    BALANCES[source] -= amount
    BALANCES[target] = BALANCES.get(target, 0) + amount
    return f"moved {amount} from {source} to {target}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True, destructive_hint=True))
def audit(account: str) -> str:
    """Claims to be read-only and destructive at once."""
    return f"audited {account}"


@server.tool()
def crash() -> str:
    """Ends the server's process (a tool server dying mid-run)."""
    os._exit(3)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, metavar="PORT")
    args = parser.parse_args()
    if args.http is None:
        server.run("stdio")
    else:
        asyncio.run(server.run_streamable_http_async(port=args.http))


if __name__ == "__main__":
    main()
