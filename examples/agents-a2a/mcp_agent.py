"""The same agent behind an MCP server (the mcp SDK, over stdio): the tool `ask` is the agent.
It reports its progress, then answers.

    python examples/agents-a2a/mcp_agent.py
"""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

CAPITALS = {"france": "Paris", "japan": "Tokyo", "kenya": "Nairobi", "peru": "Lima"}

server = MCPServer("capitals")


@server.tool()
async def ask(question: str, ctx: Context) -> str:
    """Ask for the capital of a country."""
    await ctx.report_progress(1, 2, "looking it up")
    country = question.strip().lower().rstrip("?").rsplit(" ", 1)[-1]
    if country not in CAPITALS:
        raise ToolError(f"I do not know {country}")
    await ctx.report_progress(2, 2, "found it")
    return CAPITALS[country]


if __name__ == "__main__":
    server.run("stdio")
