"""The egress policy where connections are made: aiohttp sessions against real servers on
loopback. Every refusal is proven by a server that counts requests and was not reached, and
every test has a control (the same call allowed) that shows it could have been."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult

from evalsi.connectors import (
    EgressDenied,
    EgressPolicy,
    HttpTarget,
    InfraError,
    OpenAICompatible,
    Resilience,
    RetryPolicy,
    TargetError,
    close_shared_session,
    shared_session,
)
from evalsi.connectors._egress_aiohttp import EgressConnector, EgressResolver
from evalsi.policies._alerts import WebhookNotifier
from tests.support.aio import run

EXPOSED = EgressPolicy(listen_host="192.0.2.2")  # a server listening off loopback
LOCAL = EgressPolicy(listen_host="127.0.0.1")


@asynccontextmanager
async def counting_server(n: int = 1) -> AsyncIterator[tuple[list[int], Counter[int]]]:
    """``n`` HTTP servers on 127.0.0.1 (ports, hits per port). ``/ok`` answers an OpenAI-style
    completion; ``/go?to=URL`` redirects (302) there."""
    hits: Counter[int] = Counter()

    async def handle(request: web.Request) -> web.StreamResponse:
        port = request.transport.get_extra_info("sockname")[1] if request.transport else 0
        hits[port] += 1
        if request.path == "/go":
            raise web.HTTPFound(request.query["to"])
        return web.json_response(
            {"choices": [{"message": {"role": "assistant", "content": "hi"}}], "answer": "hi"}
        )

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    ports = []
    for _ in range(n):
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert isinstance(server, asyncio.base_events.Server)
        ports.append(server.sockets[0].getsockname()[1])
    try:
        yield ports, hits
    finally:
        await runner.cleanup()


async def _get(session: aiohttp.ClientSession, url: str) -> int:
    async with session.get(url) as response:
        await response.read()
        return response.status


def _loopback_name() -> str | None:
    """A name the system resolves to loopback that the policy does not know by name (this
    machine's host name through /etc/hosts), or None."""
    name = socket.gethostname()
    try:
        infos = socket.getaddrinfo(name, 80, socket.AF_INET, socket.SOCK_STREAM)
    except OSError:
        return None
    loopback = all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)
    return name if infos and loopback and name != "localhost" else None


# -- literal addresses ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "host", ["127.0.0.1", "[::ffff:127.0.0.1]", "0.0.0.0", "0x7f000001", "localhost"]
)
def test_literal_loopback_refused_when_exposed_and_reached_when_local(host: str) -> None:
    async def main() -> tuple[str, int, int]:
        async with counting_server() as (ports, hits):
            url = f"http://{host}:{ports[0]}/ok"
            exposed = await shared_session(egress=EXPOSED)
            with pytest.raises(EgressDenied) as e:
                await _get(exposed, url)
            refused_hits = hits[ports[0]]
            local = await shared_session(egress=LOCAL)
            assert await _get(local, url) == 200  # the control: same URL, reached
            return e.value.rule, refused_hits, hits[ports[0]]

    rule, refused_hits, after = run(main())
    assert rule == "loopback and private denied off loopback"
    assert (refused_hits, after) == (0, 1)


def test_a_decimal_address_is_refused_before_aiohttp_sees_it() -> None:
    async def main() -> str:
        async with counting_server() as (ports, _):
            session = await shared_session(egress=EXPOSED)
            with pytest.raises(EgressDenied) as e:
                await _get(session, f"http://2130706433:{ports[0]}/ok")
            return str(e.value)

    assert "2130706433 (127.0.0.1)" in run(main())


# -- names ---------------------------------------------------------------------------------------
def test_a_name_is_judged_by_the_address_it_resolves_to() -> None:
    name = _loopback_name()
    if name is None:
        pytest.skip("this machine's host name does not resolve to loopback")

    async def main() -> tuple[str, int]:
        async with counting_server() as (ports, hits):
            session = await shared_session(egress=EXPOSED)
            with pytest.raises(EgressDenied) as e:
                await _get(session, f"http://{name}:{ports[0]}/ok")
            assert hits[ports[0]] == 0
            assert await _get(await shared_session(egress=LOCAL), f"http://{name}:{ports[0]}/ok")
            return str(e.value), hits[ports[0]]

    message, hits = run(main())
    assert f"egress denied: {name.lower()} (127.0.0.1) port" in message
    assert hits == 1


