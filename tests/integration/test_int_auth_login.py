"""``evalsi login``'s flows against a real OpenID Provider (``oidc-provider`` on Node.js).

The user's part (the verification page, signing in, consent) is played with plain HTTP from a
thread while the flow under test waits, as a browser would; tokens are checked with joserfc
against the JWKS the provider publishes.
"""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from joserfc import jws, jwt
from joserfc.errors import InvalidKeyIdError
from joserfc.jwk import KeySet

from evalsi.auth._credentials import Tokens
from evalsi.auth._login import device_login, pkce_login, refresh
from evalsi.core import UserError
from tests.support.oidc_provider import OidcProvider, approve_authorization, approve_device

API = "https://api.evalsi.test"


@pytest.fixture(scope="module")
def op() -> Iterator[OidcProvider]:
    # device codes live 30 s: a flow that polls wrongly fails in that time rather than hangs
    config = {"resources": {API: API}, "deviceCodeTTL": 30}
    with OidcProvider(audience="evalsi", config=config) as provider:
        yield provider


def verify(op: OidcProvider, token: str, audience: str) -> dict[str, Any]:
    """The token's claims once its signature verifies against the provider's JWKS."""
    decoded = jwt.decode(token, KeySet.import_key_set(op.jwks()), algorithms=["RS256"])
    claims = jwt.JWTClaimsRegistry(
        iss={"essential": True, "value": op.issuer},
        aud={"essential": True, "value": audience},
        exp={"essential": True},
    )
    claims.validate(decoded.claims)
    return dict(decoded.claims)


def kid(token: str) -> str:
    return str(jws.extract_compact(token.encode()).protected["kid"])


def in_thread(errors: list[BaseException], work: Callable[[], None]) -> None:
    """Runs ``work`` in a daemon thread; its exception, if any, lands in ``errors``."""

    def run() -> None:
        try:
            work()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    threading.Thread(target=run, daemon=True).start()


def device(op: OidcProvider, *, approve: bool = True, wait_for_poll: bool = False) -> Tokens:
    """Signs in with the device flow while a thread plays alice (after the first poll, with
    ``wait_for_poll``)."""
    errors: list[BaseException] = []
    seen = len(op.device_polls())

    def prompt(user_code: str, uri: str, complete: str | None) -> None:
        assert uri == f"{op.issuer}/device"
        assert complete is not None
        assert user_code in urllib.parse.unquote(complete)

        def user() -> None:
            while wait_for_poll and len(op.device_polls()) == seen:
                time.sleep(0.05)
            approve_device(op.issuer, user_code, "alice", approve=approve)

        in_thread(errors, user)

    try:
        return asyncio.run(device_login(op.issuer, op.client_id, audience="evalsi", prompt=prompt))
    finally:
        assert not errors, errors


def pkce(
    op: OidcProvider,
    *,
    audience: str | None = "evalsi",
    approve: bool = True,
    open_browser: Callable[[str], None] | None = None,
) -> Tokens:
    """Signs in with PKCE while a thread plays alice and follows the redirect back."""
    errors: list[BaseException] = []

    def browser(url: str) -> None:
        def user() -> None:
            back = approve_authorization(url, "alice", approve=approve)
            urllib.request.urlopen(back, timeout=10).close()

        in_thread(errors, user)

    login = pkce_login(
        op.issuer, op.client_id, audience=audience, open_browser=open_browser or browser
    )
    try:
        return asyncio.run(login)
    finally:
        assert not errors, errors


def test_the_device_flow_waits_for_the_user_then_yields_a_jwt_for_the_audience(
    op: OidcProvider,
) -> None:
    seen = len(op.device_polls())
    tokens = device(op, wait_for_poll=True)
    outcomes = [p["outcome"] for p in op.device_polls()[seen:]]
    assert outcomes[0] == "authorization_pending"
    assert outcomes[-1] == "ok"
    assert "slow_down" not in outcomes  # the provider answers slow_down to a poll too soon
    claims = verify(op, tokens.access_token, "evalsi")
    assert claims["sub"] == "alice"
    assert claims["client_id"] == "evalsi-cli"
    assert (claims["email"], claims["email_verified"]) == ("alice@example.com", True)
    assert claims["groups"] == ["eval-admins", "staff"]
    assert tokens.refresh_token
    assert tokens.id_token
    assert tokens.expires_at is not None
    assert not tokens.expires_within(60)
    assert (tokens.issuer, tokens.client_id) == (op.issuer, "evalsi-cli")


def test_a_device_sign_in_the_user_denies_is_a_clear_error(op: OidcProvider) -> None:
    with pytest.raises(UserError, match=r"denied at the provider \(access_denied\)"):
        device(op, approve=False)


@pytest.mark.slow
def test_the_device_flow_backs_off_5_seconds_after_slow_down() -> None:
    # a client that ignored slow_down would poll too soon until the code expired
    with OidcProvider(config={"slowDownFirst": True, "deviceCodeTTL": 20}) as op:
        device(op)
        # a poll sooner than interval + 5 s after the slow_down would be answered slow_down again
        assert [p["outcome"] for p in op.device_polls()] == ["slow_down", "ok"]


def test_a_device_code_nobody_approves_expires() -> None:
    with OidcProvider(config={"deviceCodeTTL": 1}) as op:
        login = device_login(op.issuer, op.client_id, audience=None, prompt=lambda *_: None)
        with pytest.raises(UserError, match="device code expired"):
            asyncio.run(login)


