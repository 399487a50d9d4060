"""The JWT attack suite: every forged, tampered, confused or malformed token is refused with
``Unauthenticated``, and no reason echoes the token.

Each case is built from a token the verifier accepts (``test_the_control_token_verifies``), so
a case that passes proves its one change is what got it refused. Forged tokens are built the
way an attacker would (raw base64url, stdlib HMAC, joserfc signing whatever bytes we like).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from joserfc.jwk import ECKey, Key, OKPKey, RSAKey

from evalsi.auth._errors import Unauthenticated
from evalsi.auth._jwt import JwtVerifier
from evalsi.auth._settings import MAX_TOKEN_BYTES, JwksSource, Provider
from tests.support.jwks_server import JwksServer, mint, sign_raw

T0 = 1_700_000_000
ISS_A = "https://id.example.com/realms/main"
ISS_B = "https://other-idp.example.org"
DROP = object()


@dataclass(frozen=True)
class Keys:
    rsa: RSAKey  # provider A, kid rsa-a
    ec: ECKey  # provider A, kid ec-a
    ed: OKPKey  # provider A, kid ed-a
    evil_rsa: RSAKey  # the attacker's, with A's RSA kid
    evil_ec: ECKey  # the attacker's, kid evil
    b_rsa: RSAKey  # provider B publishes it, but B only allows ES256
    b_ec: ECKey


@pytest.fixture(scope="module")
def keys() -> Keys:
    return Keys(
        rsa=RSAKey.generate_key(2048, {"kid": "rsa-a"}),
        ec=ECKey.generate_key("P-256", {"kid": "ec-a"}),
        ed=OKPKey.generate_key("Ed25519", {"kid": "ed-a"}),
        evil_rsa=RSAKey.generate_key(2048, {"kid": "rsa-a"}),
        evil_ec=ECKey.generate_key("P-256", {"kid": "evil"}),
        b_rsa=RSAKey.generate_key(2048, {"kid": "rsa-b"}),
        b_ec=ECKey.generate_key("P-256", {"kid": "ec-b"}),
    )


def jwks(*ks: Key) -> JwksSource:
    return JwksSource(inline=json.dumps({"keys": [k.as_dict(private=False) for k in ks]}))


def verifier(k: Keys) -> JwtVerifier:
    a = Provider(
        name="a",
        issuer=ISS_A,
        audiences=("api",),
        jwks=jwks(k.rsa, k.ec, k.ed),
        algorithms=("RS256", "RS384", "ES256", "EdDSA"),
        required_claims=("exp", "tenant"),
        leeway_s=30,
    )
    b = Provider(
        name="b",
        issuer=ISS_B,
        audiences=("api",),
        jwks=jwks(k.b_rsa, k.b_ec),
        algorithms=("ES256",),
    )
    return JwtVerifier([a, b], clock=lambda: float(T0))


def claims(**changes: Any) -> dict[str, Any]:
    c = {"iss": ISS_A, "aud": "api", "sub": "alice", "tenant": "t1", "iat": T0, "exp": T0 + 300}
    c.update(changes)
    return {k: v for k, v in c.items() if v is not DROP}


def b64(data: bytes | str) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def seg(obj: Any) -> str:
    return b64(json.dumps(obj, separators=(",", ":")))


def control(k: Keys) -> str:
    return mint(k.rsa, claims(), "RS256")


def unsigned(alg: str, signature: str | None = None) -> Callable[[Keys], str]:
    """A token that says it needs no signature; by default it keeps a real one."""

    def build(k: Keys) -> str:
        sig = control(k).split(".")[2] if signature is None else signature
        return f"{seg({'alg': alg, 'typ': 'JWT'})}.{seg(claims())}.{sig}"

    return build


def hmac_token(alg: str, secret: bytes, kid: str = "rsa-a") -> str:
    digest = {"HS256": hashlib.sha256, "HS384": hashlib.sha384, "HS512": hashlib.sha512}[alg]
    signing_input = f"{seg({'alg': alg, 'kid': kid})}.{seg(claims())}"
    mac = hmac.new(secret, signing_input.encode(), digest).digest()
    return f"{signing_input}.{b64(mac)}"


def key_confusion(k: Keys) -> str:
    """HS256 keyed with the provider's RSA public key, as a naive verifier would check it."""
    pem = k.rsa.public_key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return hmac_token("HS256", pem)


def forged(key: Key, signing_alg: str, payload: dict[str, Any], /, **header: Any) -> str:
    """Signed with ``key`` over a header joserfc's encoder would refuse to write (``header``
    may even name another ``alg`` than the one that signed)."""
    fields = {"alg": signing_alg, "kid": key.kid, **header}
    return sign_raw(json.dumps(fields).encode(), json.dumps(payload).encode(), key, signing_alg)


