"""A provider's key set fetched from a real server on loopback: sources, the https rule, the
refetch rate limit, rotation, size caps, failures that keep the old keys, and key types."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from joserfc.jwk import ECKey, OctKey, OKPKey, RSAKey
from joserfc.util import int_to_base64

import evalsi.auth._jwks as jwks_module
from evalsi.auth._errors import Unauthenticated
from evalsi.auth._jwks import MAX_JWKS_BYTES, MAX_KEYS, JwksCache, JwksError, parse_jwks
from evalsi.auth._jwt import JwtVerifier
from evalsi.auth._settings import JwksSource, Provider
from tests.support.jwks_server import DISCOVERY_PATH, JwksServer, mint

ISS = "https://id.example.com"
T0 = 1_700_000_000.0


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def rsa1() -> RSAKey:
    return RSAKey.generate_key(2048, {"kid": "r1"})


@pytest.fixture(scope="module")
def rsa2() -> RSAKey:
    return RSAKey.generate_key(2048, {"kid": "r2"})


@pytest.fixture(scope="module")
def ec1() -> ECKey:
    return ECKey.generate_key("P-256", {"kid": "e1"})


def provider(source: JwksSource, **kw: Any) -> Provider:
    kw.setdefault("issuer", ISS)
    kw.setdefault("allow_insecure_jwks", True)
    return Provider(name="idp", audiences=("api",), jwks=source, **kw)


def claims(**extra: Any) -> dict[str, Any]:
    return {"iss": ISS, "aud": "api", "sub": "alice", "exp": int(T0) + 86400, **extra}


def kid_of(key: Any) -> str | None:
    return key.kid  # type: ignore[no-any-return]


def test_url_source_fetches_once_and_serves_from_cache(rsa1: RSAKey, ec1: ECKey) -> None:
    with JwksServer(rsa1, ec1) as server:
        cache = JwksCache(provider(JwksSource(url=server.jwks_url)), clock=Clock())

        async def main() -> None:
            assert kid_of(await cache.key_for("r1", "RS256")) == "r1"
            assert kid_of(await cache.key_for("e1", "ES256")) == "e1"
            assert kid_of(await cache.key_for("r1", "PS256")) == "r1"

        asyncio.run(main())
        assert server.fetches == 1


def test_file_source_rereads_the_file_on_refresh(
    tmp_path: Path, rsa1: RSAKey, rsa2: RSAKey
) -> None:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [rsa1.as_dict(private=False)]}))
    cache = JwksCache(provider(JwksSource(file=str(path))), clock=Clock())

    async def main() -> None:
        assert kid_of(await cache.key_for("r1", "RS256")) == "r1"
        path.write_text(json.dumps({"keys": [rsa2.as_dict(private=False)]}))
        await cache.refresh()
        assert kid_of(await cache.key_for("r2", "RS256")) == "r2"
        with pytest.raises(Unauthenticated, match="kid"):
            await cache.key_for("r1", "RS256")

    asyncio.run(main())


def test_inline_source(rsa1: RSAKey) -> None:
    inline = json.dumps({"keys": [rsa1.as_dict(private=False)]})
    cache = JwksCache(provider(JwksSource(inline=inline)), clock=Clock())
    assert kid_of(asyncio.run(cache.key_for("r1", "RS256"))) == "r1"


def test_discovery_reads_jwks_uri_and_a_token_verifies(rsa1: RSAKey) -> None:
    with JwksServer(rsa1) as server:
        p = provider(JwksSource(discovery=True), issuer=server.url)
        verifier = JwtVerifier([p], clock=Clock())
        token = mint(rsa1, claims(iss=server.url), "RS256")
        assert asyncio.run(verifier.verify(token)).claims["sub"] == "alice"
        assert server.requests[DISCOVERY_PATH] == 1
        assert server.fetches == 1


@pytest.mark.parametrize("issuer", ["https://evil.example", "{url}/", "{URL}", ""])
def test_discovery_for_another_issuer_is_refused(rsa1: RSAKey, issuer: str) -> None:
    with JwksServer(rsa1) as server:
        server.issuer = issuer.format(url=server.url, URL=server.url.upper())
        cache = JwksCache(provider(JwksSource(discovery=True), issuer=server.url), clock=Clock())
        with pytest.raises(Unauthenticated, match="unavailable"):
            asyncio.run(cache.key_for("r1", "RS256"))
        assert cache.last_error is not None
        assert "not for issuer" in cache.last_error
        assert server.fetches == 0


def test_discovery_jwks_uri_must_be_https_unless_insecure_allowed(rsa1: RSAKey) -> None:
    with JwksServer(rsa1, tls=True) as server:
        server.jwks_uri = "http://127.0.0.1:9/jwks.json"
        p = provider(JwksSource(discovery=True), issuer=server.url, allow_insecure_jwks=False)
        cache = JwksCache(p, clock=Clock(), ssl_context=server.client_ssl)
        with pytest.raises(Unauthenticated, match="unavailable"):
            asyncio.run(cache.key_for("r1", "RS256"))
        assert cache.last_error is not None
        assert "not an https URL" in cache.last_error
        assert server.requests[DISCOVERY_PATH] == 1


def test_http_url_is_refused_without_allow_insecure_jwks(rsa1: RSAKey) -> None:
    with JwksServer(rsa1) as server:
        p = provider(JwksSource(url=server.jwks_url), allow_insecure_jwks=False)
        cache = JwksCache(p, clock=Clock())
        with pytest.raises(Unauthenticated, match="unavailable"):
            asyncio.run(cache.key_for("r1", "RS256"))
        assert server.fetches == 0  # never contacted
        allowed = JwksCache(provider(JwksSource(url=server.jwks_url)), clock=Clock())
        assert kid_of(asyncio.run(allowed.key_for("r1", "RS256"))) == "r1"  # the control


def test_https_verifies_the_server_certificate(rsa1: RSAKey) -> None:
    with JwksServer(rsa1, tls=True) as server:
        p = provider(JwksSource(url=server.jwks_url), allow_insecure_jwks=False)
        trusted = JwksCache(p, clock=Clock(), ssl_context=server.client_ssl)
        assert kid_of(asyncio.run(trusted.key_for("r1", "RS256"))) == "r1"
        untrusted = JwksCache(p, clock=Clock())  # the system's CAs do not know this cert
        with pytest.raises(Unauthenticated, match="unavailable"):
            asyncio.run(untrusted.key_for("r1", "RS256"))
        assert server.fetches == 1


def test_redirects_are_not_followed(rsa1: RSAKey) -> None:
    with JwksServer(rsa1) as server:
        cache = JwksCache(provider(JwksSource(url=server.url + "/redirect")), clock=Clock())
        with pytest.raises(Unauthenticated, match="unavailable"):
            asyncio.run(cache.key_for("r1", "RS256"))
        assert cache.last_error is not None
        assert "302" in cache.last_error
        assert server.fetches == 0


def test_unknown_kid_refetches_once_per_interval(rsa1: RSAKey) -> None:
    clock = Clock()
    with JwksServer(rsa1) as server:
        cache = JwksCache(provider(JwksSource(url=server.jwks_url)), clock=clock)

        async def main() -> None:
            await cache.key_for("r1", "RS256")
            assert server.fetches == 1
            clock.now += 61
            with pytest.raises(Unauthenticated):
                await cache.key_for("nope", "RS256")
            assert server.fetches == 2  # one refetch for the unknown kid
            clock.now += 30
            with pytest.raises(Unauthenticated):
                await cache.key_for("nope-again", "RS256")
            assert server.fetches == 2  # within the interval: no fetch
            clock.now += 31
            with pytest.raises(Unauthenticated):
                await cache.key_for("nope-again", "RS256")
            assert server.fetches == 3

        asyncio.run(main())


def test_a_burst_of_random_kids_costs_one_fetch_per_interval(rsa1: RSAKey) -> None:
    clock = Clock()
    with JwksServer(rsa1) as server:
        cache = JwksCache(provider(JwksSource(url=server.jwks_url)), clock=clock)

        async def burst() -> None:
            kids = [uuid.uuid4().hex for _ in range(200)]
            results = await asyncio.gather(
                *(cache.key_for(k, "RS256") for k in kids), return_exceptions=True
            )
            assert all(isinstance(r, Unauthenticated) for r in results)

        async def main() -> None:
            await burst()
            assert server.fetches == 1  # the first fetch, shared by all 200
            for interval in range(1, 4):
                clock.now += 60
                await burst()
                await burst()
                assert server.fetches == 1 + interval

        asyncio.run(main())


def test_concurrent_refreshes_share_one_fetch(rsa1: RSAKey) -> None:
    with JwksServer(rsa1) as server:
        cache = JwksCache(provider(JwksSource(url=server.jwks_url)), clock=Clock())

        async def main() -> None:
            await asyncio.gather(*(cache.refresh() for _ in range(20)))

        asyncio.run(main())
        assert server.fetches == 1
        assert cache.generation == 1


def test_rotation_new_key_appears_and_old_key_is_withdrawn(rsa1: RSAKey, rsa2: RSAKey) -> None:
    clock = Clock()
    with JwksServer(rsa1) as server:
        verifier = JwtVerifier([provider(JwksSource(url=server.jwks_url))], clock=clock)
        old = mint(rsa1, claims(), "RS256")
        new = mint(rsa2, claims(), "RS256")

        async def main() -> None:
            await verifier.verify(old)
            server.set_keys(rsa1, rsa2)  # the issuer publishes its next key
            clock.now += 60
            assert (await verifier.verify(new)).claims["sub"] == "alice"
            assert server.fetches == 2
            server.set_keys(rsa2)  # and withdraws the old one
            await verifier.verify(mint(rsa1, claims(jti="fresh"), "RS256"))  # not refetched yet
            clock.now += 60
            with pytest.raises(Unauthenticated, match="kid"):  # an unknown kid: a refetch
                await verifier.verify(mint(rsa1, claims(), "RS256", kid="r3"))
            assert server.fetches == 3
            # a token verified (and cached) before the withdrawal does not verify any more
            with pytest.raises(Unauthenticated, match="kid"):
                await verifier.verify(old)
            with pytest.raises(Unauthenticated, match="kid"):
                await verifier.verify(mint(rsa1, claims(jti="fresher"), "RS256"))
            await verifier.verify(new)
            assert server.fetches == 3

        asyncio.run(main())


def test_keys_are_refetched_after_the_ttl(rsa1: RSAKey) -> None:
    clock = Clock()
    with JwksServer(rsa1) as server:
        cache = JwksCache(provider(JwksSource(url=server.jwks_url)), clock=clock)

        async def main() -> None:
            await cache.key_for("r1", "RS256")
            clock.now += 3599
            await cache.key_for("r1", "RS256")
            assert server.fetches == 1
            clock.now += 1
            await cache.key_for("r1", "RS256")
            assert server.fetches == 2

        asyncio.run(main())


def test_a_failed_fetch_keeps_the_previous_keys(rsa1: RSAKey) -> None:
    clock = Clock()
    with JwksServer(rsa1) as server:
        cache = JwksCache(provider(JwksSource(url=server.jwks_url)), clock=clock)

        async def main() -> None:
            await cache.key_for("r1", "RS256")
            for failure in ("status", "garbage", "not a key set"):
                server.status = 503 if failure == "status" else 200
                server.body = {"garbage": b"\x00{", "not a key set": b"[1]"}.get(failure)
                clock.now += 3600
                assert kid_of(await cache.key_for("r1", "RS256")) == "r1"
                assert cache.last_error is not None
                assert cache.generation == 1
            assert server.fetches == 4

        asyncio.run(main())


def test_an_unreachable_server_fails_fast_and_keeps_keys(rsa1: RSAKey) -> None:
    clock = Clock()
    with JwksServer(rsa1) as server:
        url = server.jwks_url
        cache = JwksCache(provider(JwksSource(url=url)), clock=clock)
        asyncio.run(cache.key_for("r1", "RS256"))
    clock.now += 3600  # the server is gone now
    assert kid_of(asyncio.run(cache.key_for("r1", "RS256"))) == "r1"
    assert cache.last_error is not None
    assert "failed" in cache.last_error


def test_a_missing_file_leaves_no_keys(tmp_path: Path) -> None:
    cache = JwksCache(provider(JwksSource(file=str(tmp_path / "absent.json"))), clock=Clock())
    with pytest.raises(Unauthenticated, match="unavailable"):
        asyncio.run(cache.key_for("r1", "RS256"))
    assert cache.last_error is not None
    assert "cannot read" in cache.last_error


@pytest.mark.parametrize("send_length", [True, False])
def test_an_oversize_jwks_is_refused(rsa1: RSAKey, send_length: bool) -> None:
    with JwksServer(rsa1) as server:
        pad = "x" * MAX_JWKS_BYTES
        server.body = json.dumps({"keys": [rsa1.as_dict(private=False)], "pad": pad}).encode()
        server.send_length = send_length  # without it, the body is read until the cap
        cache = JwksCache(provider(JwksSource(url=server.jwks_url)), clock=Clock())
        with pytest.raises(Unauthenticated, match="unavailable"):
            asyncio.run(cache.key_for("r1", "RS256"))
        assert cache.last_error is not None
        assert cache.last_error.startswith("GET ")  # refused while reading, not after
        assert "larger than" in cache.last_error


def test_too_many_keys_are_refused(rsa1: RSAKey) -> None:
    entry = rsa1.as_dict(private=False)
    with pytest.raises(JwksError, match="more than"):
        parse_jwks(json.dumps({"keys": [entry] * (MAX_KEYS + 1)}))
    assert len(parse_jwks(json.dumps({"keys": [entry] * MAX_KEYS}))) == MAX_KEYS


def test_oct_keys_are_dropped_and_key_types_must_fit(rsa1: RSAKey, ec1: ECKey) -> None:
    oct_key = OctKey.generate_key(256, {"kid": "r1"}).as_dict(private=True)
    weak = rsa.generate_private_key(public_exponent=65537, key_size=1024).public_key()
    n, e = weak.public_numbers().n, weak.public_numbers().e
    small = {"kty": "RSA", "kid": "small", "n": int_to_base64(n), "e": int_to_base64(e)}
    ed = OKPKey.generate_key("Ed25519", {"kid": "d1"}).as_dict(private=False)
    p384 = ECKey.generate_key("P-384", {"kid": "p384"}).as_dict(private=False)
    enc = {**rsa1.as_dict(private=False), "kid": "enc", "use": "enc"}
    pinned = {**rsa1.as_dict(private=False), "kid": "pinned", "alg": "RS512"}
    doc = {
        "keys": [
            oct_key,
            small,
            ed,
            p384,
            enc,
            pinned,
            {"kty": "EC"},
            "junk",
            {"kty": "PQ"},
            ec1.as_dict(private=False),
        ]
    }
    keys = parse_jwks(json.dumps(doc))
    assert sorted(k.kid or "" for k in keys) == ["d1", "e1", "enc", "p384", "pinned"]
    cache = JwksCache(provider(JwksSource(inline=json.dumps(doc))), clock=Clock())

    async def main() -> None:
        for kid, alg in [
            ("r1", "RS256"),  # only the oct key has this kid
            ("small", "RS256"),  # 1024-bit RSA
            ("e1", "ES384"),  # a P-256 key for ES384
            ("p384", "ES256"),
            ("d1", "ES256"),  # an OKP key for ECDSA
            ("e1", "EdDSA"),
            ("enc", "RS256"),  # an encryption key
            ("pinned", "RS256"),  # a key that says it is for RS512
        ]:
            with pytest.raises(Unauthenticated):
                await cache.key_for(kid, alg)
        assert kid_of(await cache.key_for("p384", "ES384")) == "p384"
        assert kid_of(await cache.key_for("d1", "EdDSA")) == "d1"
        assert kid_of(await cache.key_for("pinned", "RS512")) == "pinned"
        assert kid_of(await cache.key_for(None, "EdDSA")) == "d1"  # the only EdDSA key
        with pytest.raises(Unauthenticated, match="no kid"):
            await cache.key_for(None, "RS256")  # no RS256 key at all

    asyncio.run(main())
    assert not any(k.get("kty") == "oct" for k in keys)


def test_a_token_without_kid_needs_exactly_one_fitting_key(rsa1: RSAKey, rsa2: RSAKey) -> None:
    one = json.dumps({"keys": [rsa1.as_dict(private=False)]})
    two = json.dumps({"keys": [rsa1.as_dict(private=False), rsa2.as_dict(private=False)]})
    assert kid_of(asyncio.run(JwksCache(provider(JwksSource(inline=one))).key_for(None, "RS256")))
    with pytest.raises(Unauthenticated, match="no kid"):
        asyncio.run(JwksCache(provider(JwksSource(inline=two))).key_for(None, "RS256"))


def test_a_slow_server_times_out(rsa1: RSAKey, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jwks_module, "FETCH_TIMEOUT_S", 0.1)
    with JwksServer(rsa1) as server:
        server.delay_s = 0.5
        cache = JwksCache(provider(JwksSource(url=server.jwks_url)), clock=Clock())
        with pytest.raises(Unauthenticated, match="unavailable"):
            asyncio.run(cache.key_for("r1", "RS256"))
        assert cache.last_error is not None
        assert "TimeoutError" in cache.last_error