def test_the_pkce_flow_through_a_loopback_redirect(op: OidcProvider) -> None:
    back: list[str] = []
    errors: list[BaseException] = []

    def open_browser(url: str) -> None:
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
        assert query["code_challenge_method"] == ["S256"]
        assert len(query["code_challenge"][0]) == 43
        assert query["redirect_uri"][0].startswith("http://127.0.0.1:")
        back.append(approve_authorization(url, "alice"))  # the provider is another process
        in_thread(errors, lambda: urllib.request.urlopen(back[0], timeout=10).close())

    tokens = pkce(op, open_browser=open_browser)
    assert not errors, errors
    claims = verify(op, tokens.access_token, "evalsi")
    assert claims["sub"] == "alice"
    assert claims["groups"] == ["eval-admins", "staff"]
    assert tokens.refresh_token
    assert tokens.id_token
    assert urllib.parse.parse_qs(urllib.parse.urlsplit(back[0]).query)["iss"] == [op.issuer]
    with pytest.raises(urllib.error.URLError):  # the listener took its one callback and closed
        urllib.request.urlopen(back[0], timeout=5)


def test_a_callback_with_another_state_is_refused_and_does_not_end_the_sign_in(
    op: OidcProvider,
) -> None:
    refused: list[int] = []
    errors: list[BaseException] = []

    def open_browser(url: str) -> None:
        redirect = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["redirect_uri"][0]

        def user() -> None:
            for query in ("code=forged&state=forged", "error=access_denied&state=forged"):
                with pytest.raises(urllib.error.HTTPError) as e:
                    urllib.request.urlopen(f"{redirect}?{query}", timeout=10)
                e.value.close()
                refused.append(e.value.code)
            back = approve_authorization(url, "alice")
            urllib.request.urlopen(back, timeout=10).close()

        in_thread(errors, user)

    tokens = pkce(op, open_browser=open_browser)
    assert not errors, errors
    assert refused == [400, 400]
    verify(op, tokens.access_token, "evalsi")


def test_a_pkce_sign_in_the_user_denies_is_a_clear_error(op: OidcProvider) -> None:
    with pytest.raises(UserError, match="refused the sign-in: access_denied"):
        pkce(op, approve=False)


def test_no_callback_in_time_is_a_clear_error(op: OidcProvider) -> None:
    login = pkce_login(
        op.issuer, op.client_id, audience=None, open_browser=lambda _: None, timeout_s=0.2
    )
    with pytest.raises(UserError, match=r"no sign-in came back from the browser in 0\.2 s"):
        asyncio.run(login)


def test_an_absolute_uri_audience_is_sent_as_the_resource(op: OidcProvider) -> None:
    tokens = pkce(op, audience=API)
    assert verify(op, tokens.access_token, API)["aud"] == API


def test_refresh_renews_the_tokens_and_rotates_the_refresh_token(op: OidcProvider) -> None:
    first = pkce(op)
    second = asyncio.run(refresh(op.issuer, op.client_id, first))
    assert second.access_token != first.access_token
    assert second.refresh_token not in (None, first.refresh_token)
    assert verify(op, second.access_token, "evalsi")["sub"] == "alice"
    with pytest.raises(UserError, match="refused the request: invalid_grant"):
        asyncio.run(refresh(op.issuer, op.client_id, first))  # a used refresh token


def test_a_discovery_document_naming_another_issuer_is_refused(op: OidcProvider) -> None:
    other = op.issuer.replace("127.0.0.1", "localhost")
    with pytest.raises(UserError, match=r"names the issuer 'http://127\.0\.0\.1:"):
        asyncio.run(refresh(other, op.client_id, pkce(op)))


def test_plain_http_to_a_remote_issuer_is_refused() -> None:
    login = device_login("http://idp.example", "evalsi-cli", audience=None, prompt=print)
    with pytest.raises(UserError, match="is not https"):
        asyncio.run(login)


def test_keys_rotate_live_and_a_withdrawn_key_no_longer_verifies() -> None:
    with OidcProvider() as op:
        tokens = device(op)
        old_token = op.mint({"aud": "evalsi"})
        old = kid(old_token)
        assert kid(tokens.access_token) == old
        new = op.rotate()
        assert new != old
        assert {k["kid"] for k in op.jwks()["keys"]} == {old, new}
        renewed = asyncio.run(refresh(op.issuer, op.client_id, tokens))  # state carried over
        assert kid(renewed.access_token) == new
        assert kid(op.mint({"aud": "evalsi"})) == new
        verify(op, old_token, "evalsi")  # still published
        assert op.withdraw_old() == [new]
        assert [k["kid"] for k in op.jwks()["keys"]] == [new]
        verify(op, renewed.access_token, "evalsi")
        with pytest.raises(InvalidKeyIdError, match="No key for kid"):
            verify(op, old_token, "evalsi")


def test_minted_tokens_look_like_a_github_actions_job_token(op: OidcProvider) -> None:
    sub = "repo:acme/agent:ref:refs/heads/main"
    token = op.mint(
        {"sub": sub, "repository": "acme/agent", "ref": "refs/heads/main", "aud": "evalsi"}
    )
    claims = verify(op, token, "evalsi")
    assert (claims["sub"], claims["repository"], claims["iss"]) == (sub, "acme/agent", op.issuer)
    assert "exp" not in jwt.decode(op.mint({"exp": None}), KeySet.import_key_set(op.jwks())).claims
    document = op.discovery()
    assert document["id_token_signing_alg_values_supported"] == ["RS256"]
    for name in ("jwks_uri", "subject_types_supported", "response_types_supported"):
        assert name in document
    assert {"sub", "email", "groups"} <= set(document["claims_supported"])
    assert "openid" in document["scopes_supported"]


def test_tokens_never_show_their_values(op: OidcProvider) -> None:
    tokens = pkce(op)
    text = repr(tokens) + str(tokens)
    for value in (tokens.access_token, tokens.refresh_token, tokens.id_token):
        assert value
        assert value not in text
    assert op.issuer in text