def with_header(**header: Any) -> Callable[[Keys], str]:
    """Signed by A's real key, with these header fields added."""
    return lambda k: forged(k.rsa, "RS256", claims(), **header)


def embedded_key(k: Keys) -> str:
    return forged(k.evil_ec, "ES256", claims(), jwk=k.evil_ec.as_dict(private=False))


def raw(header: bytes | str, payload: bytes | str) -> Callable[[Keys], str]:
    """Exactly these header and payload bytes, validly signed by A's RSA key."""
    h = header.encode() if isinstance(header, str) else header
    p = payload.encode() if isinstance(payload, str) else payload
    return lambda k: sign_raw(h, p, k.rsa, "RS256")


def swap(part: int, value: Callable[[str], str]) -> Callable[[Keys], str]:
    """The control token with one segment changed after signing."""

    def build(k: Keys) -> str:
        segments = control(k).split(".")
        segments[part] = value(segments[part])
        return ".".join(segments)

    return build


def swapped_payload(k: Keys) -> str:
    header, _, signature = control(k).split(".")
    return f"{header}.{seg(claims(sub='admin'))}.{signature}"


def swapped_alg(k: Keys) -> str:
    _, payload, signature = control(k).split(".")
    return f"{seg({'alg': 'RS384', 'kid': 'rsa-a', 'typ': 'JWT'})}.{payload}.{signature}"


def es256_signature(k: Keys, der: bool) -> str:
    header, payload, signature = mint(k.ec, claims(), "ES256").split(".")
    rs = base64.urlsafe_b64decode(signature + "==")
    if not der:
        return f"{header}.{payload}.{b64(rs[:-1])}"
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

    r, s = int.from_bytes(rs[:32], "big"), int.from_bytes(rs[32:], "big")
    return f"{header}.{payload}.{b64(encode_dss_signature(r, s))}"


NEXT = {"A": "B", "Q": "R", "g": "h", "w": "x"}  # same bytes to a lenient base64 decoder
SIG = "signature does not verify"
HEADER = '{"alg":"RS256","kid":"rsa-a"}'
PAYLOAD = json.dumps(claims(), separators=(",", ":"))

