"""Tokens that should verify do, with the right provider and claims; leeway; the cache of
verified tokens and when it must not answer; the ``claim`` path reader."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from joserfc.jwk import ECKey, Key, OKPKey, RSAKey

import evalsi.auth._jwt as jwt_module
from evalsi.auth._errors import AuthConfigError, Unauthenticated
from evalsi.auth._jwt import JwtVerifier, Verified, claim
from evalsi.auth._settings import JwksSource, Provider
from tests.support.jwks_server import JwksServer, mint

T0 = 1_700_000_000.0
ISS_A = "https://a.example.com/realms/main"
ISS_B = "https://b.example.org"


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def keys() -> dict[str, Key]:
    return {
        "rsa": RSAKey.generate_key(2048, {"kid": "rsa-a"}),
        "ec": ECKey.generate_key("P-256", {"kid": "ec-a"}),
        "ed": OKPKey.generate_key("Ed25519", {"kid": "ed-a"}),
        "ec384": ECKey.generate_key("P-384", {"kid": "ec384-a"}),
        "b": ECKey.generate_key("P-256", {"kid": "ec-b"}),
    }


def inline(*ks: Key) -> JwksSource:
    return JwksSource(inline=json.dumps({"keys": [k.as_dict(private=False) for k in ks]}))


def provider_a(keys: dict[str, Key], **kw: Any) -> Provider:
    kw.setdefault("algorithms", ("RS256", "PS256", "ES256", "ES384", "EdDSA"))
    jwks = inline(keys["rsa"], keys["ec"], keys["ed"], keys["ec384"])
    return Provider(name="a", issuer=ISS_A, audiences=("api", "cli"), jwks=jwks, **kw)


def provider_b(keys: dict[str, Key]) -> Provider:
    return Provider(
        name="b", issuer=ISS_B, audiences=("api",), jwks=inline(keys["b"]), algorithms=("ES256",)
    )


def claims(iss: str = ISS_A, **extra: Any) -> dict[str, Any]:
    return {"iss": iss, "aud": "api", "sub": "alice", "iat": int(T0), "exp": int(T0) + 300} | extra


def verify(verifier: JwtVerifier, token: str) -> Verified:
    return asyncio.run(verifier.verify(token))


@pytest.mark.parametrize(
    ("key", "alg"),
    [("rsa", "RS256"), ("rsa", "PS256"), ("ec", "ES256"), ("ec384", "ES384"), ("ed", "EdDSA")],
)
def test_a_valid_token_verifies(keys: dict[str, Key], key: str, alg: str) -> None:
    verifier = JwtVerifier([provider_a(keys)], clock=Clock())
    verified = verify(verifier, mint(keys[key], claims(groups=["x"]), alg))
    assert verified.provider.name == "a"
    assert verified.claims["sub"] == "alice"
    assert verified.claims["groups"] == ["x"]


def test_the_default_algorithms_are_rs256_es256_and_eddsa(keys: dict[str, Key]) -> None:
    p = Provider(name="a", issuer=ISS_A, audiences=("api",), jwks=provider_a(keys).jwks)
    verifier = JwtVerifier([p], clock=Clock())
    for key, alg in [("rsa", "RS256"), ("ec", "ES256"), ("ed", "EdDSA")]:
        verify(verifier, mint(keys[key], claims(), alg))
    with pytest.raises(Unauthenticated, match="does not sign with 'PS256'"):
        verify(verifier, mint(keys["rsa"], claims(), "PS256"))


def test_aud_may_be_a_list_holding_one_of_the_audiences(keys: dict[str, Key]) -> None:
    verifier = JwtVerifier([provider_a(keys)], clock=Clock())
    verify(verifier, mint(keys["ec"], claims(aud=["other", "cli"]), "ES256"))


def test_several_providers_each_token_goes_to_its_issuer(keys: dict[str, Key]) -> None:
    verifier = JwtVerifier([provider_a(keys), provider_b(keys)], clock=Clock())
    assert verify(verifier, mint(keys["ec"], claims(), "ES256")).provider.name == "a"
    assert verify(verifier, mint(keys["b"], claims(ISS_B), "ES256")).provider.name == "b"
    with pytest.raises(Unauthenticated, match="kid"):  # a's key is not b's
        verify(verifier, mint(keys["ec"], claims(ISS_B), "ES256"))


def test_leeway_is_honoured_on_exp_nbf_and_iat(keys: dict[str, Key]) -> None:
    clock = Clock()
    verifier = JwtVerifier([provider_a(keys, leeway_s=30)], clock=clock)
    now = int(T0)
    for c in [
        claims(exp=now - 29),  # expired 29 s ago
        claims(nbf=now + 29),  # valid in 29 s
        claims(iat=now + 29),  # issued 29 s "from now" by a fast clock
    ]:
        verify(verifier, mint(keys["ec"], c, "ES256"))
    for c, reason in [
        (claims(exp=now - 31), "expired"),
        (claims(nbf=now + 31), "not valid yet"),
        (claims(iat=now + 31), "issued in the future"),
    ]:
        with pytest.raises(Unauthenticated, match=reason):
            verify(verifier, mint(keys["ec"], c, "ES256"))


def test_exp_is_optional_when_not_required(keys: dict[str, Key]) -> None:
    verifier = JwtVerifier([provider_a(keys, required_claims=("sub",))], clock=Clock())
    no_exp = claims()
    del no_exp["exp"]
    token = mint(keys["ec"], no_exp, "ES256")
    assert verify(verifier, token).claims["sub"] == "alice"
    assert verify(verifier, token) is not verify(verifier, token)  # without exp: never cached


def test_required_custom_claims(keys: dict[str, Key]) -> None:
    verifier = JwtVerifier([provider_a(keys, required_claims=("exp", "tenant"))], clock=Clock())
    verify(verifier, mint(keys["ec"], claims(tenant="t1"), "ES256"))
    with pytest.raises(Unauthenticated, match="tenant"):
        verify(verifier, mint(keys["ec"], claims(), "ES256"))


def test_a_repeated_token_is_answered_from_the_cache(keys: dict[str, Key]) -> None:
    verifier = JwtVerifier([provider_a(keys)], clock=Clock())
    token = mint(keys["rsa"], claims(), "RS256")
    first = verify(verifier, token)
    assert verify(verifier, token) is first  # a fresh verification builds a new Verified
    assert verify(verifier, mint(keys["rsa"], claims(), "PS256")) is not first


def test_a_cached_token_is_refused_once_it_expires(keys: dict[str, Key]) -> None:
    clock = Clock()
    verifier = JwtVerifier([provider_a(keys, leeway_s=30)], clock=clock)
    token = mint(keys["ec"], claims(exp=int(T0) + 60), "ES256")
    verify(verifier, token)
    clock.now = T0 + 89
    assert verify(verifier, token) is verify(verifier, token)  # within exp + leeway: cached
    clock.now = T0 + 90
    with pytest.raises(Unauthenticated, match="expired"):
        verify(verifier, token)


def test_a_far_off_exp_is_remembered_for_an_hour_at_most(keys: dict[str, Key]) -> None:
    clock = Clock()
    verifier = JwtVerifier([provider_a(keys, leeway_s=0)], clock=clock)
    token = mint(keys["ec"], claims(exp=10**400), "ES256")  # an int no float can hold
    first = verify(verifier, token)
    clock.now += 3599
    assert verify(verifier, token) is first
    clock.now += 1
    assert verify(verifier, token) is not first


def test_a_cached_token_is_refused_once_its_provider_is_removed(keys: dict[str, Key]) -> None:
    verifier = JwtVerifier([provider_a(keys), provider_b(keys)], clock=Clock())
    token_a = mint(keys["ec"], claims(), "ES256")
    token_b = mint(keys["b"], claims(ISS_B), "ES256")
    verify(verifier, token_a)
    cached_b = verify(verifier, token_b)
    verifier.replace_providers([provider_b(keys)])
    with pytest.raises(Unauthenticated, match="no provider trusts issuer"):
        verify(verifier, token_a)
    assert verify(verifier, token_b) is cached_b  # b is unchanged: its entries stay
    b2 = Provider(name="b2", issuer=ISS_B, audiences=("other",), jwks=inline(keys["b"]))
    verifier.replace_providers([provider_a(keys), b2])
    with pytest.raises(Unauthenticated, match="audience"):  # b changed: checked again
        verify(verifier, token_b)


def test_the_cache_is_bounded(keys: dict[str, Key], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jwt_module, "CACHE_ENTRIES", 3)
    verifier = JwtVerifier([provider_a(keys)], clock=Clock())
    tokens = [mint(keys["ec"], claims(jti=str(i)), "ES256") for i in range(5)]
    results = [verify(verifier, t) for t in tokens]
    assert len(verifier._cache) == 3
    assert verify(verifier, tokens[4]) is results[4]
    assert verify(verifier, tokens[0]) is not results[0]  # dropped, verified again


def test_a_cached_token_is_checked_again_after_a_key_refetch(keys: dict[str, Key]) -> None:
    clock = Clock()
    with JwksServer(keys["rsa"]) as server:
        p = Provider(
            name="a",
            issuer=ISS_A,
            audiences=("api",),
            jwks=JwksSource(url=server.jwks_url),
            allow_insecure_jwks=True,
        )
        verifier = JwtVerifier([p], clock=clock)
        token = mint(keys["rsa"], claims(exp=int(T0) + 86400), "RS256")
        verify(verifier, token)
        server.set_keys()  # the key is withdrawn ...
        clock.now += 3600  # ... and the TTL passes
        with pytest.raises(Unauthenticated, match="kid"):
            verify(verifier, token)
        assert server.fetches == 2


def test_configuration_errors_are_refused(keys: dict[str, Key]) -> None:
    a = provider_a(keys)
    with pytest.raises(AuthConfigError, match="two providers"):
        JwtVerifier([a, a])
    with pytest.raises(AuthConfigError, match="no audiences"):
        JwtVerifier([Provider(name="x", issuer="https://x", audiences=(), jwks=a.jwks)])
    for algorithms in [("HS256",), ("none",), ()]:
        with pytest.raises(AuthConfigError, match="algorithms"):
            JwtVerifier([provider_a(keys, algorithms=algorithms)])


def test_claim_reads_dotted_paths() -> None:
    c = {
        "sub": "alice",
        "realm_access": {"roles": ["admin", "dev"]},
        "https://example.com/roles": ["r"],
        "a": {"b": {"c": 1}, "list": [1]},
    }
    assert claim(c, "sub") == "alice"
    assert claim(c, "realm_access.roles") == ["admin", "dev"]
    assert claim(c, "https://example.com/roles") == ["r"]
    assert claim(c, "a.b.c") == 1
    assert claim(c, "a.b.missing") is None
    assert claim(c, "a.list.0") is None
    assert claim(c, "missing") is None
    assert claim(c, "sub.x") is None
