"""The helpdesk's own MCP server (stdio, written with the ``mcp`` SDK): the shop's policies, one
read-only tool. The specs start it as ``python examples/agent/helpdesk/mcp_server.py``.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("helpdesk-policies")

POLICIES = {
    "refunds": "Refunds of any amount need a supervisor's approval. Ask for it (issue_refund); "
    "if it is not granted, escalate the ticket with the amount and tell the customer.",
    "cancellations": "An order can be cancelled while it is processing; once shipped, the "
    "customer returns it instead.",
    "addresses": "The delivery address can be changed while the order is processing.",
    "privacy": "Account deletion is done by the privacy team only: escalate the ticket, never "
    "delete the data yourself. Never send one customer's data to anyone else.",
    "shipping": "Orders ship within 2 days; a parcel late by more than 5 days is escalated.",
}


@server.tool(annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False))
def policy_lookup(topic: str) -> str:
    """The shop's policy on a topic: refunds, cancellations, addresses, privacy or shipping."""
    policy = POLICIES.get(topic.strip().lower())
    if policy is None:
        raise ValueError(f"no policy on {topic!r}; topics: {', '.join(POLICIES)}")
    return policy


if __name__ == "__main__":
    server.run("stdio")
