"""A real OpenID Provider for tests: ``tests/support/oidc/provider.mjs`` (the certified
``oidc-provider`` package on Node.js) in its own process on a free loopback port.

``OidcProvider`` starts it and stops its process group; ``approve_device`` and
``approve_authorization`` play the user in a browser with plain HTTP and a cookie jar: they
follow the provider's redirects, sign in as a test user on its interaction pages and allow (or
deny) the request. Both block: call them from a thread while the code under test waits.

The npm package comes from ``.tools/npm/node_modules`` at the repository root (``.ci/run``
installs it there); without Node.js or the package, ``OidcProvider`` skips the test.
"""

from __future__ import annotations

import html
import http.cookiejar
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).resolve().parent / "oidc" / "provider.mjs"
NODE_MODULES = ROOT / ".tools" / "npm" / "node_modules"
CLIENT_ID = "evalsi-cli"
START_TIMEOUT_S = 30.0


def skip_reason() -> str | None:
    """Why the provider cannot run here, or ``None`` when it can."""
    if shutil.which("node") is None:
        return "Node.js is not installed (the test OpenID Provider runs on it)"
    if not (NODE_MODULES / "oidc-provider" / "package.json").is_file():
        return f"oidc-provider is not installed in {NODE_MODULES} (.ci/run installs it)"
    return None


class OidcProvider:
    """The provider process: ``with OidcProvider(audience="evalsi") as op: op.issuer``.

    ``config`` holds more of ``provider.mjs``'s settings (``users``, ``resources``,
    ``deviceCodeTTL``, ``slowDownFirst``, ...). ``device_interval`` is the ``interval`` of
    device authorization responses, in seconds (RFC 8628 defaults to 5; tests use 1).
    """

    def __init__(
        self,
        *,
        audience: str = "evalsi",
        device_interval: int = 1,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        self.audience = audience
        self.client_id = CLIENT_ID
        self._config = {"audience": audience, "deviceInterval": device_interval, **(config or {})}
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self.issuer = ""

    def __enter__(self) -> OidcProvider:
        reason = skip_reason()
        if reason is not None:
            pytest.skip(reason)
        self._stderr = tempfile.TemporaryFile()
        env = {**os.environ, "NODE_PATH": str(NODE_MODULES), "NODE_NO_WARNINGS": "1"}
        self._proc = subprocess.Popen(
            ["node", str(SCRIPT), "--port", "0", "--config", json.dumps(self._config)],
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            start_new_session=True,  # its own process group, stopped as one
        )
        try:
            self.issuer = self._read_issuer()
            document = self.discovery()
            assert document["issuer"] == self.issuer, document
        except BaseException:
            self._stop()
            raise
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop()

    def _read_issuer(self) -> str:
        assert self._proc is not None
        stdout = self._proc.stdout
        assert stdout is not None
        line: list[bytes] = []
        reader = threading.Thread(target=lambda: line.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(START_TIMEOUT_S)
        text = line[0].decode() if line else ""
        if not text.startswith("OIDC_ISSUER "):
            raise RuntimeError(f"the OpenID Provider did not start: {self.stderr()}")
        return text.split()[1]

    def _stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            os.killpg(self._proc.pid, signal.SIGTERM)
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait()
        if self._proc is not None and self._proc.stdout is not None:
            self._proc.stdout.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def stderr(self) -> str:
        """What the provider wrote to stderr so far (for failure messages)."""
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-4000:]

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.issuer + path, data=data, method=method)
        req.add_header("content-type", "application/json")
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    def discovery(self) -> dict[str, Any]:
        """The discovery document (``/.well-known/openid-configuration``)."""
        document: dict[str, Any] = self._call("GET", "/.well-known/openid-configuration")
        return document

    def jwks(self) -> Any:
        """The JWKS served at the discovery document's ``jwks_uri``."""
        with urllib.request.urlopen(self.discovery()["jwks_uri"], timeout=30) as resp:
            return json.loads(resp.read())

    def rotate(self) -> str:
        """A new key signs from now on (the old ones stay published); returns its ``kid``.

        Live: ``provider.mjs`` builds a new Provider with the new key set behind the same
        socket, so sessions, grants and refresh tokens survive."""
        kid: str = self._call("POST", "/test/rotate", {})["kid"]
        return kid

    def withdraw_old(self) -> list[str]:
        """Every key but the current one leaves the JWKS; returns the ``kid``s left."""
        kids: list[str] = self._call("POST", "/test/withdraw", {})["kids"]
        return kids

    def mint(self, claims: Mapping[str, Any]) -> str:
        """A JWT signed by the current key with these claims, like a GitHub Actions job token.

        ``iss`` (the issuer), ``iat``, ``nbf``, ``exp`` (+300 s) and ``jti`` are added unless
        given; a claim given as ``None`` is left out."""
        token: str = self._call("POST", "/test/mint", dict(claims))["token"]
        return token

    def configure(self, **settings: Any) -> None:
        """Changes runtime settings: ``deviceInterval``, ``slowDownFirst``, ``deviceCodeTTL``."""
        self._call("POST", "/test/config", settings)

    def device_polls(self) -> list[dict[str, str]]:
        """Every device-code poll the token endpoint saw: ``{"code", "outcome"}`` in order
        (``outcome``: ``ok`` or the OAuth error, e.g. ``authorization_pending``)."""
        polls: list[dict[str, str]] = self._call("GET", "/test/polls")
        return polls