# name: (how the token is built, what the refusal must say)
CASES: dict[str, tuple[Callable[[Keys], str], str]] = {
    # no signature at all
    "alg none, empty signature": (unsigned("none", ""), "no signature"),
    "alg none": (unsigned("none"), "'none' is never accepted"),
    "alg None": (unsigned("None"), "'None' is never accepted"),
    "alg NONE": (unsigned("NONE"), "'NONE' is never accepted"),
    "alg nOnE": (unsigned("nOnE"), "'nOnE' is never accepted"),
    "signature stripped": (lambda k: control(k).rsplit(".", 1)[0] + ".", "no signature"),
    "alg missing": (raw('{"kid":"rsa-a"}', PAYLOAD), "no algorithm"),
    "alg not a string": (raw('{"alg":["RS256"],"kid":"rsa-a"}', PAYLOAD), "no algorithm"),
    # symmetric algorithms and key confusion
    "HS256 keyed with the RSA public key PEM": (key_confusion, "'HS256' is never accepted"),
    "HS256": (lambda k: hmac_token("HS256", b"secret"), "'HS256' is never accepted"),
    "HS384": (lambda k: hmac_token("HS384", b"secret"), "'HS384' is never accepted"),
    "HS512": (lambda k: hmac_token("HS512", b"secret"), "'HS512' is never accepted"),
    "RS256 for a provider allowing only ES256": (
        lambda k: mint(k.b_rsa, claims(iss=ISS_B), "RS256"),
        "provider 'b' does not sign with 'RS256'",
    ),
    "ES256K": (lambda k: forged(k.ec, "ES256", claims(), alg="ES256K"), "never accepted"),
    "ES256 header, kid of an RSA key": (
        lambda k: mint(k.ec, claims(), "ES256", kid="rsa-a"),
        "no ES256 key .* kid",
    ),
    # kid abuse
    "kid path traversal": (
        lambda k: mint(k.rsa, claims(), "RS256", kid="../../dev/null"),
        "no RS256 key .* kid",
    ),
    "kid SQL injection": (
        lambda k: mint(k.rsa, claims(), "RS256", kid="' OR 1=1 --"),
        "no RS256 key .* kid",
    ),
    "kid of 10,000 chars": (
        lambda k: forged(k.rsa, "RS256", claims(), kid="k" * 10_000),
        "kid is not a string of 1 to 256",
    ),
    "kid unknown": (lambda k: mint(k.evil_ec, claims(), "ES256", kid="nope"), "no ES256 key"),
    "kid empty": (lambda k: forged(k.rsa, "RS256", claims(), kid=""), "kid is not a string"),
    "kid a number": (lambda k: forged(k.rsa, "RS256", claims(), kid=1), "kid is not a string"),
    "another key with the same kid": (lambda k: mint(k.evil_rsa, claims(), "RS256"), SIG),
    # keys named or carried by the token
    "jku to an attacker URL": (
        lambda k: forged(k.evil_ec, "ES256", claims(), jku="https://evil.example/jwks"),
        r"\(jku\)",
    ),
    "x5u": (with_header(x5u="https://evil.example/cert.pem"), r"\(x5u\)"),
    "embedded jwk signed by it": (embedded_key, r"\(jwk\)"),
    "x5c": (with_header(x5c=[b64(b"not really a certificate")]), r"\(x5c\)"),
    "crit header": (with_header(crit=["x-policy"], **{"x-policy": "strict"}), r"\(crit\)"),
    "b64 false": (with_header(b64=False), r"\(b64\)"),
    # claims
    "expired beyond leeway": (lambda k: mint(k.rsa, claims(exp=T0 - 31), "RS256"), "expired"),
    "not valid yet (nbf)": (
        lambda k: mint(k.rsa, claims(nbf=T0 + 3600), "RS256"),
        "not valid yet",
    ),
    "issued far in the future (iat)": (
        lambda k: mint(k.rsa, claims(iat=T0 + 86400), "RS256"),
        "issued in the future",
    ),
    "exp NaN": (raw(HEADER, PAYLOAD.replace(f'"exp":{T0 + 300}', '"exp":NaN')), "not .*JSON"),
    "exp a string": (lambda k: mint(k.rsa, claims(exp=str(T0 + 300)), "RS256"), "exp claim"),
    "unknown issuer": (
        lambda k: mint(k.rsa, claims(iss="https://evil.example"), "RS256"),
        "no provider trusts",
    ),
    "issuer with a trailing slash": (
        lambda k: mint(k.rsa, claims(iss=ISS_A + "/"), "RS256"),
        "no provider trusts",
    ),
    "issuer case changed": (
        lambda k: mint(k.rsa, claims(iss=ISS_A.upper()), "RS256"),
        "no provider trusts",
    ),
    "issuer a list": (lambda k: mint(k.rsa, claims(iss=[ISS_A]), "RS256"), "no issuer"),
    "no issuer": (lambda k: mint(k.rsa, claims(iss=DROP), "RS256"), "no issuer"),
    "wrong audience": (lambda k: mint(k.rsa, claims(aud="other-api"), "RS256"), "audience"),
    "empty audience list": (lambda k: mint(k.rsa, claims(aud=[]), "RS256"), "audience"),
    "audience a number": (lambda k: mint(k.rsa, claims(aud=7), "RS256"), "aud claim"),
    "no audience": (lambda k: mint(k.rsa, claims(aud=DROP), "RS256"), "no audience"),
    "no exp (required)": (lambda k: mint(k.rsa, claims(exp=DROP), "RS256"), "claim.* exp"),
    "no tenant (required)": (
        lambda k: mint(k.rsa, claims(tenant=DROP), "RS256"),
        "claim.* tenant",
    ),
    "A's key, B's issuer": (lambda k: mint(k.ec, claims(iss=ISS_B), "ES256"), "provider 'b'"),
    # structure
    "longer than MAX_TOKEN_BYTES": (
        lambda k: mint(k.rsa, claims(pad="x" * MAX_TOKEN_BYTES), "RS256"),
        "at most 16384 bytes",
    ),
    "invalid base64 chars": (swap(1, lambda s: s[:10] + "+/" + s[12:]), "base64url"),
    "base64 padding": (swap(0, lambda s: s + "=="), "base64url"),
    "signature with non-canonical trailing bits": (
        swap(2, lambda s: s[:-1] + NEXT[s[-1]]),
        "signature is not base64url",
    ),
    "two segments": (lambda k: ".".join(control(k).split(".")[:2]), "2 segments"),
    "four segments": (lambda k: control(k) + ".e30", "4 segments"),
    "five segments (JWE-shaped)": (lambda k: control(k) + ".e30.e30", "encrypted"),
    "empty string": (lambda k: "", "1 segments"),
    "header not JSON": (raw("not json", PAYLOAD), "header is not base64url JSON"),
    "payload not JSON": (raw(HEADER, "not json"), "payload is not base64url JSON"),
    "payload a JSON array": (raw(HEADER, "[" + PAYLOAD + "]"), "not a JSON object"),
    "payload invalid UTF-8": (raw(HEADER, b'{"iss":"\xff"}'), "payload is not"),
    "payload nested 5,000 deep": (raw(HEADER, "[" * 5000 + "]" * 5000), "payload is not"),
    "duplicate sub": (raw(HEADER, PAYLOAD[:-1] + ',"sub":"admin"}'), "payload repeats"),
    "duplicate aud": (raw(HEADER, '{"aud":"evil",' + PAYLOAD[1:]), "payload repeats"),
    "duplicate key in a nested object": (
        raw(HEADER, PAYLOAD[:-1] + ',"x":{"a":1,"a":2}}'),
        "payload repeats",
    ),
    "duplicate alg in header": (
        raw('{"alg":"none","alg":"RS256","kid":"rsa-a"}', PAYLOAD),
        "header repeats",
    ),
    # tampering
    "payload changed after signing": (swapped_payload, SIG),
    "header alg RS256 -> RS384, same signature": (swapped_alg, SIG),
    "signature bit flipped": (
        swap(2, lambda s: s[:5] + ("A" if s[5] != "A" else "B") + s[6:]),
        SIG,
    ),
    "ES256 signature one byte short": (lambda k: es256_signature(k, der=False), SIG),
    "ES256 signature DER-encoded": (lambda k: es256_signature(k, der=True), SIG),
    # transport noise
    "leading whitespace": (lambda k: " " + control(k), "base64url"),
    "trailing newline": (lambda k: control(k) + "\n", "base64url"),
    "embedded newline": (swap(1, lambda s: s[:8] + "\n" + s[8:]), "base64url"),
    "Bearer prefix left on": (lambda k: "Bearer " + control(k), "base64url"),
    "non-ASCII character": (swap(1, lambda s: s[:8] + "é" + s[9:]), "outside base64url"),
    "fullwidth letters": (swap(1, lambda s: s[:8] + "\uff21" + s[9:]), "outside base64url"),
}