class FakeDns(AbstractResolver):
    """A DNS that answers fixed addresses (a name an attacker controls, rebinding)."""

    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.asked.append(host)
        return [
            ResolveResult(
                hostname=host,
                host=a,
                port=port,
                family=socket.AF_INET6 if ":" in a else socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
            for a in self.answers[host]
        ]

    async def close(self) -> None:
        pass


def test_resolved_metadata_and_loopback_addresses_are_dropped_and_the_rest_kept() -> None:
    dns = FakeDns(
        {
            "evil.test": ["169.254.169.254"],
            "mixed.test": ["169.254.169.254", "127.0.0.1"],
            "mapped.test": ["::ffff:169.254.169.254"],
        }
    )

    async def main() -> dict[str, Any]:
        out: dict[str, Any] = {}
        resolver = EgressResolver(LOCAL, dns)
        with pytest.raises(EgressDenied) as e:
            await resolver.resolve("evil.test", 80)
        out["evil"] = e.value.rule
        kept = await resolver.resolve("mixed.test", 80)
        out["mixed"] = [r["host"] for r in kept]
        with pytest.raises(EgressDenied) as e:
            await resolver.resolve("mapped.test", 80)
        out["mapped"] = e.value.rule
        with pytest.raises(EgressDenied):  # metadata names are refused before any lookup
            await resolver.resolve("metadata.google.internal", 80)
        out["asked"] = list(dns.asked)
        return out

    out = run(main())
    assert out["evil"] == "always-deny cloud-metadata"
    assert out["mixed"] == ["127.0.0.1"]
    assert out["mapped"] == "always-deny cloud-metadata"
    assert out["asked"] == ["evil.test", "mixed.test", "mapped.test"]


def test_a_rebound_name_reaches_only_the_allowed_address_through_a_session() -> None:
    async def main() -> tuple[int, int]:
        async with counting_server() as (ports, hits):
            dns = FakeDns({"rebind.test": ["169.254.169.254", "127.0.0.1"]})
            connector = EgressConnector(LOCAL, limit=4)
            connector._resolver = EgressResolver(LOCAL, dns)  # the test's DNS behind the policy
            async with aiohttp.ClientSession(connector=connector) as session:
                status = await _get(session, f"http://rebind.test:{ports[0]}/ok")
            return status, hits[ports[0]]

    assert run(main()) == (200, 1)


# -- redirects -----------------------------------------------------------------------------------
def test_every_redirect_hop_is_checked() -> None:
    async def main() -> tuple[list[str], Counter[int], list[int]]:
        async with counting_server(2) as (ports, hits):
            allowed, inner = ports
            policy = EgressPolicy.from_lists(
                allow=[f"127.0.0.1:{allowed}"], listen_host="192.0.2.2"
            )
            session = await shared_session(egress=policy)
            rules = []
            for to in (
                f"http://127.0.0.1:{inner}/ok",
                "http://169.254.169.254/latest/meta-data/",
                f"http://localhost:{inner}/ok",
            ):
                with pytest.raises(EgressDenied) as e:
                    await _get(session, f"http://127.0.0.1:{allowed}/go?to={to}")
                rules.append(e.value.rule)
            # the control: a redirect that stays on the allowed port is followed
            same = f"http://127.0.0.1:{allowed}/ok"
            assert await _get(session, f"http://127.0.0.1:{allowed}/go?to={same}") == 200
            return rules, hits, ports

    rules, hits, (allowed, inner) = run(main())
    assert rules == [
        "loopback and private denied off loopback",
        "always-deny cloud-metadata",
        "loopback and private denied off loopback",
    ]
    assert hits[inner] == 0
    assert hits[allowed] == 5  # three refused redirects, the followed one and its target


def test_connectors_never_follow_a_redirect() -> None:
    async def main() -> tuple[str, int]:
        async with counting_server(2) as (ports, hits):
            target = HttpTarget(f"http://127.0.0.1:{ports[0]}/go?to=http://127.0.0.1:{ports[1]}/ok")
            with pytest.raises(TargetError) as e:
                await target.invoke("q")
            return str(e.value), hits[ports[1]]

    message, inner_hits = run(main())
    assert "HTTP 302" in message
    assert inner_hits == 0


# -- connectors ----------------------------------------------------------------------------------
def test_a_refused_connector_call_is_an_infra_error_tried_once() -> None:
    async def main() -> tuple[InfraError, InfraError, int]:
        async with counting_server() as (ports, hits):
            resilience = Resilience(retry=RetryPolicy(max_attempts=5), egress=EXPOSED)
            model = OpenAICompatible(f"http://127.0.0.1:{ports[0]}/v1", "m", resilience=resilience)
            errors = []
            for _ in range(2):
                with pytest.raises(InfraError) as e:
                    await model.complete("hi")
                errors.append(e.value)
            return errors[0], errors[1], hits[ports[0]]

    first, second, hits = run(main())
    assert first.kind == "egress_denied"
    assert first.attempts == 1  # not retried: the policy answers the same
    assert "rule: loopback and private denied off loopback" in str(first)
    assert second.kind == "egress_denied"  # the breaker stayed shut (nothing was called)
    assert hits == 0


def test_without_a_policy_the_embedded_connectors_call_loopback_freely() -> None:
    async def main() -> tuple[str, str, int]:
        async with counting_server() as (ports, hits):
            model = OpenAICompatible(f"http://127.0.0.1:{ports[0]}/v1", "m")
            http = HttpTarget(f"http://localhost:{ports[0]}/x", output="$.answer")
            text = (await model.complete("hi")).text
            out = (await http.invoke("q")).output
            return text, str(out.text if out is not None else ""), hits[ports[0]]

    assert run(main()) == ("hi", "hi", 2)


def test_one_session_per_policy_per_loop_all_sized_alike() -> None:
    async def main() -> None:
        plain = await shared_session(limit=300)
        strict = await shared_session(egress=EXPOSED)
        again = await shared_session(egress=EgressPolicy(listen_host="192.0.2.2"))  # equal
        local = await shared_session(egress=LOCAL)
        assert strict is again
        assert len({id(plain), id(strict), id(local)}) == 3
        assert isinstance(strict.connector, EgressConnector)
        assert not isinstance(plain.connector, EgressConnector)
        assert strict.connector is not None
        assert strict.connector.limit == 300
        await close_shared_session()
        assert (plain.closed, strict.closed, local.closed) == (True, True, True)

    asyncio.run(main())


# -- webhooks ------------------------------------------------------------------------------------
def test_a_webhook_to_an_inward_address_is_not_delivered_and_the_log_names_the_rule(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> tuple[bool, bool, bool, Counter[int], list[int]]:
        async with counting_server(2) as (ports, hits):
            allowed, inner = ports
            policy = EgressPolicy.from_lists(
                allow=[f"127.0.0.1:{allowed}"], listen_host="192.0.2.2"
            )
            notifier = WebhookNotifier(egress=policy, retries=2)
            try:
                metadata = await notifier.send("http://169.254.169.254/hook", {"a": 1})
                redirected = await notifier.send(
                    f"http://127.0.0.1:{allowed}/go?to=http://127.0.0.1:{inner}/ok", {"a": 1}
                )
                direct = await notifier.send(f"http://127.0.0.1:{allowed}/ok", {"a": 1})
            finally:
                await notifier.close()
            return metadata, redirected, direct, hits, ports

    with caplog.at_level(logging.WARNING, logger="evalsi.policies"):
        metadata, redirected, direct, hits, (allowed, inner) = run(main())
    assert (metadata, redirected, direct) == (False, False, True)
    assert hits[inner] == 0
    assert hits[allowed] == 2  # the redirect once (not retried) and the direct delivery
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "rule: always-deny cloud-metadata" in logged
    assert "rule: loopback and private denied off loopback" in logged


def test_an_embedded_webhook_follows_its_redirect_anywhere() -> None:
    async def main() -> tuple[bool, Counter[int], list[int]]:
        async with counting_server(2) as (ports, hits):
            notifier = WebhookNotifier()
            try:
                delivered = await notifier.send(
                    f"http://127.0.0.1:{ports[0]}/go?to=http://127.0.0.1:{ports[1]}/ok", {}
                )
            finally:
                await notifier.close()
            return delivered, hits, ports

    delivered, hits, ports = run(main())
    assert delivered
    assert hits[ports[1]] == 1