class _Browser:
    """Plain HTTP with cookies that follows redirects within one origin only."""

    def __init__(self, origin: str) -> None:
        self.origin = _origin(origin)
        self.left_to: str | None = None  # the first redirect to another origin
        browser = self

        class Redirects(urllib.request.HTTPRedirectHandler):
            def redirect_request(  # type: ignore[no-untyped-def]
                self, req, fp, code, msg, headers, newurl
            ):
                if _origin(newurl) != browser.origin:
                    browser.left_to = newurl
                    return None
                return super().redirect_request(req, fp, code, msg, headers, newurl)

        jar = urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        self._opener = urllib.request.build_opener(jar, Redirects())

    def open(self, url: str, form: Mapping[str, str] | None = None) -> tuple[str, str]:
        """``(final url, body)``; the body is empty once a redirect left the origin."""
        data = None if form is None else urllib.parse.urlencode(form).encode()
        try:
            with self._opener.open(urllib.parse.urljoin(self.origin, url), data, 30) as resp:
                return resp.geturl(), resp.read().decode()
        except urllib.error.HTTPError as e:
            with e:
                if self.left_to is not None:
                    return self.left_to, ""
                raise AssertionError(f"{e.code} from {e.url}: {e.read().decode()[:500]}") from e


def _origin(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _prompt(body: str) -> str:
    found = re.search(r'data-prompt="([\w-]+)"', body)
    return found.group(1) if found else ""


def _hidden_form(body: str) -> tuple[str, dict[str, str]]:
    """The action and the hidden fields of the page's form."""
    action = re.search(r'<form[^>]* action="([^"]+)"', body)
    if action is None:
        raise AssertionError(f"no form on the page: {body[:500]}")
    fields = re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', body)
    return html.unescape(action.group(1)), {k: html.unescape(v) for k, v in fields}


def _interact(browser: _Browser, body: str, username: str, approve: bool) -> str:
    """Signs in and allows (or denies) until the provider is done; returns the last body."""
    for _ in range(6):
        prompt = _prompt(body)
        actions = dict(re.findall(r'action="(/interaction/[\w-]+/(\w+))"', body))
        by_name = {name: action for action, name in actions.items()}
        if prompt == "login" and approve:
            _, body = browser.open(by_name["login"], {"username": username})
        elif prompt in ("login", "consent") and not approve:
            _, body = browser.open(by_name["abort"], {})
        elif prompt == "consent":
            _, body = browser.open(by_name["confirm"], {})
        else:
            return body
    raise AssertionError(f"the provider kept asking: {body[:500]}")


def approve_device(
    provider_url: str, user_code: str, username: str, *, approve: bool = True
) -> None:
    """Confirms ``user_code`` at the provider's verification page, signs in as ``username`` and
    allows the request (``approve=False``: denies it at the consent step)."""
    browser = _Browser(provider_url)
    query = urllib.parse.urlencode({"user_code": user_code})
    _, body = browser.open(f"/device?{query}")
    if _prompt(body) != "device-confirm":  # an auto-submitting form first (it sets the xsrf)
        _, body = browser.open(*_hidden_form(body))
    if _prompt(body) != "device-confirm":
        raise AssertionError(f"no confirmation page for the user code: {body[:500]}")
    _, body = browser.open(*_hidden_form(body))
    body = _interact(browser, body, username, approve)
    expected = "device-success" if approve else "device"
    if _prompt(body) != expected:
        raise AssertionError(f"the device flow did not end as expected: {body[:500]}")


def approve_authorization(authorize_url: str, username: str, *, approve: bool = True) -> str:
    """Opens ``authorize_url``, signs in as ``username`` and allows (or denies) the request;
    returns the URL the provider sends the browser back to (the client's ``redirect_uri`` with
    ``code`` and ``state``, or ``error``), without opening it."""
    browser = _Browser(authorize_url)
    _url, body = browser.open(authorize_url)
    if browser.left_to is None:
        body = _interact(browser, body, username, approve)
    if browser.left_to is None:
        raise AssertionError(f"the provider did not redirect back to the client: {body[:500]}")
    return browser.left_to