@pytest.fixture(scope="module")
def tokens(keys: Keys) -> dict[str, str]:
    return {name: build(keys) for name, (build, _) in CASES.items()}


def test_there_are_at_least_forty_cases() -> None:
    assert len(CASES) >= 40


def test_the_control_token_verifies(keys: Keys) -> None:
    verified = asyncio.run(verifier(keys).verify(control(keys)))
    assert verified.claims["sub"] == "alice"
    assert verified.provider.name == "a"
    others: list[tuple[Key, str]] = [(keys.ec, "ES256"), (keys.ed, "EdDSA")]
    for key, alg in others:
        asyncio.run(verifier(keys).verify(mint(key, claims(), alg)))
    asyncio.run(verifier(keys).verify(mint(keys.b_ec, claims(iss=ISS_B), "ES256")))


def test_expired_but_within_leeway_verifies(keys: Keys) -> None:
    asyncio.run(verifier(keys).verify(mint(keys.rsa, claims(exp=T0 - 29), "RS256")))


@pytest.mark.parametrize("name", CASES)
def test_attack_is_refused(name: str, keys: Keys, tokens: dict[str, str]) -> None:
    token = tokens[name]
    with pytest.raises(Unauthenticated, match=CASES[name][1]) as refused:
        asyncio.run(verifier(keys).verify(token))
    reason = str(refused.value)
    assert reason
    assert len(reason) < 300
    for secret in [token, *token.split(".")]:
        if len(secret.strip()) >= 16:
            assert secret.strip() not in reason


def test_a_cached_good_token_does_not_vouch_for_its_tampered_twin(keys: Keys) -> None:
    v = verifier(keys)
    good = control(keys)

    async def main() -> None:
        await v.verify(good)
        with pytest.raises(Unauthenticated):
            await v.verify(swapped_payload(keys))
        with pytest.raises(Unauthenticated):
            await v.verify(good + " ")

    asyncio.run(main())


@pytest.mark.parametrize("header", ["jku", "x5u"])
def test_a_key_url_in_the_token_is_never_fetched(keys: Keys, header: str) -> None:
    with JwksServer(keys.evil_ec) as attacker:
        token = forged(keys.evil_ec, "ES256", claims(), **{header: attacker.jwks_url})
        with pytest.raises(Unauthenticated, match=f"\\({header}\\)"):
            asyncio.run(verifier(keys).verify(token))
        assert sum(attacker.requests.values()) == 0
