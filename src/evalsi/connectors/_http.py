"""HTTP on the hot path: one aiohttp session per event loop, and one request function that
turns every way a call can go wrong into an ``InfraError`` kind or a ``TargetError``.

aiohttp is imported on first use, so importing the connectors (to read a spec, to plan a dry
run) stays cheap.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from evalsi.connectors._egress import EgressDenied, EgressPolicy
from evalsi.connectors._errors import InfraError, InfraKind, TargetError
from evalsi.connectors._retry import parse_retry_after
from evalsi.connectors._secrets import Secret

if TYPE_CHECKING:
    import aiohttp

DEFAULT_CONNECTION_LIMIT = 256
"""Open connections per session (one session per event loop). Concurrency above it queues."""

_ERROR_EXCERPT = 300

MAX_BODY_BYTES = 256 * 1024 * 1024
"""A reply body larger than this is refused while it is read (``request_json``'s default): a
hostile or broken endpoint must not fill the process's memory before any check sees it."""

_sessions: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[EgressPolicy | None, aiohttp.ClientSession]
] = weakref.WeakKeyDictionary()
_limits: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, int] = weakref.WeakKeyDictionary()


async def shared_session(
    *, limit: int | None = None, egress: EgressPolicy | None = None
) -> aiohttp.ClientSession:
    """The session of the running event loop for ``egress``, created on first use.

    ``egress`` None (the embedded paths) calls any address; a server passes its policy and gets
    a session whose connector refuses what the policy denies (``_egress_aiohttp``), one session
    per policy. ``limit`` (connections) is remembered for the loop, so a run that sizes it
    first sizes every session its connectors open. Close them with ``close_shared_session()``
    before the loop ends (the run executor does).
    """
    loop = asyncio.get_running_loop()
    if limit is not None:
        _limits.setdefault(loop, limit)
    sessions = _sessions.setdefault(loop, {})
    session = sessions.get(egress)
    if session is None or session.closed:
        import aiohttp

        size = _limits.get(loop, DEFAULT_CONNECTION_LIMIT)
        if egress is None:
            connector = aiohttp.TCPConnector(limit=size, limit_per_host=0, ttl_dns_cache=300)
        else:
            connector = egress_connector(egress, limit=size)
        # No proxy settings from the environment: a target's URL is exactly what the spec says.
        session = aiohttp.ClientSession(connector=connector, trust_env=False)
        sessions[egress] = session
    return session


def egress_connector(
    policy: EgressPolicy, *, limit: int = DEFAULT_CONNECTION_LIMIT
) -> aiohttp.TCPConnector:
    """A connector that connects only where ``policy`` allows, for a session of one's own
    (the alert webhooks have theirs). aiohttp is imported here, not with the package."""
    from evalsi.connectors._egress_aiohttp import egress_connector as build

    return build(policy, limit=limit)


async def close_shared_session() -> None:
    """Close the running loop's sessions, if it has any."""
    loop = asyncio.get_running_loop()
    _limits.pop(loop, None)
    for session in _sessions.pop(loop, {}).values():
        if not session.closed:
            await session.close()


@dataclass(slots=True)
class HttpReply:
    """A 2xx reply, parsed."""

    data: Any
    status: int
    latency_ms: float


def public_url(url: str) -> str:
    """``url`` without its query string or user info, for messages."""
    base = url.split("?", 1)[0].split("#", 1)[0]
    scheme, sep, rest = base.partition("://")
    if sep and "@" in rest.split("/", 1)[0]:
        rest = rest.split("@", 1)[1]
    return f"{scheme}{sep}{rest}"


