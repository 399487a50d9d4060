"""An agent behind an MCP server (``mcp`` SDK), for the MCP-agent connector's tests: the tool
``ask`` is the agent, the prompt ``brief`` is another; what ``ask`` does depends on its input.

| input starts with | ``ask`` |
|---|---|
| ``work X`` | reports progress three times and logs twice, then answers ``X`` upper-cased |
| ``fail`` | answers with an error (``isError``) |
| ``die`` | ends the server's process mid-call |
| ``huge N`` | answers N characters |
| anything else | answers ``<style>: <input>`` (``style``: a further argument, default ``plain``) |

    python tests/support/mcp_agent_server.py               # stdio
    python tests/support/mcp_agent_server.py --http PORT   # streamable HTTP on 127.0.0.1
"""

from __future__ import annotations

import argparse
import asyncio
import os

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("agent")


@server.tool()
async def ask(input: str, ctx: Context, style: str = "plain") -> str:
    """Ask the agent."""
    word, _, rest = input.partition(" ")
    if word == "work":
        for i in range(1, 4):
            await ctx.report_progress(i, 3, f"step {i}")
        await ctx.info(f"working on {rest}")
        await ctx.warning("almost done")
        return rest.upper()
    if word == "fail":
        raise ToolError("the agent gave up")
    if word == "die":
        os._exit(3)
    if word == "huge":
        return "x" * int(rest)
    return f"{style}: {input}"


@server.prompt()
def brief(input: str, tone: str = "dry") -> list[dict[str, str]]:
    """A two-message briefing about the input."""
    return [
        {"role": "user", "content": f"brief me on {input}"},
        {"role": "assistant", "content": f"{tone} briefing: {input}"},
    ]


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
