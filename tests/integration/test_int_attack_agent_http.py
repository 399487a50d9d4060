"""Hostile HTTP agents over a real loopback server: a reply far larger than an agent's reply
may be is refused while it is read, not after the whole body sits in memory."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from evalsi.agents._post import MAX_REPLY_BYTES, AgentEndpoint
from evalsi.connectors import InfraError, TargetError, close_shared_session

CHUNK = 1 << 20
HUGE = 128 * CHUNK  # 8x what an agent's reply may hold


async def _flood(sent: list[int], length: bool) -> tuple[web.AppRunner, str]:
    """A server answering every POST with ``HUGE`` bytes of one valid JSON string, counting
    what it managed to write before the client hung up."""

    async def handler(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        if length:
            response.content_length = HUGE + 2
        await response.prepare(request)
        try:
            await response.write(b'"')
            for _ in range(HUGE // CHUNK):
                await response.write(b"a" * CHUNK)
                sent[0] += CHUNK
            await response.write(b'"')
        except (ConnectionError, RuntimeError):
            pass
        return response

    app = web.Application()
    app.router.add_post("/agent", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}/agent"


@pytest.mark.parametrize("length", [False, True], ids=["chunked", "content-length"])
def test_a_flooding_agent_is_cut_off_while_its_reply_is_read(length: bool) -> None:
    sent = [0]

    async def main() -> BaseException:
        runner, url = await _flood(sent, length)
        try:
            endpoint = AgentEndpoint(url, channel="http", timeout=60)
            with pytest.raises((TargetError, InfraError)) as caught:
                await endpoint.send({"input": "hi"})
            return caught.value
        finally:
            await close_shared_session()
            await runner.cleanup()

    error = asyncio.run(main())
    assert "bytes" in str(error)
    # socket buffers hold a few MiB more than the client read; the rest was never sent
    assert sent[0] <= 2 * MAX_REPLY_BYTES + 16 * CHUNK, f"the client read {sent[0]:,} bytes"