async def request_json(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    *,
    body: Any = None,
    headers: Mapping[str, str] | None = None,
    timeout: float,
    secrets: tuple[Secret, ...] = (),
    parse: bool = True,
    max_bytes: int = MAX_BODY_BYTES,
    encoded: bool = False,
) -> HttpReply:
    """Send one request; return the decoded JSON of a 2xx answer or raise.

    A redirect is never followed (a 3xx is a ``TargetError``), so the URL called is the one
    named. An address the session's egress policy refuses is ``InfraError("egress_denied")``.
    408, 429 and 5xx are ``InfraError`` (``timeout``, ``rate_limited``, ``server_error``, with
    ``Retry-After`` read); other 4xx are ``TargetError``; a body that is not JSON or is cut short
    is ``malformed_response``; no answer in time is ``timeout``; a refused or dropped connection
    is ``connection``. A body past ``max_bytes`` is a ``TargetError``, raised once that many
    bytes arrived (or at once, when ``Content-Length`` says so). Messages never carry a secret
    or the query string.

    ``body`` given as bytes is sent as they are (a signed request's payload); ``encoded`` sends
    ``url`` without requoting it (a signature covers the path exactly as written).
    """
    import aiohttp
    import yarl

    where = public_url(url)
    data = body if body is None or isinstance(body, bytes) else orjson.dumps(body)
    send_headers = dict(headers or {})
    if data is not None:
        send_headers.setdefault("Content-Type", "application/json")
    started = time.perf_counter()
    try:
        async with session.request(
            method,
            yarl.URL(url, encoded=True) if encoded else url,
            data=data,
            headers=send_headers,
            timeout=aiohttp.ClientTimeout(total=timeout),
            allow_redirects=False,
        ) as response:
            status = response.status
            raw = await _read_capped(response, max_bytes, where)
            retry_after = response.headers.get("Retry-After")
    except EgressDenied as e:
        # The server's egress policy refused the address; no request left (not retried).
        raise InfraError("egress_denied", f"{where}: {e.message}", endpoint=where) from e
    except TimeoutError as e:
        raise InfraError(
            "timeout", f"no answer from {where} within {timeout:g}s", endpoint=where
        ) from e
    except aiohttp.ClientPayloadError as e:
        raise InfraError(
            "malformed_response", f"{where} sent an incomplete body: {e}", endpoint=where
        ) from e
    except aiohttp.ClientResponseError as e:
        # Raised while reading a reply that breaks HTTP itself (bad status line, bad headers).
        raise InfraError(
            "malformed_response", f"{where} sent an unreadable reply: {e.message}", endpoint=where
        ) from e
    except aiohttp.ClientError as e:
        raise InfraError(
            "connection",
            f"cannot reach {where}: {_redact(connect_reason(e), secrets)}",
            endpoint=where,
        ) from e
    latency_ms = (time.perf_counter() - started) * 1000.0

    if 200 <= status < 300:
        if not parse:
            return HttpReply(raw, status, latency_ms)
        try:
            decoded = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            raise InfraError(
                "malformed_response",
                f"{where} answered HTTP {status} with a body that is not JSON: "
                f"{_excerpt(raw, secrets)!r}",
                status=status,
                endpoint=where,
            ) from e
        return HttpReply(decoded, status, latency_ms)

    detail = _error_detail(raw, secrets)
    message = f"HTTP {status} from {where}" + (f": {detail}" if detail else "")
    if status == 408:
        raise InfraError("timeout", message, status=status, endpoint=where)
    if status == 429 or status >= 500:
        kind: InfraKind = "rate_limited" if status == 429 else "server_error"
        after = parse_retry_after(retry_after)
        raise InfraError(kind, message, status=status, retry_after=after, endpoint=where)
    raise TargetError(message, status=status, endpoint=where, hint=_hint(status))


async def _read_capped(response: aiohttp.ClientResponse, max_bytes: int, where: str) -> bytes:
    """The body, or a ``TargetError`` as soon as it is known to exceed ``max_bytes``."""

    def too_large(size: str) -> TargetError:
        return TargetError(
            f"{where} answered {size} bytes, more than the {max_bytes:,} a reply may hold",
            status=response.status,
            endpoint=where,
        )

    declared = response.content_length
    if declared is not None and declared > max_bytes:
        raise too_large(f"{declared:,}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(1 << 16):
        size += len(chunk)
        if size > max_bytes:
            raise too_large(f"more than {max_bytes:,}")
        chunks.append(chunk)
    return b"".join(chunks)


def connect_reason(e: Exception) -> str:
    """Why a connection failed, in words a user acts on: refused, DNS, TLS, else aiohttp's."""
    import ssl

    import aiohttp

    text = str(e) or type(e).__name__
    if isinstance(e, aiohttp.ClientConnectorDNSError):
        why = e.os_error.strerror or str(e.os_error)
        return f"DNS lookup of {e.host} failed ({why})"
    if isinstance(e, aiohttp.ClientConnectorCertificateError):
        return f"TLS certificate of {e.host} rejected ({e.certificate_error})"
    if isinstance(e, aiohttp.ClientConnectorSSLError) or isinstance(
        getattr(e, "os_error", None), ssl.SSLError
    ):
        os_error = getattr(e, "os_error", None)
        why = getattr(os_error, "reason", None) or str(os_error or text)
        plain = " (is it plain HTTP? then use http://)" if why == "WRONG_VERSION_NUMBER" else ""
        return f"TLS handshake with {getattr(e, 'host', '?')} failed: {why}{plain}"
    if isinstance(e, aiohttp.ClientConnectorError):
        if isinstance(e.os_error, ConnectionRefusedError):
            return f"connection refused by {e.host}:{e.port} (nothing listens there)"
        if isinstance(e.os_error, TimeoutError):
            return f"connecting to {e.host}:{e.port} timed out"
    return text


def _hint(status: int) -> str | None:
    if status in (401, 403):
        return "check the API key the target's secretRef points to"
    if status == 404:
        return "check the base URL and the model name"
    return None


def _redact(text: str, secrets: tuple[Secret, ...]) -> str:
    for secret in secrets:
        text = secret.redact(text)
    return text


def _excerpt(raw: bytes, secrets: tuple[Secret, ...]) -> str:
    text = raw[:_ERROR_EXCERPT].decode("utf-8", "replace")
    return _redact(text, secrets)


def _error_detail(raw: bytes, secrets: tuple[Secret, ...]) -> str:
    """The server's own error message (OpenAI and Anthropic shapes), else a body excerpt."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _excerpt(raw, secrets).strip()
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return _redact(error["message"][:_ERROR_EXCERPT], secrets)
        if isinstance(error, str):
            return _redact(error[:_ERROR_EXCERPT], secrets)
        if isinstance(data.get("message"), str):
            return _redact(data["message"][:_ERROR_EXCERPT], secrets)
    return _excerpt(raw, secrets).strip()
