"""Signing in to an OpenID Provider from the command line: the tokens ``evalsi login`` keeps.

Two flows for a public client (no secret to leak from a laptop): the device authorization
grant (RFC 8628), which works over SSH and in containers because the browser can be on
another machine, and the authorization code flow with PKCE (RFC 7636) and a loopback redirect
(RFC 8252 §7.3), for a desktop with a browser. Both ask the provider, through its discovery
document, where its endpoints are, and refuse a document naming another issuer (a mix-up).

An access token is requested for ``audience``: sent as the RFC 8707 ``resource`` when it is an
absolute URI (the standard; a provider rejects anything else there) and always as
``audience`` (Auth0 and Okta's parameter; others ignore it). No token value ever reaches a
message, a log or a repr.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import dataclasses
import hashlib
import json
import secrets
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from evalsi.auth._credentials import Tokens, load, normalize_server_url, save
from evalsi.core import UserError, lazy_module

if TYPE_CHECKING:
    import aiohttp
    from aiohttp import web
else:  # a command that only reads a kept token never waits for aiohttp to import
    aiohttp = lazy_module("aiohttp")
    web = lazy_module("aiohttp.web")

DEFAULT_SCOPES = ("openid", "offline_access", "email", "profile")
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
_WAITING = ("authorization_pending", "slow_down")
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
_HTTP_TIMEOUT_S = 30


async def device_login(
    issuer: str,
    client_id: str,
    *,
    audience: str | None,
    scopes: Sequence[str] = DEFAULT_SCOPES,
    prompt: Callable[[str, str, str | None], None],
) -> Tokens:
    """Signs in with the device authorization grant (RFC 8628).

    ``prompt(user_code, verification_uri, verification_uri_complete)`` shows the user where to
    go; then the token endpoint is polled every ``interval`` seconds (5 unless the provider
    says otherwise, 5 more after each ``slow_down``) until the user approves, denies, or the
    code expires.
    """
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=_HTTP_TIMEOUT_S)) as http:
        meta = await _discover(http, issuer)
        endpoint = _endpoint(meta, "device_authorization_endpoint")
        token_endpoint = _endpoint(meta, "token_endpoint")
        form = {"client_id": client_id, "scope": " ".join(scopes), **_audience(audience)}
        status, grant = await _post(http, endpoint, form)
        if status != 200:
            raise UserError(f"the device authorization request was refused: {_oauth_error(grant)}")
        try:
            device_code = str(grant["device_code"])
            user_code = str(grant["user_code"])
            uri = str(grant.get("verification_uri") or grant["verification_url"])
            complete = grant.get("verification_uri_complete")
            deadline = time.monotonic() + float(grant.get("expires_in") or 600)
            interval = float(grant.get("interval") or 5)
        except (KeyError, TypeError, ValueError) as e:
            raise UserError(f"the device authorization response lacks {e}") from None
        prompt(user_code, uri, None if complete is None else str(complete))
        poll = {"grant_type": DEVICE_GRANT, "device_code": device_code, "client_id": client_id}
        while True:
            await asyncio.sleep(interval)
            status, answer = await _post(http, token_endpoint, poll)
            error = answer.get("error") if status != 200 else None
            if error is None:
                return _tokens(answer, issuer, client_id, status=status)
            late = time.monotonic() > deadline  # some providers forget an expired code
            if error == "expired_token" or (late and error in (*_WAITING, "invalid_grant")):
                raise UserError("the device code expired before the sign-in was approved")
            if error == "access_denied":
                raise UserError("the sign-in was denied at the provider (access_denied)")
            if error not in _WAITING:
                raise UserError(
                    f"the token endpoint refused the device code: {_oauth_error(answer)}"
                )
            if error == "slow_down":
                interval += 5


async def pkce_login(
    issuer: str,
    client_id: str,
    *,
    audience: str | None,
    open_browser: Callable[[str], None],
    timeout_s: float = 300,
    scopes: Sequence[str] = DEFAULT_SCOPES,
) -> Tokens:
    """Signs in with the authorization code flow, PKCE (S256) and a loopback redirect.

    A listener on ``127.0.0.1`` (an ephemeral port) takes the redirect at ``/callback``: it
    refuses a callback whose ``state`` is not this sign-in's, and accepts exactly one that is.
    ``open_browser`` is given the authorization URL.
    """
    state = secrets.token_urlsafe(32)
    nonce = secrets.token_urlsafe(32)
    verifier = secrets.token_urlsafe(64)  # 86 characters, within RFC 7636's 43..128
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=_HTTP_TIMEOUT_S)) as http:
        meta = await _discover(http, issuer)
        methods = meta.get("code_challenge_methods_supported")
        if isinstance(methods, list) and "S256" not in methods:
            raise UserError(f"the provider {issuer} does not support PKCE with S256")
        authorize = _endpoint(meta, "authorization_endpoint")
        token_endpoint = _endpoint(meta, "token_endpoint")
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Mapping[str, str]] = loop.create_future()
        runner = web.AppRunner(_callback_app(state, answer), access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            redirect_uri = f"http://127.0.0.1:{runner.addresses[0][1]}/callback"
            query = {
                "response_type": "code",
                "client_id": client_id,
                "redirect_uri": redirect_uri,
                "scope": " ".join(scopes),
                "state": state,
                "nonce": nonce,
                "code_challenge": challenge.rstrip(b"=").decode(),
                "code_challenge_method": "S256",
                # OpenID Connect Core §11: offline access needs the user's consent
                **({"prompt": "consent"} if "offline_access" in scopes else {}),
                **_audience(audience),
            }
            open_browser(f"{authorize}{'&' if '?' in authorize else '?'}{urlencode(query)}")
            try:
                async with asyncio.timeout(timeout_s):
                    params = await answer
            except TimeoutError:
                raise UserError(
                    f"no sign-in came back from the browser in {timeout_s:g} s"
                ) from None
        finally:
            await runner.cleanup()
        if "error" in params:
            raise UserError(f"the provider refused the sign-in: {_oauth_error(params)}")
        if params.get("iss", issuer) != issuer:  # RFC 9207: a response from another issuer
            raise UserError(f"the sign-in came back from {params['iss']!r}, not {issuer!r}")
        form = {
            "grant_type": "authorization_code",
            "code": params.get("code", ""),
            "redirect_uri": redirect_uri,
            "client_id": client_id,
            "code_verifier": verifier,
            **_audience(audience),
        }
        status, body = await _post(http, token_endpoint, form)
        tokens = _tokens(body, issuer, client_id, status=status)
        _check_id_token(tokens, nonce)
        return tokens


async def refresh(issuer: str, client_id: str, tokens: Tokens) -> Tokens:
    """New tokens for a refresh token; a value the provider does not renew is kept."""
    if tokens.refresh_token is None:
        raise UserError("there is no refresh token: sign in again (evalsi login)")
    form = {"grant_type": "refresh_token", "refresh_token": tokens.refresh_token}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=_HTTP_TIMEOUT_S)) as http:
        meta = await _discover(http, issuer)
        endpoint = _endpoint(meta, "token_endpoint")
        status, body = await _post(http, endpoint, {**form, "client_id": client_id})
    new = _tokens(body, issuer, client_id, status=status)
    refresh_token, id_token = new.refresh_token or tokens.refresh_token, new.id_token
    return dataclasses.replace(
        new, refresh_token=refresh_token, id_token=id_token or tokens.id_token
    )


def access_token(server_url: str, *, refresh_within_s: float = 60) -> str | None:
    """The access token ``evalsi login`` kept for ``server_url``, renewed with the refresh
    token (and kept again) when it expires within ``refresh_within_s``; None when there is
    none. An expired token that cannot be renewed is an error that says to log in again."""
    tokens = load(server_url)
    if tokens is None:
        return None
    if tokens.expires_within(refresh_within_s):
        if tokens.refresh_token is None:
            raise UserError(
                f"the sign-in to {normalize_server_url(server_url)} has expired",
                hint=f"evalsi login --server {server_url}",
            )
        # Its own loop in its own thread: a caller may already run one (a notebook, the
        # async client).
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            issuer, client_id = tokens.issuer, tokens.client_id
            tokens = pool.submit(asyncio.run, refresh(issuer, client_id, tokens)).result()
        save(server_url, tokens)
    return tokens.access_token


def _callback_app(state: str, answer: asyncio.Future[Mapping[str, str]]) -> web.Application:
    async def callback(request: web.Request) -> web.Response:
        params = request.query
        if not secrets.compare_digest(params.get("state", ""), state):
            return web.Response(status=400, text="This sign-in link is not the one evalsi opened.")
        if answer.done():
            return web.Response(status=409, text="This sign-in was already completed.")
        if "code" not in params and "error" not in params:
            return web.Response(status=400, text="The sign-in link carries no code.")
        answer.set_result(dict(params))
        if "error" in params:
            return web.Response(text="The sign-in was refused. You can close this window.")
        return web.Response(text="Signed in to evalsi. You can close this window.")

    app = web.Application()
    app.router.add_get("/callback", callback)
    return app


def _audience(audience: str | None) -> dict[str, str]:
    if not audience:
        return {}
    parts = urllib.parse.urlsplit(audience)
    resource = {"resource": audience} if parts.scheme and not parts.fragment else {}
    return {"audience": audience, **resource}


def _check_https(url: str, what: str) -> None:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in _LOOPBACK_HOSTS):
        return
    raise UserError(f"{what} {url!r} is not https (plain http only on loopback)")


async def _discover(http: aiohttp.ClientSession, issuer: str) -> dict[str, Any]:
    _check_https(issuer, "the issuer")
    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    try:
        async with http.get(url) as resp:
            if resp.status != 200:
                raise UserError(f"the discovery document {url} answered HTTP {resp.status}")
            meta = await resp.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, json.JSONDecodeError) as e:
        raise UserError(f"cannot read the discovery document {url}: {type(e).__name__}") from e
    if not isinstance(meta, dict):
        raise UserError(f"the discovery document {url} is not a JSON object")
    if meta.get("issuer") != issuer:
        raise UserError(
            f"the discovery document at {url} names the issuer {meta.get('issuer')!r}, not "
            f"{issuer!r}: configure the issuer exactly as the provider names itself"
        )
    return meta


def _endpoint(meta: Mapping[str, Any], name: str) -> str:
    url = meta.get(name)
    if not isinstance(url, str) or not url:
        raise UserError(f"the provider {meta.get('issuer')!r} has no {name}")
    _check_https(url, f"the provider's {name}")
    return url


async def _post(
    http: aiohttp.ClientSession, url: str, form: Mapping[str, str]
) -> tuple[int, dict[str, Any]]:
    try:
        async with http.post(url, data=dict(form), headers={"accept": "application/json"}) as r:
            status, text = r.status, await r.text()
    except (aiohttp.ClientError, TimeoutError) as e:
        raise UserError(f"cannot reach {url}: {type(e).__name__}") from e
    try:
        body = json.loads(text)
    except json.JSONDecodeError:
        body = None
    if not isinstance(body, dict):
        raise UserError(f"{url} answered HTTP {status} without a JSON object")
    return status, body


def _oauth_error(body: Mapping[str, Any]) -> str:
    error = str(body.get("error", "unknown error"))[:100]
    description = body.get("error_description")
    return f"{error} ({str(description)[:200]})" if description else error


def _tokens(body: Mapping[str, Any], issuer: str, client_id: str, *, status: int) -> Tokens:
    if status != 200 or "error" in body:
        raise UserError(f"the token endpoint refused the request: {_oauth_error(body)}")
    access = body.get("access_token")
    if not isinstance(access, str) or not access:
        raise UserError("the token endpoint's answer has no access_token")
    if str(body.get("token_type", "")).lower() != "bearer":  # DPoP would need a key we lack
        raise UserError(f"the token endpoint gave an unknown token_type {body.get('token_type')!r}")
    expires_in = body.get("expires_in")
    refresh_token, id_token = body.get("refresh_token"), body.get("id_token")
    return Tokens(
        access_token=access,
        refresh_token=refresh_token if isinstance(refresh_token, str) else None,
        id_token=id_token if isinstance(id_token, str) else None,
        expires_at=time.time() + float(expires_in) if isinstance(expires_in, int | float) else None,
        issuer=issuer,
        client_id=client_id,
    )


def _check_id_token(tokens: Tokens, nonce: str) -> None:
    """The ID token came straight from the token endpoint (OpenID Connect Core §3.1.3.7: no
    signature check needed there), but it must be for this client, this issuer, this sign-in."""
    if tokens.id_token is None:
        return
    try:
        payload = tokens.id_token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError) as e:
        raise UserError("the ID token from the token endpoint is not a JWT") from e
    if not isinstance(claims, dict):
        raise UserError("the ID token from the token endpoint is not a JWT")
    audience = claims.get("aud")
    audiences = audience if isinstance(audience, list) else [audience]
    if claims.get("iss") != tokens.issuer or tokens.client_id not in audiences:
        raise UserError("the ID token was issued by another issuer or for another client")
    if claims.get("nonce") != nonce:
        raise UserError("the ID token's nonce is not this sign-in's (a replayed response?)")
