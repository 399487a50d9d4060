"""One JSON request to an agent over HTTP, as the connector kinds ``responses`` and ``http``
send them: through the connectors' stack and the task's cassette.

The transport is ``connectors.HttpTarget`` with the whole body as its one placeholder, so these
agents get what every HTTP target has — the shared aiohttp session, the server's egress policy
checked at connect time on every address a name resolves to, retries with backoff that honour
``Retry-After``, the circuit breaker, redirects refused, secrets kept out of messages — and
nothing here speaks HTTP itself. The request goes through ``_cassette.exchange``: a recorded
task replays its replies with no call at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from evalsi.agents._cassette import exchange
from evalsi.connectors import (
    EgressPolicy,
    HttpTarget,
    Resilience,
    Secret,
    TargetError,
    resolve_secret,
)
from evalsi.core import Content, JsonValue, UserError

MAX_REPLY_BYTES = 16 * 1024 * 1024
"""A reply larger than this (as JSON) is refused before it reaches the trajectory, the cassette
and the store: one task's agent must not fill them."""


class AgentEndpoint:
    """``method`` JSON requests to ``url``; the reply is parsed JSON.

    Example:
        >>> AgentEndpoint("http://127.0.0.1:9/agent", channel="http")
        AgentEndpoint('http', 'http://127.0.0.1:9/agent')
    """

    def __init__(
        self,
        url: str,
        *,
        channel: str,
        method: str = "POST",
        headers: Mapping[str, str | Secret] | None = None,
        resilience: Resilience | None = None,
        timeout: float = 300.0,
    ) -> None:
        self.url = url
        self.channel = channel
        self._target = HttpTarget(
            url,
            method=method,
            body="{{input}}",
            output="$",
            headers=headers,
            resilience=resilience,
            timeout=timeout,
            max_bytes=2 * MAX_REPLY_BYTES,  # its bytes, cut while read (whitespace allowed)
        )

    def __repr__(self) -> str:
        return f"AgentEndpoint({self.channel!r}, {self.url!r})"

    async def send(self, body: JsonValue) -> JsonValue:
        """The agent's JSON reply to ``body``, live or from the task's cassette.

        A reply that is not JSON, a 429, a 5xx or a dropped connection is an ``InfraError``
        after the retries; another 4xx is a ``TargetError``.
        """

        async def live() -> JsonValue:
            where = self._target.describe()["url"]
            try:
                out = await self._target.invoke(Content.of_json(body))
            except (KeyError, TypeError, ValueError) as e:
                # HttpTarget also reads the reply as Content: a reply shaped like tagged content
                # that is not ({"tensor": {"values": ["x"]}}) lands here.
                raise TargetError(f"{where} answered JSON evalsi cannot read: {e}") from None
            raw = out.raw
            size = len(orjson.dumps(raw))
            if size > MAX_REPLY_BYTES:
                raise TargetError(
                    f"{where} answered {size:,} bytes of JSON, more than the "
                    f"{MAX_REPLY_BYTES:,} an agent's reply may hold"
                )
            return raw

        return await exchange(self.channel, body, live)


def egress_checked(egress: EgressPolicy | None, url: str, where: str) -> None:
    """The static egress check of ``url`` (a clear refusal before any task); the connect-time
    check still judges every address the name resolves to."""
    if egress is not None:
        egress.check_url(url, where=where)


def header_values(
    headers: Mapping[str, str], where: str, *, replaying: bool = False
) -> dict[str, str | Secret]:
    """Headers with every ``env:NAME`` / ``file:PATH`` value read from there (as a ``Secret``,
    never shown); left out on a pure replay, which reaches no agent."""
    out: dict[str, str | Secret] = {}
    for name, value in headers.items():
        if replaying and value.startswith(("env:", "file:")):
            continue
        out[name] = (
            secret(value, f"{where}.{name}") if value.startswith(("env:", "file:")) else value
        )
    return out


def secret(ref: str, where: str) -> Secret:
    """The secret ``ref`` names, or a ``UserError`` naming ``where``."""
    try:
        return resolve_secret(ref)
    except UserError as e:
        raise UserError(f"{where}: {e.message}", hint=e.hint) from None


def excerpt(value: Any, limit: int = 200) -> str:
    """A short view of a value for an error message."""
    text = value if isinstance(value, str) else orjson.dumps(value, default=repr).decode()
    return text if len(text) <= limit else text[:limit] + "…"
